"""Repository for schedules and their runs: one row per slot, claimed by inserting it.

The unique index on (schedule_id, slot_key) is what makes a slot run once: `claim` inserts the
run row and reports whether it was this call that did, in the one transaction that writes it.
Every time is passed in (the scheduler's injected clock), never read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from store.db import AnyConnection, AnyDatabase

RUNNING, RAN, FAILED, TIMED_OUT, SKIPPED, INTERRUPTED = (
    "running", "ran", "failed", "timed_out", "skipped", "interrupted")
# What counts towards "consecutive failures" (skips and interruptions neither break nor extend
# a streak of failures; a run that went well ends it).
FAILURES = (FAILED, TIMED_OUT)


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    id: str
    spec: str
    tz: str
    target_kind: str  # spawn | message | notice
    target: str  # spawn: the name stem; message: the agent's id; notice: ""
    model: str | None
    prompt: str
    enabled: int
    paused_why: str
    missed: str  # skip | catch_up_once
    overlap: str  # skip
    timeout_s: float
    budget_usd: float | None
    notify: str  # failure | always | never
    created_by: str
    owner_agent: str | None
    expires_at: float | None
    created_at: float
    deleted_at: float | None


@dataclass(frozen=True, slots=True)
class RunRow:
    id: int
    schedule_id: str
    slot_key: str
    slot_at: float
    status: str
    reason: str
    catch_up: int
    manual: int
    agent_id: str | None
    message_id: int | None
    cost_usd: float
    outcome: str
    claimed_by: str
    started_at: float
    ended_at: float | None


_SCHEDULE_COLUMNS = tuple(f.name for f in fields(ScheduleRow))


def _schedule(row: Any) -> ScheduleRow:
    return ScheduleRow(**dict(row))


def _run(row: Any) -> RunRow:
    return RunRow(**dict(row))


@dataclass(frozen=True, slots=True)
class NewRun:
    schedule_id: str
    slot_key: str
    slot_at: float
    status: str
    started_at: float
    reason: str = ""
    catch_up: bool = False
    manual: bool = False
    claimed_by: str = ""


class ScheduleRepo:
    def __init__(self, db: AnyDatabase) -> None:
        self.db = db

    # -- schedules -------------------------------------------------------------------------------

    async def create(self, row: ScheduleRow) -> None:
        names = ", ".join(_SCHEDULE_COLUMNS)
        marks = ", ".join("?" for _ in _SCHEDULE_COLUMNS)
        await self.db.execute(f"INSERT INTO schedules ({names}) VALUES ({marks})",
                              tuple(getattr(row, c) for c in _SCHEDULE_COLUMNS))

    async def get(self, schedule_id: str, *, deleted: bool = False) -> ScheduleRow | None:
        """A schedule by id; with `deleted`, one that was deleted too."""
        row = await self.db.fetchone(
            "SELECT * FROM schedules WHERE id = ? AND (deleted_at IS NULL OR ? = 1)",
            (schedule_id, int(deleted)))
        return _schedule(row) if row else None

    async def all(self, *, owner_agent: str | None = None) -> list[ScheduleRow]:
        if owner_agent is not None:
            rows = await self.db.fetchall(
                "SELECT * FROM schedules WHERE deleted_at IS NULL AND owner_agent = ?"
                " ORDER BY created_at", (owner_agent,))
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM schedules WHERE deleted_at IS NULL ORDER BY created_at")
        return [_schedule(r) for r in rows]

    async def set_enabled(self, schedule_id: str, enabled: bool, why: str = "") -> bool:
        async with self.db.transaction() as conn:
            async with conn.execute(
                    "UPDATE schedules SET enabled = ?, paused_why = ? WHERE id = ?"
                    " AND deleted_at IS NULL AND enabled != ?",
                    (int(enabled), "" if enabled else why, schedule_id, int(enabled))) as cur:
                return cur.rowcount > 0

    async def delete(self, schedule_id: str, now: float) -> bool:
        """Kept, marked deleted: its runs stay in the history."""
        async with self.db.transaction() as conn:
            async with conn.execute(
                    "UPDATE schedules SET deleted_at = ?, enabled = 0 WHERE id = ?"
                    " AND deleted_at IS NULL", (now, schedule_id)) as cur:
                return cur.rowcount > 0

    # -- runs --------------------------------------------------------------------------------------

    async def claim(self, run: NewRun) -> int | None:
        """Insert the slot's row; its id if this call inserted it, None if the slot was
        already taken (by an earlier tick, a restart, or another scheduler)."""
        async with self.db.transaction() as conn:
            return await _insert(conn, run)

    async def claim_many(self, runs: Sequence[NewRun]) -> list[int | None]:
        """Several slots in one transaction (the skips of a long outage, then its catch-up)."""
        async with self.db.transaction() as conn:
            return [await _insert(conn, r) for r in runs]

    async def claim_catch_up(self, run_id: int, claimed_by: str, now: float) -> bool:
        """Turn a slot skipped while the kill switch was on into its one catch-up run, if
        nobody did yet."""
        async with self.db.transaction() as conn:
            async with conn.execute(
                    "UPDATE schedule_runs SET status = ?, catch_up = 1, claimed_by = ?,"
                    " started_at = ?, reason = 'after the kill switch' WHERE id = ?"
                    " AND status = ? AND reason = 'halted'",
                    (RUNNING, claimed_by, now, run_id, SKIPPED)) as cur:
                return cur.rowcount > 0

    async def started(self, run_id: int, *, agent_id: str | None = None,
                      message_id: int | None = None) -> None:
        await self.db.execute(
            "UPDATE schedule_runs SET agent_id = COALESCE(?, agent_id),"
            " message_id = COALESCE(?, message_id) WHERE id = ?", (agent_id, message_id, run_id))

    async def finish(self, run_id: int, status: str, *, now: float, cost_usd: float = 0.0,
                     outcome: str = "", reason: str = "") -> bool:
        """End a running run; False if it had already ended (a second scheduler's timeout)."""
        async with self.db.transaction() as conn:
            async with conn.execute(
                    "UPDATE schedule_runs SET status = ?, ended_at = ?, cost_usd = ?,"
                    " outcome = ?, reason = CASE WHEN ? = '' THEN reason ELSE ? END"
                    " WHERE id = ? AND status = ?",
                    (status, now, cost_usd, outcome[:2000], reason, reason[:500], run_id,
                     RUNNING)) as cur:
                return cur.rowcount > 0

    async def interrupt_running(self, now: float) -> list[RunRow]:
        """Runs a dead supervisor left running: recorded interrupted, never run again."""
        async with self.db.transaction() as conn:
            async with conn.execute("SELECT * FROM schedule_runs WHERE status = ?",
                                    (RUNNING,)) as cur:
                names = [d[0] for d in cur.description]
                rows = [_run(dict(zip(names, r, strict=True))) for r in await cur.fetchall()]
            await conn.execute(
                "UPDATE schedule_runs SET status = ?, ended_at = ?,"
                " reason = 'the supervisor stopped while it ran' WHERE status = ?",
                (INTERRUPTED, now, RUNNING))
        return rows

    async def running(self, schedule_id: str | None = None) -> list[RunRow]:
        if schedule_id is None:
            rows = await self.db.fetchall("SELECT * FROM schedule_runs WHERE status = ?",
                                          (RUNNING,))
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM schedule_runs WHERE status = ? AND schedule_id = ?",
                (RUNNING, schedule_id))
        return [_run(r) for r in rows]

    async def run(self, run_id: int) -> RunRow | None:
        row = await self.db.fetchone("SELECT * FROM schedule_runs WHERE id = ?", (run_id,))
        return _run(row) if row else None

    async def history(self, schedule_id: str, n: int = 20) -> list[RunRow]:
        """The newest `n` runs, newest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM schedule_runs WHERE schedule_id = ? ORDER BY slot_at DESC, id DESC"
            " LIMIT ?", (schedule_id, n))
        return [_run(r) for r in rows]

    async def last_slot(self, schedule_id: str) -> RunRow | None:
        """The run of the latest slot considered (a manual run is no slot)."""
        row = await self.db.fetchone(
            "SELECT * FROM schedule_runs WHERE schedule_id = ? AND manual = 0"
            " ORDER BY slot_at DESC, id DESC LIMIT 1", (schedule_id,))
        return _run(row) if row else None

    async def consecutive_failures(self, schedule_id: str, limit: int = 20) -> int:
        """Failed or timed-out runs since the last one that went well (derived)."""
        rows = await self.db.fetchall(
            "SELECT status FROM schedule_runs WHERE schedule_id = ? AND status IN (?,?,?)"
            " ORDER BY slot_at DESC, id DESC LIMIT ?", (schedule_id, RAN, *FAILURES, limit))
        count = 0
        for row in rows:
            if row["status"] not in FAILURES:
                break
            count += 1
        return count

    async def counts(self) -> dict[str, int]:
        rows = await self.db.fetchall(
            "SELECT status, COUNT(*) AS n FROM schedule_runs GROUP BY status")
        return {str(r["status"]): int(r["n"]) for r in rows}


async def _insert(conn: AnyConnection, run: NewRun) -> int | None:
    async with conn.execute(
            "INSERT INTO schedule_runs (schedule_id, slot_key, slot_at, status, reason,"
            " catch_up, manual, claimed_by, started_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(schedule_id, slot_key) DO NOTHING",
            (run.schedule_id, run.slot_key, run.slot_at, run.status, run.reason,
             int(run.catch_up), int(run.manual), run.claimed_by, run.started_at,
             None if run.status == RUNNING else run.started_at)) as cur:
        return cur.lastrowid if cur.rowcount > 0 else None
