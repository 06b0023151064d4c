"""Repository for the agents' leases: which worker owns each agent, at which epoch, until when.

One row per agent. `owner` is the worker driving it (NULL: placed on `placed_on`, not yet
claimed); `epoch` grows by one at every claim, and every write about the agent that matters
(a turn's start, a state change) is fenced by it (`check_fence`, in the write's transaction):
a worker that lost the lease cannot write as if it still held it. Times are the database's
clock (PostgreSQL's `now()`, SQLite's), never a host's. `cancel` carries a pause, resume, stop
or kill asked on another worker to the owner, which reads it at its next renewal, or at once
when woken (`wakeups`: a placement and a cancel request NOTIFY the worker concerned)."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from store.agents import LIVE_STATES
from store.db import AnyDatabase
from store.fence import check_fence as check_fence  # the writers' side
from store.workers import _NOW

CANCEL_ACTIONS = ("pause", "resume", "stop", "kill")
# A pending agent's row is locked by the claiming worker and skipped by the others (PostgreSQL);
# SQLite has one writer, so nothing to skip.
_SKIP_LOCKED = {"sqlite": "", "postgresql": " FOR UPDATE SKIP LOCKED"}
# The wake-up a placement or a cancel request sends the worker concerned (PostgreSQL's NOTIFY,
# delivered when the transaction commits; `wakeups`). Only a hint: that worker reads the lease
# table at its next renewal anyway. The payload is the worker's id ("" for a pending agent any
# worker may claim). SQLite has one process: nothing to wake.
WAKE_CHANNEL = "switchboard_wake"


@dataclass(frozen=True, slots=True)
class LeaseRow:
    agent_id: str
    owner: str | None
    placed_on: str | None
    epoch: int
    expires_in_s: float | None  # on the database's clock; negative: expired
    cancel: str | None
    cancel_by: str | None


class LeaseRepo:
    def __init__(self, db: AnyDatabase) -> None:
        self.db = db

    @property
    def _now(self) -> str:
        return _NOW[self.db.dialect]

    async def claim(self, agent_id: str, owner: str, ttl_s: float, *,
                    force: bool = False) -> int | None:
        """Take the agent's lease and return its new epoch, or None if another worker holds
        it. Taken when there is no row yet, when it is pending for this worker (or for any),
        when it expired, or when this worker holds it already; `force`: whatever holds it
        (SQLite, whose one process owns every agent)."""
        now = self._now
        async with self.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO agent_leases (agent_id, owner, epoch, renewed_at, expires_at)"
                f" VALUES (?, ?, 1, {now}, {now} + ?) ON CONFLICT (agent_id) DO UPDATE SET"
                " owner = excluded.owner, placed_on = NULL, epoch = agent_leases.epoch + 1,"
                " renewed_at = excluded.renewed_at, expires_at = excluded.expires_at"
                " WHERE ? = 1 OR agent_leases.owner = excluded.owner"
                " OR (agent_leases.owner IS NULL AND (agent_leases.placed_on IS NULL"
                " OR agent_leases.placed_on = excluded.owner))"
                f" OR agent_leases.expires_at < {now}",
                (agent_id, owner, ttl_s, int(force)))
            async with conn.execute("SELECT epoch FROM agent_leases WHERE agent_id = ? AND"
                                    " owner = ?", (agent_id, owner)) as cur:
                row = await cur.fetchone()
        return int(row[0]) if row else None

    async def place(self, agent_id: str, worker_id: str | None) -> None:
        """A new agent, placed on `worker_id` (None: whichever worker claims it first); it runs
        once that worker claims it (`claim_pending`)."""
        async with self.db.transaction() as conn:
            await conn.execute("INSERT INTO agent_leases (agent_id, owner, placed_on, epoch)"
                               " VALUES (?, NULL, ?, 0)", (agent_id, worker_id))
            await self._wake(conn, worker_id or "")

    async def claim_pending(self, owner: str, ttl_s: float,
                            limit: int = 50) -> builtins.list[tuple[str, int]]:
        """The agents placed on this worker (or on any) and not yet claimed: claimed, each
        with its epoch. On PostgreSQL the rows are locked with SKIP LOCKED, so two workers
        never wait on, or both claim, one agent."""
        return await self._claim_where(
            "owner IS NULL AND (placed_on = ? OR placed_on IS NULL)", (owner,), owner, ttl_s,
            limit)

    async def claim_expired(self, owner: str, ttl_s: float,
                            limit: int = 50) -> builtins.list[tuple[str, int]]:
        """Live agents whose owner stopped renewing (a dead or cut worker): claimed, each
        with its new epoch. One worker gets each, however many try at once."""
        return await self._claim_where(
            f"owner IS NOT NULL AND expires_at < {self._now} AND agent_id IN"
            f" (SELECT id FROM agents WHERE state IN {LIVE_STATES!r})", (), owner, ttl_s, limit)

    async def _claim_where(self, where: str, params: tuple[Any, ...], owner: str,
                           ttl_s: float, limit: int) -> builtins.list[tuple[str, int]]:
        now = self._now
        claimed: list[tuple[str, int]] = []
        async with self.db.transaction() as conn:
            async with conn.execute(
                    f"SELECT agent_id FROM agent_leases WHERE {where} ORDER BY agent_id LIMIT ?"
                    f"{_SKIP_LOCKED[self.db.dialect]}", (*params, limit)) as cur:
                ids = [str(r[0]) for r in await cur.fetchall()]
            for agent_id in ids:
                cur2 = await conn.execute(
                    f"UPDATE agent_leases SET owner = ?, placed_on = NULL, epoch = epoch + 1,"
                    f" renewed_at = {now}, expires_at = {now} + ? WHERE agent_id = ? AND {where}",
                    (owner, ttl_s, agent_id, *params))
                if cur2.rowcount == 1:
                    async with conn.execute("SELECT epoch FROM agent_leases WHERE agent_id = ?",
                                            (agent_id,)) as cur3:
                        row = await cur3.fetchone()
                    assert row is not None  # updated just now, in this transaction
                    claimed.append((agent_id, int(row[0])))
        return claimed

    async def renew(self, owner: str, ttl_s: float) -> builtins.list[LeaseRow]:
        """Every lease this worker still holds, renewed for `ttl_s` from now (the database's
        now), with its cancel request if any. One that expired is not renewed: another worker
        may be taking it over, and the agent is no longer this worker's. Not under the
        one-writer lock (PostgreSQL): a renewal queued behind the fleet's other writes would
        let a busy worker's leases lapse. Safe without it: it changes no owner nor epoch (the
        fences), and a claim racing it on a row is serialised by the row lock, each statement
        re-checking its condition (owner, expiry) on the row the other committed."""
        now = self._now
        async with self.db.transaction(exclusive=False) as conn:
            await conn.execute(f"UPDATE agent_leases SET renewed_at = {now}, expires_at ="
                               f" {now} + ? WHERE owner = ? AND expires_at >= {now}",
                               (ttl_s, owner))
            async with conn.execute(f"{self._select()} WHERE owner = ? AND expires_at >= {now}"
                                    " ORDER BY agent_id", (owner,)) as cur:
                rows = await cur.fetchall()
        return [_row(r) for r in rows]

    async def release_all(self, owner: str) -> int:
        """A worker stopping cleanly: its leases end now, so other workers resume its live
        agents at once, without waiting for them to expire."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(f"UPDATE agent_leases SET expires_at = {self._now} - 1"
                                     " WHERE owner = ?", (owner,))
            return int(cur.rowcount)

    async def request(self, agent_id: str, action: str, by: str) -> str | None:
        """Ask the owner of the agent to pause, resume, stop or kill it; returns the owner (or
        the worker it is placed on), or None if the agent has no lease."""
        if action not in CANCEL_ACTIONS:
            raise ValueError(f"unknown action {action!r}: one of {', '.join(CANCEL_ACTIONS)}")
        async with self.db.transaction() as conn:
            cur = await conn.execute("UPDATE agent_leases SET cancel = ?, cancel_by = ? WHERE"
                                     " agent_id = ?", (action, by, agent_id))
            if cur.rowcount != 1:
                return None
            async with conn.execute("SELECT COALESCE(owner, placed_on) FROM agent_leases"
                                    " WHERE agent_id = ?", (agent_id,)) as c2:
                row = await c2.fetchone()
            if row and row[0] is not None:
                await self._wake(conn, str(row[0]))
        return str(row[0]) if row and row[0] is not None else None

    def wakeups(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Listening (once entered) for wake-ups: the worker id each placement or cancel
        request names ("" for any worker), as they commit; on SQLite nothing ever comes."""
        return self.db.listen(WAKE_CHANNEL)

    async def wake(self, worker_id: str) -> None:
        """Wake one worker (a bus message stored for an agent it runs): a hint, on its own,
        outside the one-writer lock; nothing on SQLite (one process)."""
        if self.db.dialect == "postgresql":
            async with self.db.transaction(exclusive=False) as conn:
                await self._wake(conn, worker_id)

    async def _wake(self, conn: Any, worker_id: str) -> None:
        if self.db.dialect == "postgresql":
            await conn.execute("SELECT pg_notify(?, ?)", (WAKE_CHANNEL, worker_id))

    async def clear(self, agent_id: str, action: str, fence: tuple[str, int]) -> None:
        """The owner acted on `action`: cleared, fenced (a different request since stays)."""
        owner, epoch = fence
        await self.db.execute(
            "UPDATE agent_leases SET cancel = NULL, cancel_by = NULL WHERE agent_id = ? AND"
            " cancel = ? AND owner = ? AND epoch = ?", (agent_id, action, owner, epoch))

    async def get(self, agent_id: str) -> LeaseRow | None:
        row = await self.db.fetchone(f"{self._select()} WHERE agent_id = ?", (agent_id,))
        return _row(row) if row else None

    async def others(self, owner: str) -> builtins.list[tuple[str, str, str]]:
        """(agent id, name, owner) of every live agent another worker owns or is placed on."""
        rows = await self.db.fetchall(
            "SELECT a.id, a.name, COALESCE(l.owner, l.placed_on, '') FROM agent_leases l"
            f" JOIN agents a ON a.id = l.agent_id WHERE a.state IN {LIVE_STATES!r} AND"
            " COALESCE(l.owner, l.placed_on, '') <> ? ORDER BY a.created_at, a.id", (owner,))
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def live_per_worker(self) -> dict[str, int]:
        """Live agents per worker (owned, or placed and not yet claimed)."""
        rows = await self.db.fetchall(
            "SELECT COALESCE(l.owner, l.placed_on) AS w, COUNT(*) FROM agent_leases l JOIN"
            f" agents a ON a.id = l.agent_id WHERE a.state IN {LIVE_STATES!r} AND"
            " COALESCE(l.owner, l.placed_on) IS NOT NULL GROUP BY COALESCE(l.owner, l.placed_on)")
        return {str(r[0]): int(r[1]) for r in rows}

    def _select(self) -> str:
        return ("SELECT agent_id, owner, placed_on, epoch, expires_at - "
                f"{self._now} AS expires_in_s, cancel, cancel_by FROM agent_leases")


def _row(r: Any) -> LeaseRow:
    return LeaseRow(str(r[0]), r[1], r[2], int(r[3]),
                    None if r[4] is None else float(r[4]), r[5], r[6])
