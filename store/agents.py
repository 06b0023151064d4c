"""Repository for agents and their state transitions."""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass, field
from typing import Any

from store.clock import Now, system_now
from store.db import AnyDatabase
from store.fence import check_fence

LIVE_STATES = ("starting", "working", "idle", "waiting", "stalled", "paused")


@dataclass(frozen=True, slots=True)
class AgentRow:
    id: str
    name: str
    parent_id: str | None
    model: str | None
    cwd: str
    prompt: str
    permission_mode: str
    state: str
    session_id: str | None
    launcher_pid: int | None
    cli_pid: int | None
    cost_baseline: dict[str, float] = field(default_factory=dict)
    last_error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    project_settings: bool = False  # the operator let it load the project's .claude settings

    @classmethod
    def from_row(cls, row: Any) -> AgentRow:
        data = dict(row)
        data["cost_baseline"] = json.loads(data.get("cost_baseline") or "{}")
        data["project_settings"] = bool(data.get("project_settings") or 0)
        return cls(**data)


@dataclass(frozen=True, slots=True)
class TransitionRow:
    agent_id: str
    from_state: str | None
    to_state: str
    reason: str
    at: float


class AgentRepo:
    # The method list() shadows the builtin in this class's body: annotations say builtins.list.
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    async def create(
        self,
        *,
        id: str,
        name: str,
        parent_id: str | None,
        model: str | None,
        cwd: str,
        prompt: str,
        permission_mode: str,
        state: str,
        project_settings: bool = False,
    ) -> AgentRow:
        now = self._now()
        async with self.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO agents (id, name, parent_id, model, cwd, prompt, permission_mode,"
                " state, created_at, updated_at, project_settings)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (id, name, parent_id, model, cwd, prompt, permission_mode, state, now, now,
                 int(project_settings)),
            )
            await conn.execute(
                "INSERT INTO agent_transitions (agent_id, from_state, to_state, reason, at)"
                " VALUES (?,?,?,?,?)",
                (id, None, state, "spawned", now),
            )
        row = await self.get(id)
        assert row is not None
        return row

    async def get(self, agent_id: str) -> AgentRow | None:
        row = await self.db.fetchone("SELECT * FROM agents WHERE id = ?", (agent_id,))
        return AgentRow.from_row(row) if row else None

    async def find(self, ref: str) -> AgentRow | None:
        """By id, else by name (the live agent of that name first, then the newest)."""
        row = await self.db.fetchone(
            "SELECT * FROM agents WHERE id = ? OR name = ? ORDER BY (id = ?) DESC,"
            f" (state IN {LIVE_STATES!r}) DESC, created_at DESC LIMIT 1",
            (ref, ref, ref),
        )
        return AgentRow.from_row(row) if row else None

    async def list(self, *, live_only: bool = False) -> builtins.list[AgentRow]:
        where = f"WHERE state IN {LIVE_STATES!r}" if live_only else ""
        rows = await self.db.fetchall(f"SELECT * FROM agents {where} ORDER BY created_at, id")
        return [AgentRow.from_row(r) for r in rows]

    async def live_name_taken(self, name: str) -> bool:
        row = await self.db.fetchone(
            f"SELECT 1 FROM agents WHERE name = ? AND state IN {LIVE_STATES!r}", (name,)
        )
        return row is not None

    async def children(self, agent_id: str) -> builtins.list[AgentRow]:
        rows = await self.db.fetchall(
            "SELECT * FROM agents WHERE parent_id = ? ORDER BY created_at", (agent_id,)
        )
        return [AgentRow.from_row(r) for r in rows]

    async def set_state(self, agent_id: str, old: str | None, new: str, reason: str, *,
                        fence: tuple[str, int] | None = None) -> float:
        """`fence`: (owner, epoch) of the agent's lease, checked in the same transaction
        (store/leases.py): Fenced if that worker no longer holds it."""
        now = self._now()
        async with self.db.transaction() as conn:
            await check_fence(conn, agent_id, fence)
            await conn.execute(
                "UPDATE agents SET state = ?, updated_at = ? WHERE id = ?", (new, now, agent_id)
            )
            await conn.execute(
                "INSERT INTO agent_transitions (agent_id, from_state, to_state, reason, at)"
                " VALUES (?,?,?,?,?)",
                (agent_id, old, new, reason, now),
            )
        return now

    async def update(self, agent_id: str, **fields: Any) -> None:
        if "cost_baseline" in fields:
            fields["cost_baseline"] = json.dumps(fields["cost_baseline"])
        cols = ", ".join(f"{k} = ?" for k in fields)
        await self.db.execute(
            f"UPDATE agents SET {cols}, updated_at = ? WHERE id = ?",
            (*fields.values(), self._now(), agent_id),
        )

    async def transitions(self, agent_id: str) -> builtins.list[TransitionRow]:
        rows = await self.db.fetchall(
            "SELECT agent_id, from_state, to_state, reason, at FROM agent_transitions"
            " WHERE agent_id = ? ORDER BY id",
            (agent_id,),
        )
        return [TransitionRow(**dict(r)) for r in rows]
