"""Conformance of WorkerStore: one row per `switchboard run`, its heartbeat on the database's
clock (not the store's injected one), one coordinator at most once another takes the role."""

from __future__ import annotations

import asyncio
import time

from store import Store
from store.protocols import WorkerStore
from tests.store.conftest import T0


async def test_a_beat_registers_then_renews_on_the_database_clock(store: Store) -> None:
    workers: WorkerStore = store.workers
    before = time.time()
    await workers.beat("w1", host="alpha", pid=11, agents=0, memory_available=None,
                       coordinator=True)
    [row] = await workers.list()
    assert (row.id, row.host, row.pid, row.agents, row.memory_available, row.coordinator) == (
        "w1", "alpha", 11, 0, None, 1)
    # The database's clock: the real time, not the store's fake one (T0).
    assert abs(row.heartbeat_at - before) < 60 and abs(row.started_at - T0) > 1e6
    assert -1.0 < row.age_s < 60
    await asyncio.sleep(0.05)
    await workers.beat("w1", host="alpha", pid=11, agents=3, memory_available=2_000_000_000,
                       coordinator=True)
    [renewed] = await workers.list()
    assert renewed.started_at == row.started_at  # registered once
    assert renewed.heartbeat_at > row.heartbeat_at
    assert (renewed.agents, renewed.memory_available) == (3, 2_000_000_000)


async def test_the_coordinator_is_listed_first_and_a_new_one_clears_the_old_flag(
        store: Store) -> None:
    workers = store.workers
    await workers.beat("old", host="a", pid=1, agents=2, memory_available=10,
                       coordinator=True)
    await workers.beat("new", host="b", pid=2, agents=1, memory_available=20,
                       coordinator=False)
    assert [w.id for w in await workers.list()] == ["old", "new"]
    await workers.beat("new", host="b", pid=2, agents=1, memory_available=20,
                       coordinator=True)
    await workers.only_coordinator("new")
    listed = await workers.list()
    assert [(w.id, w.coordinator) for w in listed] == [("new", 1), ("old", 0)]
    await workers.remove("old")
    assert [w.id for w in await workers.list()] == ["new"]
