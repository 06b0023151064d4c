"""Wake-ups on a real PostgreSQL server (LISTEN/NOTIFY): a worker acts on what another worker
wrote for it as it commits, not at its next poll. Each test makes the poll never come (a lease
renewal interval of ten years; the kill switch's listening thread without its polling one),
so only the wake-up can explain what the worker does."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg

from store import Store, open_store
from supervisor.agents.fleet import Fleet
from supervisor.agents.ownership import FOREVER_S, Hooks, Ownership
from supervisor.clock import FakeClock
from supervisor.guard.killswitch import KillSwitch
from supervisor.persistence.offline import kill_from_shell
from tests.conftest import make_settings, wait_for
from tests.pg import database, pg_cluster

__all__ = ["database", "pg_cluster"]


def listening(url: str, application: str) -> bool:
    """A connection of `application` has run its LISTEN and waits (pg_stat_activity)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return bool(conn.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND"
            " application_name = %s AND query LIKE 'LISTEN%%' AND state = 'idle'",
            (application,)).fetchone()[0])  # type: ignore[index]


class Seen:
    """What the worker's ownership did, as the pool's hooks would be told."""

    def __init__(self) -> None:
        self.gained: list[str] = []
        self.cancels: list[tuple[str, str, str]] = []
        self.passes = 0  # reads of the lease table (each ends with on_tick)

    def hooks(self) -> Hooks:
        async def lost(agent_id: str) -> None:
            raise AssertionError(f"lost {agent_id}")

        async def cancel(agent_id: str, action: str, by: str) -> None:
            self.cancels.append((agent_id, action, by))

        async def gained(agent_id: str, taken_over: bool) -> None:
            assert not taken_over
            self.gained.append(agent_id)

        async def cut() -> None:
            raise AssertionError("cut")

        async def tick(_others: list[tuple[str, str, str]]) -> None:
            self.passes += 1

        return Hooks(lost, cancel, gained, cut, tick)


async def new_agent(store: Store, agent_id: str) -> None:
    await store.agents.create(id=agent_id, name=f"n-{agent_id}", parent_id=None, model=None,
                              cwd="", prompt="p", permission_mode="default", state="starting")


@contextlib.asynccontextmanager
async def worker_w1(database: str, tmp_path: Path) -> AsyncIterator[tuple[Store, Store, Seen]]:
    """Worker w1 (its store, another worker's, what w1 did) whose renewals never come, once it
    listens and the one read every start of listening makes is over: from then on only a
    wake-up makes it look at the lease table."""
    here = await open_store(tmp_path / "w1.db", database_url=database)
    other = await open_store(tmp_path / "w2.db", database_url=database)
    own = Ownership(here, "w1", renew_s=FOREVER_S, halt_after_s=FOREVER_S)
    seen = Seen()
    own.hooks = seen.hooks()
    task = asyncio.create_task(own.run())
    try:
        await wait_for(lambda: listening(database, "switchboard-listen") and seen.passes, 30,
                       "the worker listening")
        yield here, other, seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await here.db.close()
        await other.db.close()


async def test_a_placed_agent_is_claimed_and_a_cancel_carried_out_on_the_wake_up(
        database: str, tmp_path: Path) -> None:
    async with worker_w1(database, tmp_path) as (here, other, seen):
        passes = seen.passes
        await new_agent(other, "a1")
        await new_agent(other, "a2")
        await new_agent(other, "a3")
        await other.leases.place("a3", "w9")  # another worker's: no wake-up here
        await other.leases.place("a1", "w1")
        await wait_for(lambda: seen.gained == ["a1"], 30, "a1 claimed")
        await other.leases.place("a2", None)  # any worker's
        await wait_for(lambda: seen.gained == ["a1", "a2"], 30, "a2 claimed")
        lease = await here.leases.get("a1")
        assert lease is not None and (lease.owner, lease.epoch) == ("w1", 1)

        assert await other.leases.request("a1", "pause", "alice") == "w1"
        await wait_for(lambda: seen.cancels == [("a1", "pause", "alice")], 30, "the pause")

        async def cleared() -> bool:
            row = await here.leases.get("a1")
            return row is not None and row.cancel is None

        await wait_for(cleared, 30, "the request cleared by the owner")
        assert seen.passes > passes and seen.gained == ["a1", "a2"]
        placed = await here.leases.get("a3")
        assert placed is not None and placed.owner is None  # not this worker's to claim


async def test_the_halt_flag_written_on_another_host_wakes_this_workers_kill_switch(
        database: str, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "w1", fake=True, database_url=database)
    store = await open_store(settings.db_path, database_url=database)
    switch = KillSwitch(settings, store, Fleet(store), None, FakeClock())  # type: ignore[arg-type]
    # An agent's stand-in: a process carrying this worker's agent tag, as the sweep finds them.
    agent = subprocess.Popen(["sleep", "600"], env={
        **os.environ, "SWITCHBOARD_AGENT_TAG": f"{settings.instance_id}/a1"})
    listener = threading.Thread(target=switch.hear_database, daemon=True)
    listener.start()
    try:
        await wait_for(lambda: listening(database, "switchboard-listen"), 30,
                       "the kill switch listening")
        elsewhere = make_settings(tmp_path / "ops", fake=True, database_url=database)
        done = await asyncio.to_thread(kill_from_shell, elsewhere, "ops@cli", "from afar")
        assert done.problems == () and done.killed == ()  # none of its own: another host
        await wait_for(lambda: switch.halt is not None, 30, "this worker halted")
        assert switch.halt is not None
        assert (switch.halt["by"], switch.halt["reason"]) == ("ops@cli", "from afar")
        assert await asyncio.to_thread(agent.wait, 30) == -9  # SIGKILLed by the sweep
    finally:
        switch.close()
        listener.join(5)
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        await store.db.close()
    assert not listener.is_alive()


async def test_a_wake_up_sent_alone_makes_the_worker_read_the_lease_table(
        database: str, tmp_path: Path) -> None:
    """What a bus message for an agent another worker runs sends (store/leases.py `wake`): the
    worker reads the table (and the bus's counts, in its tick) without waiting to renew."""
    async with worker_w1(database, tmp_path) as (_here, other, seen):
        passes = seen.passes
        await other.leases.wake("w1")
        await wait_for(lambda: seen.passes > passes, 30, "a pass on the wake-up")
