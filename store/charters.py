"""Repository for standing agents: their charters, and the questions sent back to them."""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass

from store.db import AnyDatabase
from store.errors import Conflict


@dataclass(frozen=True, slots=True)
class SendBack:
    agent_id: str
    question: str
    lines: tuple[str, ...]
    at: float


class CharterRepo:
    def __init__(self, db: AnyDatabase) -> None:
        self.db = db

    async def set(self, agent_id: str, charter: str, *, now: float) -> None:
        await self.db.execute(
            "INSERT INTO agent_charters (agent_id, charter, created_at) VALUES (?,?,?)"
            " ON CONFLICT(agent_id) DO UPDATE SET charter = excluded.charter",
            (agent_id, charter, now))

    async def get(self, agent_id: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT charter FROM agent_charters WHERE agent_id = ?", (agent_id,))
        return str(row["charter"]) if row else None

    async def all(self) -> dict[str, str]:
        """agent id -> charter, for every standing agent there has been."""
        rows = await self.db.fetchall("SELECT agent_id, charter FROM agent_charters")
        return {str(r["agent_id"]): str(r["charter"]) for r in rows}

    async def claim_sendback(self, agent_id: str, question_key: str, question: str,
                             lines: tuple[str, ...], *, now: float) -> bool:
        """Record that this question goes back to the agent; False if it already went once
        (the unique key makes "at most once" hold across restarts and races)."""
        try:
            await self.db.execute(
                "INSERT INTO charter_sendbacks (agent_id, question_key, question, lines, at)"
                " VALUES (?,?,?,?,?)",
                (agent_id, question_key, question, json.dumps(list(lines)), now))
        except Conflict:
            return False
        return True

    async def sendbacks(self, agent_id: str | None = None) -> builtins.list[SendBack]:
        where, params = ("WHERE agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            f"SELECT * FROM charter_sendbacks {where} ORDER BY at", params)
        return [SendBack(str(r["agent_id"]), str(r["question"]),
                         tuple(json.loads(r["lines"])), float(r["at"])) for r in rows]
