"""Repository for escalations (the outbox), their deliveries and session allowances."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from store.db import Database


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

    @classmethod
    def from_row(cls, row: Any) -> EscalationRow:
        d = dict(row)
        d["tool_input"] = json.loads(d["tool_input"]) if d["tool_input"] else None
        d["options"] = tuple(json.loads(d["options"] or "[]"))
        d["answer"] = json.loads(d["answer"]) if d["answer"] else None
        d["free_text"] = bool(d["free_text"])
        return cls(**d)


class EscalationRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self, *, id: str, agent_id: str | None, kind: str, title: str, body: str,
        tool_name: str | None = None, tool_input: dict[str, Any] | None = None,
        options: tuple[str, ...] = (), free_text: bool = False, ref_id: str | None = None,
        status: str = "open", detail: str | None = None, detail_name: str | None = None,
    ) -> EscalationRow:
        await self.db.execute(
            "INSERT INTO escalations (id, agent_id, kind, title, body, tool_name, tool_input,"
            " options, free_text, ref_id, status, created_at, detail, detail_name)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (id, agent_id, kind, title, body, tool_name,
             json.dumps(tool_input, default=str) if tool_input is not None else None,
             json.dumps(list(options)), int(free_text), ref_id, status, time.time(), detail,
             detail_name),
        )
        row = await self.get(id)
        assert row is not None
        return row

    async def get(self, esc_id: str) -> EscalationRow | None:
        row = await self.db.fetchone("SELECT * FROM escalations WHERE id = ?", (esc_id,))
        return EscalationRow.from_row(row) if row else None

    async def id_taken(self, esc_id: str) -> bool:
        return await self.db.fetchone("SELECT 1 FROM escalations WHERE id=?", (esc_id,)) is not None

    async def close(self, esc_id: str, *, status: str, answer: dict[str, Any], by: str,
                    via: str) -> bool:
        """Close an open escalation. Returns False if it was no longer open (the first wins)."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE escalations SET status=?, answer=?, answered_by=?, answered_via=?,"
                " answered_at=? WHERE id=? AND status='open'",
                (status, json.dumps(answer), by, via, time.time(), esc_id),
            )
            return cur.rowcount == 1

    async def open_rows(self, agent_id: str | None = None) -> list[EscalationRow]:
        where, params = ("AND agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            f"SELECT * FROM escalations WHERE status='open' {where} ORDER BY seq", params
        )
        return [EscalationRow.from_row(r) for r in rows]

    async def undelivered(self, frontend: str, limit: int = 200) -> list[EscalationRow]:
        rows = await self.db.fetchall(
            "SELECT e.* FROM escalations e LEFT JOIN deliveries d"
            " ON d.escalation_id = e.id AND d.frontend = ?"
            " WHERE d.escalation_id IS NULL ORDER BY e.seq LIMIT ?",
            (frontend, limit),
        )
        return [EscalationRow.from_row(r) for r in rows]

    async def ack(self, esc_id: str, frontend: str) -> None:
        await self.db.execute(
            "INSERT OR IGNORE INTO deliveries (escalation_id, frontend, delivered_at)"
            " VALUES (?,?,?)",
            (esc_id, frontend, time.time()),
        )

    async def mark_all_delivered(self, frontend: str) -> None:
        """A front end seen for the first time starts from now, not from the beginning."""
        await self.db.execute(
            "INSERT OR IGNORE INTO deliveries (escalation_id, frontend, delivered_at)"
            " SELECT id, ?, ? FROM escalations WHERE status != 'open'",
            (frontend, time.time()),
        )

    async def allow_for_session(self, agent_id: str, session_id: str | None, key: str,
                                tool_name: str, by: str) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO session_allowances (agent_id, session_id, key, tool_name,"
            " granted_by, created_at) VALUES (?,?,?,?,?,?)",
            (agent_id, session_id, key, tool_name, by, time.time()),
        )

    async def session_allowed(self, agent_id: str, session_id: str | None, key: str) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 FROM session_allowances WHERE agent_id=? AND key=?"
            " AND (session_id IS ? OR session_id IS NULL)",
            (agent_id, key, session_id),
        )
        return row is not None
