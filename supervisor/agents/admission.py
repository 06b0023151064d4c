"""A spawn's admission: the fleet's limits (agents, depth, children, rates) and the memory of the
worker it runs on."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from supervisor.guard.guardrails import LimitExceeded

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool


async def admit(pool: AgentPool, parent_id: str | None, by: str, *, here: bool = True) -> None:
    """Spawn limits, taken from the parent's recorded identity and the fleet's real state.
    `here`: the agent runs on this worker, whose memory then admits it (placed on another,
    the placer checked that worker's, as its heartbeat reported it)."""
    s = pool.settings
    live = pool.fleet.live()
    if len(live) >= s.max_agents:
        raise LimitExceeded(f"{len(live)} agents are live; the limit is {s.max_agents}.",
                            "Stop or kill an agent first, or raise max_agents.")
    if parent_id is not None:
        depth = 1
        cursor: str | None = parent_id
        while cursor is not None:
            depth += 1
            row = await pool.store.agents.get(cursor)
            cursor = row.parent_id if row else None
        if depth > s.max_depth:
            raise LimitExceeded(
                f"a child here would be at depth {depth}; the limit is {s.max_depth}.",
                "Spawn it from an agent higher up, or raise max_depth.")
        children = [r for r in live if r.parent_id == parent_id]
        if len(children) >= s.max_children:
            raise LimitExceeded(
                f"the parent already has {len(children)} live children; the limit is "
                f"{s.max_children}.", "Wait for some to finish, or raise max_children.")
        pool.rates.hit(f"spawn:agent:{parent_id}", s.spawns_per_minute, "spawns per agent")
    pool.rates.hit(f"spawn:op:{by}", s.spawns_per_minute, "spawns")
    if not here:
        return
    reading = await asyncio.to_thread(pool.memory.read)
    if reading.pct >= s.memory_refuse_pct:
        raise LimitExceeded(
            f"memory is at {reading.pct:.0f}% ({reading.used_bytes / 2**30:.1f} of "
            f"{reading.limit_bytes / 2**30:.1f} GiB, {reading.source}); new agents are "
            f"refused above {s.memory_refuse_pct:g}%.",
            "Stop or kill idle agents to free memory, then try again.")
