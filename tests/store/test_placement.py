"""LocalPlacer (supervisor/agents/placement.py) over the workers' heartbeats and the lease table,
on both engines: the worker with room and the fewest agents; this worker when its own memory
admission should give the refusal (it has the figures); a pinned host with no room refused."""

from __future__ import annotations

import pytest

from store import Store
from supervisor.agents.placement import AGENT_BYTES, LocalPlacer, SpawnSpec
from supervisor.errors import InvalidRequest
from supervisor.guard.guardrails import LimitExceeded

ROOM = 4 * AGENT_BYTES
TIGHT = AGENT_BYTES // 2


async def beat(store: Store, worker: str, host: str, memory: int | None) -> None:
    await store.workers.beat(worker, host=host, pid=1, agents=0, memory_available=memory,
                             coordinator=worker == "here")


async def test_no_heartbeat_yet_places_here(store: Store) -> None:
    assert await LocalPlacer(store, "here").place(SpawnSpec("a"), "a1") == "here"


async def test_the_worker_with_room_is_chosen_over_one_without(store: Store) -> None:
    await beat(store, "here", "alpha", TIGHT)
    await beat(store, "there", "beta", ROOM)
    assert await LocalPlacer(store, "here").place(SpawnSpec("a"), "a1") == "there"


async def test_no_room_anywhere_places_here_for_the_local_admission_to_refuse(
        store: Store) -> None:
    """This worker's memory admission refuses with its own figures (the cgroup's percentages),
    which say more than the placer could."""
    await beat(store, "here", "alpha", TIGHT)
    await beat(store, "there", "beta", TIGHT)
    assert await LocalPlacer(store, "here").place(SpawnSpec("a"), "a1") == "here"


async def test_a_pinned_host_without_room_is_refused_with_what_to_do(store: Store) -> None:
    await beat(store, "here", "alpha", ROOM)
    await beat(store, "there", "beta", TIGHT)
    with pytest.raises(LimitExceeded) as refused:
        await LocalPlacer(store, "here").place(SpawnSpec("a", host="beta"), "a1")
    assert "beta" in str(refused.value)
    with pytest.raises(InvalidRequest, match="alpha, beta"):
        await LocalPlacer(store, "here").place(SpawnSpec("a", host="gamma"), "a1")
    assert await LocalPlacer(store, "here").place(SpawnSpec("a", host="alpha"), "a1") == "here"
