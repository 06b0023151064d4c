"""Repository for escalations (the outbox), their timers, deliveries and session allowances.

Methods that stamp a time take `now` (epoch seconds) so the caller's clock decides; without it
the repository's own clock (store/clock.py) is used."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from store.clock import Now, system_now
from store.db import AnyConnection, AnyDatabase


@dataclass(frozen=True, slots=True)
class EscalationRow:
    seq: int
    id: str
    agent_id: str | None
    kind: str
    title: str
    body: str
    tool_name: str | None
    tool_input: dict[str, Any] | None
    options: tuple[str, ...]
    free_text: bool
    ref_id: str | None
    status: str
    answer: dict[str, Any] | None
    answered_by: str | None
    answered_via: str | None
    answered_at: float | None
    created_at: float
    detail: str | None = None  # the complete call (command, file, diff); body stays short
    detail_name: str | None = None  # a file name for detail: command.sh, edit-a.py.diff
    remind_at: float | None = None  # when the reminder is due (None: never)
    expires_at: float | None = None  # when the timeout applies (None: never)
    reminded_at: float | None = None  # when the reminder was sent
    timed_out_at: float | None = None  # when the timeout was applied
    on_timeout: str = "deny"  # deny | pause
    survives_restart: bool = False  # answered from the row, so a restart leaves it open

    @classmethod
    def from_row(cls, row: Any) -> EscalationRow:
        d = dict(row)
        d["tool_input"] = json.loads(d["tool_input"]) if d["tool_input"] else None
        d["options"] = tuple(json.loads(d["options"] or "[]"))
        d["answer"] = json.loads(d["answer"]) if d["answer"] else None
        d["free_text"] = bool(d["free_text"])
        d["survives_restart"] = bool(d["survives_restart"])
        return cls(**d)

    @property
    def reminder_due_at(self) -> float | None:
        """When the reminder still has to go out, or None (sent, moot or never)."""
        if self.status != "open" or self.reminded_at is not None or self.timed_out_at is not None:
            return None
        return self.remind_at

    @property
    def timeout_due_at(self) -> float | None:
        """When the timeout still has to be applied, or None (applied or never)."""
        if self.status != "open" or self.timed_out_at is not None:
            return None
        return self.expires_at


@dataclass(frozen=True, slots=True)
class Notice:
    """A notice written in the same transaction as the change it reports (a reminder, an
    expiry), so the change is never recorded without its notice, nor the notice twice."""

    id: str
    agent_id: str | None
    title: str
    body: str = ""
    ref_id: str | None = None


@dataclass(frozen=True, slots=True)
class EscalationDraft:
    """A row to insert inside another write's transaction (see `EscalationRepo.insert`)."""

    id: str
    agent_id: str | None
    kind: str
    title: str
    body: str = ""
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    options: tuple[str, ...] = ()
    free_text: bool = False
    ref_id: str | None = None
    status: str = "open"
    detail: str | None = None
    detail_name: str | None = None
    remind_at: float | None = None
    expires_at: float | None = None
    on_timeout: str = "deny"
    survives_restart: bool = False


# One text per engine where they differ: the larger or smaller of two values is MAX(a, b) and
# MIN(a, b) in SQLite, GREATEST and LEAST in PostgreSQL (where MAX and MIN only aggregate).
_DUE_SQL = (
    "SELECT * FROM escalations WHERE status='open' AND timed_out_at IS NULL AND"
    " ((expires_at IS NOT NULL AND expires_at <= ?) OR"
    "  (reminded_at IS NULL AND remind_at IS NOT NULL AND remind_at <= ?))"
    " ORDER BY {min}(COALESCE(remind_at, expires_at), COALESCE(expires_at, remind_at)),"
    " seq LIMIT ?")
_DUE = {"sqlite": _DUE_SQL.format(min="MIN"), "postgresql": _DUE_SQL.format(min="LEAST")}
_UNDELIVERED_SQL = (
    "SELECT e.* FROM escalations e LEFT JOIN deliveries d"
    " ON d.escalation_id = e.id AND d.frontend = ?"
    " WHERE d.escalation_id IS NULL AND e.seq > {max}(?, COALESCE((SELECT seq FROM"
    " outbox_cursors WHERE frontend = ?), 0)) ORDER BY e.seq LIMIT ?")
