"""Conformance of LeaseStore: one lease per agent, its owner and epoch, expiry on the database's
clock; a claim is exclusive however many workers try; writes about an agent are fenced by its
epoch; a cancel request reaches the owner; one running turn per agent, enforced by the database."""

from __future__ import annotations

import asyncio

import pytest

from store import Store
from store.errors import Conflict, Fenced
from store.protocols import LeaseStore
from tests.store.conftest import MakeAgent

TTL = 60.0


async def test_a_claim_is_the_first_workers_and_its_epoch_fences_writes(
        store: Store, make_agent: MakeAgent) -> None:
    leases: LeaseStore = store.leases
    await make_agent("a1")
    assert await leases.claim("a1", "w1", TTL) == 1
    assert await leases.claim("a1", "w2", TTL) is None  # held, not expired
    lease = await leases.get("a1")
    assert lease is not None and (lease.owner, lease.epoch) == ("w1", 1)
    assert lease.expires_in_s is not None and 0 < lease.expires_in_s <= TTL
    # The holder's fence lets its writes through; anyone else's is refused, nothing written.
    await store.agents.set_state("a1", "starting", "idle", "up", fence=("w1", 1))
    with pytest.raises(Fenced):
        await store.agents.set_state("a1", "idle", "working", "stale", fence=("w2", 1))
    with pytest.raises(Fenced):
        await store.turns.start("a1", "hi", fence=("w1", 0))
    assert [t.to_state for t in await store.agents.transitions("a1")] == ["starting", "idle"]
    assert await store.turns.recent("a1") == []


async def test_an_expired_lease_is_taken_over_once_and_the_old_epoch_is_fenced(
        store: Store, make_agent: MakeAgent) -> None:
    leases = store.leases
    await make_agent("a1", state="idle")
    await make_agent("a2", "beta", state="killed")  # not live: never taken over
    assert await leases.claim("a1", "dead", 0.0) == 1
    assert await leases.claim("a2", "dead", 0.0) == 1
    await asyncio.sleep(0.02)  # the database's clock moves past the expiry
    assert await leases.renew("dead", TTL) == []  # expired: not renewed, no longer its
    # Two workers scan at once: each agent goes to one of them, with the next epoch.
    got = await asyncio.gather(leases.claim_expired("w1", TTL), leases.claim_expired("w2", TTL))
    assert sorted(got, key=len) == [[], [("a1", 2)]]
    winner = "w1" if got[0] else "w2"
    with pytest.raises(Fenced):  # the dead worker's writes, if it ever comes back
        await store.turns.start("a1", "replayed?", fence=("dead", 1))
    turn = await store.turns.start("a1", "next", fence=(winner, 2))
    assert turn > 0
    assert [r.agent_id for r in await leases.renew(winner, TTL)] == ["a1"]
    assert await leases.claim_expired("w3", TTL) == []


async def test_force_takes_a_held_lease_and_a_holder_reclaims_with_a_new_epoch(
        store: Store, make_agent: MakeAgent) -> None:
    await make_agent("a1")
    assert await store.leases.claim("a1", "w1", TTL) == 1
    assert await store.leases.claim("a1", "w1", TTL) == 2
    assert await store.leases.claim("a1", "w2", TTL, force=True) == 3
    assert [r.agent_id for r in await store.leases.renew("w1", TTL)] == []


async def test_a_placed_agent_is_claimed_by_its_worker_only_once(
        store: Store, make_agent: MakeAgent) -> None:
    leases = store.leases
    await make_agent("a1")
    await make_agent("a2", "beta")
    await leases.place("a1", "w2")
    await leases.place("a2", None)  # any worker
    assert await leases.claim_pending("w1", TTL) == [("a2", 1)]
    got = await asyncio.gather(leases.claim_pending("w2", TTL), leases.claim_pending("w2", TTL))
    assert sorted(got, key=len) == [[], [("a1", 1)]]
    assert await leases.live_per_worker() == {"w1": 1, "w2": 1}
    assert await leases.others("w1") == [("a1", "alpha", "w2")]


async def test_a_cancel_request_reaches_the_owner_and_is_cleared_by_it(
        store: Store, make_agent: MakeAgent) -> None:
    leases = store.leases
    await make_agent("a1")
    assert await leases.request("nobody", "kill", "op") is None
    assert await leases.claim("a1", "w1", TTL) == 1
    assert await leases.request("a1", "pause", "alice") == "w1"
    [held] = await leases.renew("w1", TTL)
    assert (held.cancel, held.cancel_by) == ("pause", "alice")
    await leases.clear("a1", "pause", ("w2", 1))  # not the owner: stays
    assert (await leases.renew("w1", TTL))[0].cancel == "pause"
    await leases.clear("a1", "pause", ("w1", 1))
    assert (await leases.renew("w1", TTL))[0].cancel is None
    with pytest.raises(ValueError, match="unknown action"):
        await leases.request("a1", "explode", "alice")


async def test_a_placement_and_a_cancel_request_wake_the_worker_concerned(
        store: Store, make_agent: MakeAgent, backend: str) -> None:
    leases = store.leases
    async with leases.wakeups() as heard:  # listening from here on
        await make_agent("a1")
        await make_agent("a2", "beta")
        await leases.place("a1", "w2")
        assert await leases.claim_pending("w2", TTL) == [("a1", 1)]
        assert await leases.request("a1", "pause", "alice") == "w2"
        await leases.place("a2", None)  # any worker may claim it
        if backend == "sqlite":  # one process owns every agent: nobody to wake
            assert [worker async for worker in heard] == []
            return
        got = [await asyncio.wait_for(anext(heard), 30) for _ in range(3)]
    assert got == ["w2", "w2", ""]


async def test_a_clean_stop_releases_so_another_worker_takes_over_at_once(
        store: Store, make_agent: MakeAgent) -> None:
    await make_agent("a1", state="idle")
    assert await store.leases.claim("a1", "w1", TTL) == 1
    assert await store.leases.release_all("w1") == 1
    assert await store.leases.claim_expired("w2", TTL) == [("a1", 2)]


async def test_one_running_turn_per_agent_is_enforced_by_the_database(
        store: Store, make_agent: MakeAgent) -> None:
    await make_agent("a1")
    await make_agent("a2", "beta")
    first = await store.turns.start("a1", "one")
    with pytest.raises(Conflict):
        await store.turns.start("a1", "two")
    await store.turns.start("a2", "other agent")  # per agent
    await store.turns.close_running("a1", "cut")
    assert await store.turns.start("a1", "three") > first
