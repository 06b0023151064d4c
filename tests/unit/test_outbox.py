"""The escalation outbox: at-least-once delivery per front end, idempotent by id, first answer
wins, reminders and timeouts."""

from __future__ import annotations

import asyncio

import pytest

from store import open_store
from supervisor.clock import FakeClock
from supervisor.events import EventHub
from supervisor.guard.escalations import (
    AlreadyAnswered,
    Answer,
    Decision,
    Escalations,
    Kind,
    Timeouts,
    UnknownEscalation,
)
from tests.conftest import wait_for


@pytest.fixture
async def esc(tmp_path):
    store = await open_store(tmp_path / "db.sqlite")
    yield Escalations(store, EventHub(), Timeouts(reminder_s=0.2, timeout_s=0.5))
    await store.db.close()


async def test_a_front_end_that_was_down_gets_each_missed_row_once(esc):
    rows = [await esc.notify(None, f"notice {i}") for i in range(3)]
    q = await esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?", free_text=True)
    await esc.ack(rows[0].id, "telegram")
    await esc.ack(rows[0].id, "telegram")  # a redelivery is harmless
    missed = [r.id for r in await esc.store.escalations.undelivered("telegram")]
    assert missed == [rows[1].id, rows[2].id, q.id]
    for row_id in missed:
        await esc.ack(row_id, "telegram")
    assert await esc.store.escalations.undelivered("telegram") == []
    # Another front end has its own cursor.
    assert len(await esc.store.escalations.undelivered("slack")) == 4


async def test_follow_yields_backlog_then_new_rows(esc):
    # Still open when the front end first looks: shown (a notice from before it is not).
    first = await esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?")
    seen: list[str] = []

    async def consume():
        async for row in esc.follow("console"):
            seen.append(row.id)
            await esc.ack(row.id, "console")

    task = asyncio.create_task(consume())
    try:
        for _ in range(50):
            if seen:
                break
            await asyncio.sleep(0.01)
        second = await esc.notify(None, "after")
        for _ in range(100):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        assert seen == [first.id, second.id]
    finally:
        task.cancel()


async def test_first_answer_wins(esc):
    row = await esc.open(agent_id=None, kind=Kind.PERMISSION, title="t", body="b")
    waiter = asyncio.create_task(esc.wait(row))
    await esc.answer(row.id, Answer(Decision.ALLOW, "", "alice", "telegram"))
    with pytest.raises(AlreadyAnswered, match="alice via telegram"):
        await esc.answer(row.id, Answer(Decision.DENY, "", "bob", "slack"))
    assert (await waiter).by == "alice"


async def test_unknown_id_and_notice_answers_are_refused(esc):
    with pytest.raises(UnknownEscalation):
        await esc.answer("zzzz", Answer(Decision.ALLOW))
    note = await esc.notify(None, "fyi")
    with pytest.raises(Exception, match="notice"):
        await esc.answer(note.id, Answer(Decision.ALLOW))


async def test_timeout_reminds_then_denies(tmp_path):
    clock = FakeClock()
    store = await open_store(tmp_path / "db.sqlite")
    esc = Escalations(store, EventHub(), Timeouts(reminder_s=0.2, timeout_s=0.5), clock)
    try:
        row = await esc.open(agent_id=None, kind=Kind.PERMISSION, title="slow", body="b")
        waiter = asyncio.create_task(esc.wait(row))
        clock.advance(0.2)
        await esc.fire_due()
        clock.advance(0.3)
        await esc.fire_due()
        answer = await waiter
        assert answer.decision == Decision.DENY and answer.by == "timeout"
        titles = [r.title for r in await esc.store.escalations.undelivered("x")]
        assert "Reminder: slow" in titles and any("denied" in t for t in titles)
        assert (await esc.get(row.id)).status == "expired"
    finally:
        await store.db.close()


async def test_timeout_can_pause_and_keep_the_question_open(tmp_path):
    clock = FakeClock()
    store = await open_store(tmp_path / "db.sqlite")
    esc = Escalations(store, EventHub(), Timeouts(0.1, 0.2, on_timeout="pause"), clock)
    calls = []

    async def on_pause():
        calls.append("pause")

    async def on_resume():
        calls.append("resume")

    try:
        row = await esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?")
        waiter = asyncio.create_task(esc.wait(row, on_pause=on_pause, on_resume=on_resume))
        await asyncio.sleep(0)  # the waiter registers its hooks
        clock.advance(0.2)
        assert [f.what for f in await esc.fire_due()] == ["paused"]
        assert calls == ["pause"] and (await esc.get(row.id)).status == "open"
        clock.advance(3600)
        assert await esc.fire_due() == []  # paused once; no reminder after the timeout
        await esc.answer(row.id, Answer(Decision.ANSWER, "late but fine", "alice", "console"))
        assert (await waiter).text == "late but fine"
        assert calls == ["pause", "resume"]
    finally:
        await store.db.close()


