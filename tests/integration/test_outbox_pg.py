"""The escalation outbox of two workers on one PostgreSQL database (two stores, two
Escalations, each with its watch running as `switchboard run` runs it): a request opened on the
agent's worker reaches the front end the other worker serves, the answer given there reaches
the call waiting on the first, and neither worker publishes a row twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import open_store
from supervisor.events import EventHub
from supervisor.guard.escalations import (
    Answer,
    Decision,
    EscalationEvent,
    Escalations,
    Kind,
    Timeouts,
)
from tests.conftest import wait_for
from tests.pg import database, pg_cluster

__all__ = ["database", "pg_cluster"]
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def workers(database: str) -> AsyncIterator[tuple[Escalations, Escalations]]:
    stores = [await open_store(Path("/nonexistent"), database_url=database) for _ in range(2)]
    pair = [Escalations(s, EventHub(), Timeouts()) for s in stores]
    watches = [asyncio.create_task(e.watch_answers(0.05)) for e in pair]
    try:
        yield pair[0], pair[1]
    finally:
        for w in watches:
            w.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        for s in stores:
            await s.db.close()


async def test_a_request_on_one_worker_is_shown_and_answered_on_the_other(workers) -> None:
    coordinator, agents_worker = workers
    assert coordinator.shared and agents_worker.shared
    shown: list[str] = []
    created: list[str] = []

    async def chat() -> None:  # the coordinator's front end
        async for row in coordinator.follow("telegram"):
            shown.append(row.id)
            await coordinator.ack(row.id, "telegram")

    async def events() -> None:  # everything the coordinator's hub publishes
        with coordinator.hub.subscription(EscalationEvent) as queue:
            while True:
                event = await queue.get()
                if event.what == "created":
                    created.append(event.escalation.id)

    tasks = [asyncio.create_task(chat()), asyncio.create_task(events())]
    try:
        await asyncio.sleep(0.3)  # both watches made their first pass
        row = await agents_worker.open(agent_id=None, kind=Kind.PERMISSION,
                                       title="x wants to use Bash", body="b")
        waiting = asyncio.create_task(agents_worker.wait(row))
        await wait_for(lambda: shown == [row.id], 20, "the request on the other worker's chat")
        await coordinator.answer(row.id, Answer(Decision.ALLOW, "", "alice", "telegram"))
        answer = await asyncio.wait_for(waiting, 20)
        assert (answer.decision, answer.by) == (Decision.ALLOW, "alice")
        note = await coordinator.notify(None, "said on the coordinator")
        await wait_for(lambda: shown == [row.id, note.id], 20, "the coordinator's own notice")
        await asyncio.sleep(0.3)  # a few passes of the watch: its own row is not published again
        assert created == [row.id, note.id]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
