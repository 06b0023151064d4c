"""Escalation reminders and timeouts are rows fired from an injected clock: each fires at its
stored time (not before), exactly once, and still fires after the store and the timer service
are closed and reopened on the same file. No test here sleeps in real time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from store import Store, open_store
from supervisor.clock import FakeClock
from supervisor.events import EventHub
from supervisor.guard.escalations import (
    OTHERS_DUE_RECHECK_S,
    AlreadyAnswered,
    Answer,
    Decision,
    EscalationEvent,
    Escalations,
    Kind,
    Timeouts,
)
from supervisor.guard.timers import EscalationTimers, TimerState

TIMEOUTS = Timeouts(reminder_s=300.0, timeout_s=900.0)
BOUND_S = 10.0  # a safety bound on waiting for the loop's own work; never a sleep


@dataclass
class Supervisor:
    """What one supervisor run holds: its store, its escalations and its timer service."""

    store: Store
    esc: Escalations
    timers: EscalationTimers
    hub: EventHub


@asynccontextmanager
async def supervisor(path: Path, clock: FakeClock, timeouts: Timeouts = TIMEOUTS,
                     ) -> AsyncIterator[Supervisor]:
    store = await open_store(path)
    hub = EventHub()
    esc = Escalations(store, hub, timeouts, clock)
    timers = EscalationTimers(esc, clock, max_sleep_s=3600.0)
    try:
        yield Supervisor(store, esc, timers, hub)
    finally:
        await timers.stop()
        await store.db.close()


async def notices(store: Store, about: str) -> list[str]:
    return [r.title for r in await store.escalations.undelivered("test", limit=1000)
            if r.kind == "notice" and r.ref_id == about]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1_800_000_000.0)


async def test_reminder_then_timeout_fire_at_their_times_and_once(tmp_path, clock):
    async with supervisor(tmp_path / "db.sqlite", clock) as sup:
        t0 = clock.now()
        row = await sup.esc.open(agent_id=None, kind=Kind.PERMISSION, title="slow", body="b")
        assert (row.remind_at, row.expires_at) == (t0 + 300, t0 + 900)
        waiter = asyncio.create_task(sup.esc.wait(row))

        clock.advance(299.999)
        assert await sup.timers.tick() == []  # before
        clock.advance(0.001)
        assert [f.what for f in await sup.timers.tick()] == ["reminder"]  # at
        clock.advance(100)
        assert await sup.timers.tick() == []  # after: already sent
        assert await notices(sup.store, row.id) == ["Reminder: slow"]
        assert not waiter.done()

        clock.advance(499.999)
        assert await sup.timers.tick() == []  # before
        clock.advance(0.001)
        assert [f.what for f in await sup.timers.tick()] == ["expired"]  # at
        answer = await waiter
        assert answer.decision == Decision.DENY and answer.by == "timeout"
        clock.advance(10_000)
        assert await sup.timers.tick() == []  # after: closed
        assert await notices(sup.store, row.id) == [
            "Reminder: slow", f"No answer to {row.id}: denied"]
        done = await sup.esc.get(row.id)
        assert done.status == "expired" and done.timed_out_at == t0 + 900
        assert done.reminded_at == t0 + 300


async def test_reminder_and_timeout_still_fire_after_restarts(tmp_path, clock):
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as sup:
        t0 = clock.now()
        row = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="which port?",
                                 body="?", free_text=True, survives_restart=True)
        clock.advance(100)
        assert await sup.timers.tick() == []

    # Restart 1, before the reminder: the row stays open and keeps its stored times.
    async with supervisor(db, clock) as sup:
        assert await sup.esc.expire_orphans("the supervisor restarted") == []
        kept = await sup.esc.get(row.id)
        assert kept.status == "open" and (kept.remind_at, kept.expires_at) == (t0 + 300, t0 + 900)
        clock.advance(199)
        assert await sup.timers.tick() == []
        clock.advance(1)
        assert [f.what for f in await sup.timers.tick()] == ["reminder"]
        assert await sup.timers.tick() == []

    # Restart 2, between the reminder and the timeout: the reminder is not sent again.
    async with supervisor(db, clock) as sup:
        await sup.esc.expire_orphans("the supervisor restarted")
        clock.advance(599)
        assert await sup.timers.tick() == []
        clock.advance(1)
        assert [f.what for f in await sup.timers.tick()] == ["expired"]
        with pytest.raises(AlreadyAnswered, match="expired by timeout"):
            await sup.esc.answer(row.id, Answer(Decision.ANSWER, "8080", "alice", "console"))

    # Restart 3, after both: nothing fires twice.
    async with supervisor(db, clock) as sup:
        clock.advance(86_400)
        assert await sup.timers.tick() == []
        assert await notices(sup.store, row.id) == [
            "Reminder: which port?", f"No answer to {row.id}: denied"]


async def test_a_row_that_survives_a_restart_can_still_be_answered(tmp_path, clock):
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as sup:
        row = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?",
                                 free_text=True, survives_restart=True)
    async with supervisor(db, clock) as sup:
        await sup.esc.expire_orphans("the supervisor restarted")
        closed = await sup.esc.answer(row.id, Answer(Decision.ANSWER, "yes", "alice", "slack"))
        assert closed.status == "answered" and closed.answer == {"decision": "answer",
                                                                 "text": "yes"}
        clock.advance(10_000)
        assert await sup.timers.tick() == []  # an answered row has no timers left
        assert await notices(sup.store, row.id) == []


async def test_downtime_past_both_times_denies_without_a_stale_reminder(tmp_path, clock):
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as sup:
        row = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?",
                                 survives_restart=True)
    clock.advance(5000)  # the supervisor was down through both
    async with supervisor(db, clock) as sup:
        assert [f.what for f in await sup.timers.tick()] == ["expired"]
        assert await sup.timers.tick() == []
        assert await notices(sup.store, row.id) == [f"No answer to {row.id}: denied"]


async def test_a_pause_timeout_without_a_waiter_after_restart_denies(tmp_path, clock):
    db = tmp_path / "db.sqlite"
    pause = Timeouts(300.0, 900.0, on_timeout="pause")
    async with supervisor(db, clock, pause) as sup:
        row = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?",
                                 survives_restart=True)
    async with supervisor(db, clock, pause) as sup:
        clock.advance(900)
        assert [f.what for f in await sup.timers.tick()] == ["expired"]
        assert (await sup.esc.get(row.id)).status == "expired"


async def test_an_asker_gone_with_the_old_process_expires_and_its_timers_never_fire(
        tmp_path, clock):
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as sup:
        row = await sup.esc.open(agent_id=None, kind=Kind.PERMISSION, title="Bash", body="b")
    async with supervisor(db, clock) as sup:
        expired = await sup.esc.expire_orphans("the supervisor restarted")
        assert [r.id for r in expired] == [row.id]
        clock.advance(10_000)
        assert await sup.timers.tick() == []
        assert await notices(sup.store, row.id) == ["Interrupted: Bash"]
        assert (await sup.esc.get(row.id)).answer["text"] == "the supervisor restarted"


async def test_an_answer_before_the_reminder_cancels_both_timers(tmp_path, clock):
    async with supervisor(tmp_path / "db.sqlite", clock) as sup:
        row = await sup.esc.open(agent_id=None, kind=Kind.PERMISSION, title="t", body="b")
        waiter = asyncio.create_task(sup.esc.wait(row))
        clock.advance(10)
        await sup.esc.answer(row.id, Answer(Decision.ALLOW, "", "alice", "telegram"))
        assert (await waiter).decision == Decision.ALLOW
        clock.advance(10_000)
        assert await sup.timers.tick() == []
        assert await sup.esc.next_due() is None


async def test_two_services_ticking_at_once_fire_each_timer_once(tmp_path, clock):
    async with supervisor(tmp_path / "db.sqlite", clock) as sup:
        other = Escalations(sup.store, sup.hub, TIMEOUTS, clock)
        row = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?",
                                 survives_restart=True)
        clock.advance(300)
        a, b = await asyncio.gather(sup.esc.fire_due(), other.fire_due())
        assert sorted(f.what for f in a + b) == ["reminder"]
        clock.advance(600)
        a, b = await asyncio.gather(sup.esc.fire_due(), other.fire_due())
        assert sorted(f.what for f in a + b) == ["expired"]
        assert len(await notices(sup.store, row.id)) == 2


async def test_per_row_timeouts_and_never(tmp_path, clock):
    async with supervisor(tmp_path / "db.sqlite", clock) as sup:
        never = Timeouts(float("inf"), float("inf"))
        forever = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="budget",
                                     body="?", timeouts=never)
        assert forever.remind_at is None and forever.expires_at is None
        quick = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="quick", body="?",
                                   timeouts=Timeouts(5, 10))
        assert await sup.esc.next_due() == clock.now() + 5
        clock.advance(10)
        # The timeout is due along with the reminder: only the timeout is applied.
        assert [(f.esc_id, f.what) for f in await sup.timers.tick()] == [(quick.id, "expired")]
        clock.advance(10 ** 9)
        assert await sup.timers.tick() == []
        assert (await sup.esc.get(forever.id)).status == "open"


async def _event(queue: asyncio.Queue, what: str, title_prefix: str) -> EscalationEvent:
    while True:
        event = await queue.get()
        if (isinstance(event, EscalationEvent) and event.what == what
                and event.escalation.title.startswith(title_prefix)):
            return event


async def test_the_service_loop_sleeps_on_the_clock_until_the_next_stored_time(tmp_path, clock):
    async with supervisor(tmp_path / "db.sqlite", clock) as sup:
        with sup.hub.subscription() as queue:
            await sup.timers.start()
            await sup.timers.start()  # idempotent
            assert sup.timers.state == TimerState.RUNNING
            await asyncio.wait_for(clock.wait_sleep_calls(1), BOUND_S)
            assert clock.next_deadline == clock.monotonic() + 3600  # nothing due: max sleep
            m0 = clock.monotonic()
            row = await sup.esc.open(agent_id=None, kind=Kind.PERMISSION, title="slow",
                                     body="b")
            waiter = asyncio.create_task(sup.esc.wait(row))
            # A new row wakes the loop, which goes back to sleep until its reminder.
            await asyncio.wait_for(clock.wait_sleep_calls(2), BOUND_S)
            assert clock.next_deadline == m0 + 300 and clock.sleepers == 1

            clock.advance(299)
            for _ in range(5):
                await asyncio.sleep(0)
            assert clock.sleep_calls == 2  # still asleep: nothing fires before its time
            clock.advance(1)
            reminder = await asyncio.wait_for(_event(queue, "created", "Reminder:"), BOUND_S)
            assert reminder.escalation.ref_id == row.id and reminder.at == clock.now()
            await asyncio.wait_for(clock.wait_sleep_calls(3), BOUND_S)
            assert clock.next_deadline == m0 + 900

            clock.advance(600)
            answer = await asyncio.wait_for(waiter, BOUND_S)
            assert answer.by == "timeout"
            await asyncio.wait_for(clock.wait_sleep_calls(4), BOUND_S)
        await sup.timers.stop()
        await sup.timers.stop()  # idempotent
        assert sup.timers.state == TimerState.STOPPED and clock.sleepers == 0
        assert await notices(sup.store, row.id) == [
            "Reminder: slow", f"No answer to {row.id}: denied"]


async def test_the_service_fires_on_start_what_came_due_while_it_was_down(tmp_path, clock):
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as sup:
        row = await sup.esc.open(agent_id=None, kind=Kind.QUESTION, title="q", body="?",
                                 survives_restart=True)
        await sup.timers.start()
        await asyncio.wait_for(clock.wait_sleep_calls(1), BOUND_S)
    calls = clock.sleep_calls
    clock.advance(400)  # down past the reminder, not the timeout
    async with supervisor(db, clock) as sup:
        with sup.hub.subscription() as queue:
            await sup.timers.start()
            await asyncio.wait_for(_event(queue, "created", "Reminder:"), BOUND_S)
            await asyncio.wait_for(clock.wait_sleep_calls(calls + 1), BOUND_S)
            assert clock.next_deadline == clock.monotonic() + 500
        assert await notices(sup.store, row.id) == ["Reminder: q"]


async def test_an_answer_recorded_by_another_worker_reaches_the_call_waiting_here(tmp_path,
                                                                                clock):
    """Two workers on one database (docs/postgresql.md): the agent's worker holds the waiting
    call, the coordinator's chat answers. The answer is read from the row; only the agent's
    worker fires its request's timers."""
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as owner, supervisor(db, clock) as coordinator:
        await owner.store.agents.create(id="a1", name="far", parent_id=None, model=None,
                                        cwd="/tmp", prompt="p", permission_mode="default",
                                        state="idle")
        coordinator.esc.elsewhere = lambda: {"a1": ("far", "owner-worker")}
        row = await owner.esc.open(agent_id="a1", kind=Kind.PERMISSION, title="deploy?",
                                   body="b")
        waiter = asyncio.create_task(owner.esc.wait(row))
        other = await owner.esc.open(agent_id="a1", kind=Kind.PERMISSION, title="push?",
                                     body="b")
        other_waiter = asyncio.create_task(owner.esc.wait(other))

        # The coordinator's timers leave the agent's requests alone: they are its worker's,
        # and do not spin on them while overdue (next looked at in a while, not at once).
        clock.advance(900)
        assert await coordinator.timers.tick() == []
        assert (await owner.store.escalations.get(row.id)).status == "open"
        assert await coordinator.esc.next_due() == clock.now() + OTHERS_DUE_RECHECK_S
        assert await owner.esc.next_due() < clock.now()  # due at its own worker

        closed = await coordinator.esc.answer(row.id, Answer(Decision.ALLOW_SESSION, "ok",
                                                             "alice", "telegram"))
        assert closed.status == "answered"
        assert await owner.esc.collect_answers() == [row.id]
        assert await asyncio.wait_for(waiter, BOUND_S) == Answer(
            Decision.ALLOW_SESSION, "ok", "alice", "telegram")
        assert await owner.esc.collect_answers() == []  # handed once

        # The other request times out where it waits: denied there, as on one host.
        assert [f.what for f in await owner.timers.tick()] == ["expired"]
        assert (await asyncio.wait_for(other_waiter, BOUND_S)).decision == Decision.DENY


async def test_the_answer_watch_hands_over_an_answer_without_being_asked(tmp_path, clock):
    db = tmp_path / "db.sqlite"
    async with supervisor(db, clock) as owner, supervisor(db, clock) as coordinator:
        row = await owner.esc.open(agent_id=None, kind=Kind.QUESTION, title="which port?",
                                   body="?", free_text=True)
        waiter = asyncio.create_task(owner.esc.wait(row))
        watch = asyncio.create_task(owner.esc.watch_answers(every_s=0.01))
        try:
            await coordinator.esc.answer(row.id, Answer(Decision.ANSWER, "8080", "bob",
                                                        "slack"))
            answer = await asyncio.wait_for(waiter, BOUND_S)
        finally:
            watch.cancel()
        assert (answer.decision, answer.text, answer.by) == (Decision.ANSWER, "8080", "bob")