_UNDELIVERED = {"sqlite": _UNDELIVERED_SQL.format(max="MAX"),
                "postgresql": _UNDELIVERED_SQL.format(max="GREATEST")}
_RAISE_CURSOR_SQL = ("INSERT INTO outbox_cursors (frontend, seq) VALUES (?,?) ON CONFLICT"
                     " (frontend) DO UPDATE SET seq = {max}(outbox_cursors.seq, excluded.seq)")
_RAISE_CURSOR = {"sqlite": _RAISE_CURSOR_SQL.format(max="MAX"),
                 "postgresql": _RAISE_CURSOR_SQL.format(max="GREATEST")}


async def _advance(conn: AnyConnection, frontend: str) -> None:
    """Move `frontend`'s cursor up to just before its first undelivered row (or the last row)."""
    async with conn.execute("SELECT seq FROM outbox_cursors WHERE frontend = ?",
                            (frontend,)) as cur:
        row = await cur.fetchone()
    at = int(row[0]) if row else 0
    async with conn.execute(
            "SELECT e.seq FROM escalations e LEFT JOIN deliveries d ON d.escalation_id = e.id"
            " AND d.frontend = ? WHERE e.seq > ? AND d.escalation_id IS NULL ORDER BY e.seq"
            " LIMIT 1", (frontend, at)) as cur:
        gap = await cur.fetchone()
    if gap is not None:
        new = int(gap[0]) - 1
    else:
        async with conn.execute("SELECT MAX(seq) FROM escalations") as cur:
            top = await cur.fetchone()
        new = int(top[0] or 0) if top else 0
    if new > at or row is None:
        await conn.execute(
            "INSERT INTO outbox_cursors (frontend, seq) VALUES (?,?) ON CONFLICT (frontend)"
            " DO UPDATE SET seq = excluded.seq", (frontend, new))


class EscalationRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    def _stamp(self, now: float | None) -> float:
        return self._now() if now is None else now

    async def create(
        self, *, id: str, agent_id: str | None, kind: str, title: str, body: str,
        tool_name: str | None = None, tool_input: dict[str, Any] | None = None,
        options: tuple[str, ...] = (), free_text: bool = False, ref_id: str | None = None,
        status: str = "open", detail: str | None = None, detail_name: str | None = None,
        remind_at: float | None = None, expires_at: float | None = None,
        on_timeout: str = "deny", survives_restart: bool = False, now: float | None = None,
    ) -> EscalationRow:
        async with self.db.transaction() as conn:
            await self.insert(conn, EscalationDraft(
                id=id, agent_id=agent_id, kind=kind, title=title, body=body,
                tool_name=tool_name, tool_input=tool_input, options=options,
                free_text=free_text, ref_id=ref_id, status=status, detail=detail,
                detail_name=detail_name, remind_at=remind_at, expires_at=expires_at,
                on_timeout=on_timeout, survives_restart=survives_restart), self._stamp(now))
        row = await self.get(id)
        assert row is not None
        return row

    @staticmethod
    async def insert(conn: AnyConnection, d: EscalationDraft, now: float) -> None:
        """Insert a row inside the caller's transaction (with the write it reports)."""
        await conn.execute(
            "INSERT INTO escalations (id, agent_id, kind, title, body, tool_name, tool_input,"
            " options, free_text, ref_id, status, created_at, detail, detail_name,"
            " remind_at, expires_at, on_timeout, survives_restart)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (d.id, d.agent_id, d.kind, d.title, d.body, d.tool_name,
             json.dumps(d.tool_input, default=str) if d.tool_input is not None else None,
             json.dumps(list(d.options)), int(d.free_text), d.ref_id, d.status, now,
             d.detail, d.detail_name, d.remind_at, d.expires_at, d.on_timeout,
             int(d.survives_restart)),
        )

    @staticmethod
    async def _insert_notice(conn: AnyConnection, notice: Notice, now: float) -> None:
        await conn.execute(
            "INSERT INTO escalations (id, agent_id, kind, title, body, ref_id, status,"
            " created_at) VALUES (?,?,'notice',?,?,?,'info',?)",
            (notice.id, notice.agent_id, notice.title, notice.body, notice.ref_id, now),
        )

    async def get(self, esc_id: str) -> EscalationRow | None:
        row = await self.db.fetchone("SELECT * FROM escalations WHERE id = ?", (esc_id,))
        return EscalationRow.from_row(row) if row else None

    async def id_taken(self, esc_id: str) -> bool:
        return await self.db.fetchone("SELECT 1 FROM escalations WHERE id=?", (esc_id,)) is not None

    async def close(self, esc_id: str, *, status: str, answer: dict[str, Any], by: str,
                    via: str, now: float | None = None, notice: Notice | None = None,
                    timed_out: bool = False) -> bool:
        """Close an open escalation, with the notice that reports it if given. Returns False
        if it was no longer open (the first wins) and then writes no notice."""
        at = self._stamp(now)
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE escalations SET status=?, answer=?, answered_by=?, answered_via=?,"
                " answered_at=?, timed_out_at=CASE WHEN ? = 1 THEN ? ELSE timed_out_at END"
                " WHERE id=? AND status='open'",
                (status, json.dumps(answer), by, via, at, int(timed_out), at, esc_id),
            )
            if cur.rowcount != 1:
                return False
            if notice is not None:
                await self._insert_notice(conn, notice, at)
            return True

    # -- timers ---------------------------------------------------------------------------------

    async def due(self, now: float, limit: int = 100) -> list[EscalationRow]:
        """Open rows whose reminder or timeout is due at `now`, the most overdue first."""
        rows = await self.db.fetchall(_DUE[self.db.dialect], (now, now, limit))
        return [EscalationRow.from_row(r) for r in rows]

    async def next_due(self) -> float | None:
        """The earliest time a reminder or timeout of an open row is due, or None."""
        row = await self.db.fetchone(
            "SELECT MIN(t) FROM ("
            " SELECT remind_at AS t FROM escalations WHERE status='open'"
            "  AND reminded_at IS NULL AND timed_out_at IS NULL AND remind_at IS NOT NULL"
            " UNION ALL"
            " SELECT expires_at FROM escalations WHERE status='open'"
            "  AND timed_out_at IS NULL AND expires_at IS NOT NULL) AS due"
        )
        return None if row is None or row[0] is None else float(row[0])

    async def mark_reminded(self, esc_id: str, *, now: float, notice: Notice) -> bool:
        """Claim a due reminder and write its notice together; False if it was not due, already
        sent, moot (timed out) or the row is closed. The claim is what makes it fire once."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE escalations SET reminded_at=? WHERE id=? AND status='open'"
                " AND reminded_at IS NULL AND timed_out_at IS NULL"
                " AND remind_at IS NOT NULL AND remind_at <= ?",
                (now, esc_id, now),
            )
            if cur.rowcount != 1:
                return False
            await self._insert_notice(conn, notice, now)
            return True

    async def mark_timed_out(self, esc_id: str, *, now: float) -> bool:
        """Claim a due timeout that leaves the row open (pause); False if not due or taken."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE escalations SET timed_out_at=? WHERE id=? AND status='open'"
                " AND timed_out_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ?",
                (now, esc_id, now),
            )
            return cur.rowcount == 1

    async def cancelled_since(self, at: float) -> int:
        """How many requests and questions opened before `at` were cancelled from `at` on
        (what the kill switch ended, whichever part closed each)."""
        row = await self.db.fetchone(
            "SELECT COUNT(*) FROM escalations WHERE status='cancelled' AND answered_at >= ?"
            " AND created_at <= ?", (at, at))
        return int(row[0]) if row else 0

    async def open_rows(self, agent_id: str | None = None) -> list[EscalationRow]:
        where, params = ("AND agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            f"SELECT * FROM escalations WHERE status='open' {where} ORDER BY seq", params
        )
        return [EscalationRow.from_row(r) for r in rows]

    async def open_summary(self) -> tuple[int, float | None]:
        """How many escalations are open and when the oldest opened (the status index: only
        open rows are read)."""
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM escalations WHERE status='open'")
        if row is None:
            return 0, None
        return int(row["n"]), (float(row["oldest"]) if row["oldest"] is not None else None)

    async def undelivered(self, frontend: str, limit: int = 200,
                          after_seq: int = 0) -> list[EscalationRow]:
        """Rows `frontend` has not acknowledged, oldest first, from after `after_seq` (to
        page through a long backlog) and after its delivery cursor (below which everything
        is delivered): a range of the primary key, never the whole history."""
        rows = await self.db.fetchall(_UNDELIVERED[self.db.dialect],
                                      (frontend, after_seq, frontend, limit))
        return [EscalationRow.from_row(r) for r in rows]

    async def after(self, seq: int | None, limit: int = 200) -> list[EscalationRow]:
        """Rows written after `seq`, oldest first (what other workers on a shared database
        wrote since it was read); with no `seq`, the last row only (where to start from)."""
        if seq is None:
            rows = await self.db.fetchall("SELECT * FROM escalations ORDER BY seq DESC LIMIT 1")
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM escalations WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit))
        return [EscalationRow.from_row(r) for r in rows]

    async def cursor(self, frontend: str) -> int:
        """Every row up to this seq is delivered to `frontend`."""
        row = await self.db.fetchone("SELECT seq FROM outbox_cursors WHERE frontend = ?",
                                     (frontend,))
        return int(row["seq"]) if row else 0

    async def ack(self, esc_id: str, frontend: str, *, now: float | None = None) -> None:
        """Record a delivery, and move the front end's cursor past every row now delivered
        in a row (from the cursor to the first gap: a few rows, not the history)."""
        async with self.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO deliveries (escalation_id, frontend, delivered_at)"
                " VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (esc_id, frontend, self._stamp(now)),
            )
            await _advance(conn, frontend)

    async def mark_all_delivered(self, frontend: str, *, before: float,
                                 now: float | None = None) -> None:
        """A front end seen for the first time starts from now, not from the beginning: every
        row but the open ones, created before `before` (the supervisor's start), counts as
        delivered to it. The cursor goes to the last such row before the first open one;
        only rows after it get a delivery row each."""
        async with self.db.transaction() as conn:
            async with conn.execute(
                    "SELECT seq FROM escalations WHERE created_at < ? ORDER BY seq DESC LIMIT 1",
                    (before,)) as cur:
                last = await cur.fetchone()
            async with conn.execute(
                    "SELECT MIN(seq) FROM escalations WHERE status = 'open'") as cur:
                first_open = await cur.fetchone()
            last_old = int(last[0]) if last else 0
            start = min(last_old, int(first_open[0]) - 1) \
                if first_open and first_open[0] is not None else last_old
            await conn.execute(
                "INSERT INTO deliveries (escalation_id, frontend, delivered_at)"
                " SELECT id, ?, ? FROM escalations WHERE seq > ? AND seq <= ?"
                " AND status != 'open' ON CONFLICT DO NOTHING",
                (frontend, self._stamp(now), start, last_old),
            )
            await conn.execute(_RAISE_CURSOR[self.db.dialect], (frontend, start))
            await _advance(conn, frontend)

    async def allow_for_session(self, agent_id: str, session_id: str | None, key: str,
                                tool_name: str, by: str, *, now: float | None = None) -> None:
        await self.db.execute(
            "INSERT INTO session_allowances (agent_id, session_id, key, tool_name, granted_by,"
            " created_at) VALUES (?,?,?,?,?,?) ON CONFLICT (agent_id, key) DO UPDATE SET"
            " session_id = excluded.session_id, tool_name = excluded.tool_name,"
            " granted_by = excluded.granted_by, created_at = excluded.created_at",
            (agent_id, session_id, key, tool_name, by, self._stamp(now)),
        )

    async def decided_calls(self, agent_id: str, tool_name: str,
                            limit: int = 100) -> list[tuple[dict[str, Any], str]]:
        """The inputs of an agent's answered permission requests for one tool, newest first,
        each with the operator's decision (allow, allow_session, deny): what rules are learned
        from. Requests closed any other way (expired, cancelled) are not decisions."""
        rows = await self.db.fetchall(
            "SELECT tool_input, answer FROM escalations WHERE agent_id=? AND kind='permission'"
            " AND tool_name=? AND status='answered' ORDER BY seq DESC LIMIT ?",
            (agent_id, tool_name, limit))
        out: list[tuple[dict[str, Any], str]] = []
        for raw_input, raw_answer in rows:
            try:
                tool_input, answer = json.loads(raw_input or "{}"), json.loads(raw_answer or "{}")
            except ValueError:
                continue
            if isinstance(tool_input, dict) and isinstance(answer, dict):
                out.append((tool_input, str(answer.get("decision") or "")))
        return out

    async def session_allowed(self, agent_id: str, session_id: str | None, key: str) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 FROM session_allowances WHERE agent_id=? AND key=?"
            " AND (session_id IS ? OR session_id IS NULL)",
            (agent_id, key, session_id),
        )
        return row is not None
