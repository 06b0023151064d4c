"""The fence on writes about an agent: the (owner, epoch) of its lease (store/leases.py) must still
hold, checked inside the write's own transaction."""

from __future__ import annotations

from typing import Any

from store.errors import Fenced


async def check_fence(conn: Any, agent_id: str, fence: tuple[str, int] | None) -> None:
    """In a write's transaction: raises Fenced unless `fence` (owner, epoch) still holds the
    agent's lease. The claims take the same write lock, so none can slip in between."""
    if fence is None:
        return
    owner, epoch = fence
    async with conn.execute("SELECT 1 FROM agent_leases WHERE agent_id = ? AND owner = ? AND"
                            " epoch = ?", (agent_id, owner, epoch)) as cur:
        if await cur.fetchone() is None:
            raise Fenced(agent_id, owner, epoch)
