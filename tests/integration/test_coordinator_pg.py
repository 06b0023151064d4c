"""The coordinator role on a real PostgreSQL server (supervisor/coordinator.py): of two workers
on one database exactly one holds it and runs the gated part (as the Telegram front end is
run); a holder whose connection the server ends (pg_terminate_backend, as a failover or an
operator would) stops its part at its next check, and the other takes the role and starts its
own. On SQLite (no URL) the role is always held."""

from __future__ import annotations

import asyncio

import psycopg

from supervisor.coordinator import COORDINATOR_LOCK, Coordinator
from supervisor.service import Service, TaskGroup
from tests.conftest import wait_for
from tests.pg import database, pg_cluster

__all__ = ["database", "pg_cluster"]


class Part:
    """A gated long-running part that says whether it runs (a front end's stand-in)."""

    def __init__(self) -> None:
        self.running = False
        self.starts = 0

    async def run(self) -> None:
        self.running, self.starts = True, self.starts + 1
        try:
            await asyncio.Event().wait()
        finally:
            self.running = False


def terminate_holder(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype ="
                            " 'advisory' AND granted AND objid = %s",
                            (COORDINATOR_LOCK,)).fetchall()
        return len(rows)


async def test_one_holder_runs_the_part_and_a_lost_connection_hands_it_over(
        database: str) -> None:
    group = TaskGroup()
    one, two = Coordinator(database), Coordinator(database)
    parts = (Part(), Part())
    services: list[Service] = [one.gated_loop("front", parts[0].run),
                               two.gated_loop("front", parts[1].run)]
    try:
        assert await one.try_once() and not await two.try_once()
        for svc in services:
            await svc.start(group)
        await wait_for(lambda: parts[0].running, 5, "the holder's part")
        await asyncio.sleep(0.2)
        assert not parts[1].running  # never two
        assert not await two.try_once() and await one.try_once()  # held, checked

        assert terminate_holder(database) == 1
        assert not await one.try_once()  # its check fails: the role is given up
        await wait_for(lambda: not parts[0].running, 5, "the old holder's part stopped")
        assert await two.try_once()
        await wait_for(lambda: parts[1].running, 5, "the new holder's part")
        assert not await one.try_once() and not parts[0].running
        assert (parts[0].starts, parts[1].starts) == (1, 1)
    finally:
        for svc in services:
            await svc.stop()
        for c in (one, two):
            await c.close()
        await group.cancel_all(5)
    assert not any(p.running for p in parts)


async def test_on_sqlite_the_one_process_is_always_the_coordinator() -> None:
    group = TaskGroup()
    alone, part = Coordinator(None), Part()
    svc = alone.gated_loop("front", part.run)
    assert await alone.try_once() and alone.held
    await svc.start(group)
    await wait_for(lambda: part.running, 5, "the part")
    await svc.stop()
    await alone.close()
    assert not part.running