async def test_restart_expires_orphans_and_says_so(tmp_path):
    store = await open_store(tmp_path / "db.sqlite")
    esc = Escalations(store, EventHub(), Timeouts())
    row = await esc.open(agent_id=None, kind=Kind.PERMISSION, title="lost", body="b")
    await store.db.close()
    store = await open_store(tmp_path / "db.sqlite")  # a new supervisor: no waiters
    try:
        esc2 = Escalations(store, EventHub(), Timeouts())
        expired = await esc2.expire_orphans("the supervisor restarted")
        assert [r.id for r in expired] == [row.id]
        assert (await esc2.get(row.id)).status == "interrupted"
        assert any(r.title == "Interrupted: lost" for r in await store.escalations.undelivered("x"))
        assert await esc2.expire_orphans("again") == []
    finally:
        await store.db.close()


async def consume(esc, frontend, seen, n, timeout_s=5.0):
    """Follow `frontend`, acknowledging each row, until `n` rows were seen."""
    async def run():
        async for row in esc.follow(frontend):
            seen.append(row.id)
            await esc.ack(row.id, frontend)
            if len(seen) >= n:
                return

    await asyncio.wait_for(run(), timeout_s)


async def test_a_backlog_longer_than_a_page_is_delivered_whole(esc):
    """Regression (issue 9): follow read 200 rows, then waited for a new escalation before
    reading the rest."""
    await esc.store.kv.set("frontend_seen:phone", 0)  # a front end that was down a while
    rows = [await esc.notify(None, f"notice {i}") for i in range(250)]
    seen: list[str] = []
    await consume(esc, "phone", seen, 250)
    assert seen == [r.id for r in rows]


async def test_a_front_end_seen_for_the_first_time_starts_from_now(esc):
    """Regression (issue 9): a new front end replayed every notice ever written."""
    old = [await esc.notify(None, f"old {i}") for i in range(3)]
    closed = await esc.open(agent_id=None, kind=Kind.PERMISSION, title="done", body="b")
    await esc.answer(closed.id, Answer(Decision.ALLOW, "", "alice", "console"))
    still_open = await esc.open(agent_id=None, kind=Kind.QUESTION, title="open", body="?")
    # The next supervisor on this store: what it says at start is news to the new front end.
    esc = Escalations(esc.store, EventHub(), esc.timeouts, FakeClock(esc.clock.now() + 1))
    at_start = await esc.notify(None, "started")
    seen: list[str] = []
    task = asyncio.create_task(consume(esc, "newphone", seen, 3))
    await wait_for(lambda: len(seen) >= 2, 5, "the open question and the start notice")
    new = await esc.notify(None, "new")
    await task
    assert seen == [still_open.id, at_start.id, new.id]
    assert not {r.id for r in old} & set(seen)
    # Known from now on: what it misses while away comes next time.
    missed = await esc.notify(None, "while away")
    later: list[str] = []
    await consume(esc, "newphone", later, 1)
    assert later == [missed.id]


async def test_rows_another_worker_wrote_reach_this_workers_front_ends(esc):
    """Regression (issue 30): a front end waited for a row published in its own process, so on
    a shared database the request of an agent another worker runs never reached the chat of
    the coordinator. Two Escalations on one store are two workers."""
    here = Escalations(esc.store, EventHub(), esc.timeouts)
    assert await here.collect_arrivals() == []  # the first pass only notes where to start
    seen: list[str] = []
    task = asyncio.create_task(consume(here, "console", seen, 3))
    local = await here.notify(None, "said here")
    await wait_for(lambda: seen == [local.id], 5, "the local notice")
    far = await esc.open(agent_id=None, kind=Kind.PERMISSION, title="far", body="b")
    assert await here.collect_arrivals() == [far.id]
    await wait_for(lambda: seen == [local.id, far.id], 5, "the other worker's request")
    again = await here.notify(None, "said here again")
    assert await here.collect_arrivals() == []  # its own rows are not published twice
    await task
    assert seen == [local.id, far.id, again.id]
    assert here.shared is False and esc.shared is False  # the watch runs on PostgreSQL only
