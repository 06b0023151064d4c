"""Repository for the append-only log of each agent's stream-json events."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from store.db import Database


@dataclass(frozen=True, slots=True)
class EventRow:
    id: int
    agent_id: str
    turn_id: int | None
    kind: str
    summary: str
    data: dict[str, Any]
    at: float


class EventRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def append(
        self, agent_id: str, turn_id: int | None, kind: str, summary: str, data: dict[str, Any]
    ) -> int:
        return await self.db.execute(
            "INSERT INTO agent_events (agent_id, turn_id, kind, summary, data, at)"
            " VALUES (?,?,?,?,?,?)",
            (agent_id, turn_id, kind, summary, json.dumps(data, default=str), time.time()),
        )

    async def tail(self, agent_id: str, n: int) -> list[EventRow]:
        rows = await self.db.fetchall(
            "SELECT * FROM (SELECT * FROM agent_events WHERE agent_id = ? ORDER BY id DESC LIMIT ?)"
            " ORDER BY id",
            (agent_id, n),
        )
        return [
            EventRow(**{**dict(r), "data": json.loads(r["data"])}) for r in rows
        ]

    async def count(self, agent_id: str) -> int:
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS n FROM agent_events WHERE agent_id = ?", (agent_id,)
        )
        return int(row["n"]) if row else 0
