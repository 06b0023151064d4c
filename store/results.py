"""Repository for what agents hand out: files they send (kept until every front end has them)
and the results they report with a confidence grade."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.clock import Now, system_now
from store.db import AnyDatabase


@dataclass(frozen=True, slots=True)
class OutgoingFile:
    id: str
    agent_id: str
    name: str
    content: bytes
    created_at: float


@dataclass(frozen=True, slots=True)
class ResultRow:
    id: int
    agent_id: str
    agent_name: str
    turn_id: int | None
    summary: str
    confidence: int  # 0-100
    evidence: str
    needs_review: bool
    created_at: float

    @classmethod
    def from_row(cls, row: Any) -> ResultRow:
        d = dict(row)
        d["needs_review"] = bool(d["needs_review"])
        return cls(**d)


class ResultRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    # -- files ----------------------------------------------------------------------------------

    async def put_file(self, file_id: str, agent_id: str, name: str, content: bytes) -> None:
        await self.db.execute(
            "INSERT INTO outgoing_files (id, agent_id, name, content, created_at)"
            " VALUES (?,?,?,?,?)", (file_id, agent_id, name, content, self._now()))

    async def file(self, file_id: str) -> OutgoingFile | None:
        row = await self.db.fetchone("SELECT * FROM outgoing_files WHERE id = ?", (file_id,))
        return OutgoingFile(**dict(row)) if row else None

    async def prune_files(self, before: float) -> int:
        """Forget files sent before `before` (epoch seconds); returns how many."""
        async with self.db.transaction() as conn:
            cur = await conn.execute("DELETE FROM outgoing_files WHERE created_at < ?", (before,))
            return int(cur.rowcount or 0)

    # -- graded results -------------------------------------------------------------------------

    async def add(self, *, agent_id: str, agent_name: str, summary: str, confidence: int,
                  evidence: str, needs_review: bool, turn_id: int | None = None) -> ResultRow:
        if not 0 <= confidence <= 100:
            raise ValueError(f"confidence {confidence} is not between 0 and 100")
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "INSERT INTO results (agent_id, agent_name, turn_id, summary, confidence,"
                " evidence, needs_review, created_at) VALUES (?,?,?,?,?,?,?,?)",
                (agent_id, agent_name, turn_id, summary, confidence, evidence,
                 int(needs_review), self._now()))
            new_id = int(cur.lastrowid or 0)
        row = await self.db.fetchone("SELECT * FROM results WHERE id = ?", (new_id,))
        assert row is not None
        return ResultRow.from_row(row)

    async def recent(self, n: int = 20, *, agent_id: str | None = None) -> list[ResultRow]:
        """The `n` newest results (of one agent, or all), lowest confidence first (the newest
        first among equals)."""
        where, args = ("WHERE agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            f"SELECT * FROM (SELECT * FROM results {where} ORDER BY id DESC LIMIT ?)"  # noqa: S608
            " AS newest ORDER BY confidence ASC, id DESC", (*args, n))
        return [ResultRow.from_row(r) for r in rows]

    async def latest(self, agent_id: str) -> ResultRow | None:
        row = await self.db.fetchone(
            "SELECT * FROM results WHERE agent_id = ? ORDER BY id DESC LIMIT 1", (agent_id,))
        return ResultRow.from_row(row) if row else None
