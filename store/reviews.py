"""Repository for reviewer agents' decisions: each request offered to a reviewer, what it
decided and why, and the operator's overturn of it (docs/reviewers.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.clock import Now, system_now
from store.db import AnyDatabase


@dataclass(frozen=True, slots=True)
class ReviewRow:
    id: str
    agent_id: str
    agent_name: str
    reviewer_id: str
    reviewer_name: str
    kind: str  # permission | question
    title: str
    summary: str  # the call or the question, as the digest shows it
    tool_name: str | None
    session_key: str | None  # the call's key for a session allowance (permissions)
    session_id: str | None
    # open | allow | allow_session | deny | answer | handed_over | cancelled
    status: str
    answer: str  # a question's answer, or why it was handed to the operator
    reasoning: str
    created_at: float
    decided_at: float | None
    overturned_by: str | None
    overturned_at: float | None

    @classmethod
    def from_row(cls, row: Any) -> ReviewRow:
        return cls(**dict(row))


DECIDED = ("allow", "allow_session", "deny", "answer")


class ReviewRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    async def create(self, *, review_id: str, agent_id: str, agent_name: str,
                     reviewer_id: str, reviewer_name: str, kind: str, title: str,
                     summary: str, tool_name: str | None, session_key: str | None,
                     session_id: str | None) -> ReviewRow:
        await self.db.execute(
            "INSERT INTO reviews (id, agent_id, agent_name, reviewer_id, reviewer_name, kind,"
            " title, summary, tool_name, session_key, session_id, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (review_id, agent_id, agent_name, reviewer_id, reviewer_name, kind, title, summary,
             tool_name, session_key, session_id, self._now()))
        row = await self.get(review_id)
        assert row is not None
        return row

    async def get(self, review_id: str) -> ReviewRow | None:
        row = await self.db.fetchone("SELECT * FROM reviews WHERE id = ?", (review_id,))
        return ReviewRow.from_row(row) if row else None

    async def close(self, review_id: str, *, status: str, answer: str = "",
                    reasoning: str = "") -> bool:
        """Close an open review (decided, handed over or cancelled); False if it was no
        longer open (another outcome won)."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE reviews SET status=?, answer=?, reasoning=?, decided_at=?"
                " WHERE id=? AND status='open'",
                (status, answer, reasoning, self._now(), review_id))
            return bool(cur.rowcount)

    async def overturn(self, review_id: str, *, by: str) -> bool:
        """Mark a decided review overturned by `by`; False if it was not decided or was
        overturned already."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE reviews SET overturned_by=?, overturned_at=? WHERE id=?"
                " AND overturned_by IS NULL"
                " AND status IN ('allow', 'allow_session', 'deny', 'answer')",
                (by, self._now(), review_id))
            return bool(cur.rowcount)

    async def recent(self, n: int = 20, *, since: float = 0.0) -> list[ReviewRow]:
        """The newest reviews, newest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM reviews WHERE created_at >= ? ORDER BY created_at DESC, id DESC"
            " LIMIT ?", (since, n))
        return [ReviewRow.from_row(r) for r in rows]

    async def revoke_session(self, agent_id: str, key: str, granted_by: str) -> int:
        """Take back the session allowance `granted_by` gave this agent for `key`."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM session_allowances WHERE agent_id=? AND key=? AND granted_by=?",
                (agent_id, key, granted_by))
            return int(cur.rowcount or 0)
