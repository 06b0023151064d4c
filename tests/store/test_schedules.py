"""Conformance of ScheduleStore: schedules and their runs, one run per slot (claimed by
inserting it), with the state changes refused when the run is not in the expected state."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from store import Store
from store.errors import Conflict
from store.protocols import ScheduleStore
from store.schedules import (
    FAILED,
    INTERRUPTED,
    RAN,
    RUNNING,
    SKIPPED,
    TIMED_OUT,
    NewRun,
    ScheduleRow,
)
from tests.store.conftest import T0

BASE = ScheduleRow(id="s1", spec="0 9 * * *", tz="UTC", target_kind="spawn", target="daily",
                   model=None, prompt="report", enabled=1, paused_why="", missed="skip",
                   overlap="skip", timeout_s=600.0, budget_usd=1.5, notify="failure",
                   created_by="telegram:1", owner_agent=None, expires_at=None,
                   created_at=T0, deleted_at=None)


def schedule(schedule_id: str = "s1", **kw: Any) -> ScheduleRow:
    return dataclasses.replace(BASE, id=schedule_id, **kw)


def run(slot: str, at: float, status: str = RUNNING, schedule_id: str = "s1",
        **kw: Any) -> NewRun:
    return NewRun(schedule_id=schedule_id, slot_key=slot, slot_at=at, status=status,
                  started_at=at, **kw)


@pytest.fixture
async def schedules(store: Store) -> ScheduleStore:
    await store.schedules.create(BASE)
    return store.schedules


async def test_create_get_and_all(schedules: ScheduleStore) -> None:
    assert await schedules.get("s1") == BASE
    assert await schedules.get("nope") is None
    await schedules.create(schedule("s0", created_at=T0 + 5, owner_agent="a1"))
    await schedules.create(schedule("s2", created_at=T0 - 5))
    assert [s.id for s in await schedules.all()] == ["s2", "s1", "s0"]
    assert [s.id for s in await schedules.all(owner_agent="a1")] == ["s0"]
    with pytest.raises(Conflict):
        await schedules.create(schedule("s1"))


async def test_pause_and_resume_report_a_change(schedules: ScheduleStore) -> None:
    assert await schedules.set_enabled("s1", False, "too noisy")
    assert not await schedules.set_enabled("s1", False, "again")  # already paused
    row = await schedules.get("s1")
    assert row is not None and (row.enabled, row.paused_why) == (0, "too noisy")
    assert await schedules.set_enabled("s1", True, "ignored")
    row = await schedules.get("s1")
    assert row is not None and (row.enabled, row.paused_why) == (1, "")
    assert not await schedules.set_enabled("nope", True)


async def test_delete_keeps_the_row_and_its_runs(schedules: ScheduleStore) -> None:
    run_id = await schedules.claim(run("d1", T0))
    assert await schedules.delete("s1", T0 + 1)
    assert not await schedules.delete("s1", T0 + 2)
    assert await schedules.get("s1") is None
    row = await schedules.get("s1", deleted=True)
    assert row is not None and (row.deleted_at, row.enabled) == (T0 + 1, 0)
    assert await schedules.all() == []
    assert not await schedules.set_enabled("s1", True)  # a deleted schedule stays off
    assert run_id is not None and await schedules.run(run_id) is not None


async def test_a_slot_is_claimed_once(schedules: ScheduleStore) -> None:
    first = await schedules.claim(run("2025-01-01T09:00", T0, claimed_by="sup-1"))
    assert first is not None
    assert await schedules.claim(run("2025-01-01T09:00", T0, claimed_by="sup-2")) is None
    row = await schedules.run(first)
    assert row is not None
    assert (row.schedule_id, row.slot_key, row.slot_at, row.status, row.claimed_by,
            row.started_at, row.ended_at, row.catch_up, row.manual, row.agent_id,
            row.message_id, row.cost_usd) == (
        "s1", "2025-01-01T09:00", T0, RUNNING, "sup-1", T0, None, 0, 0, None, None, 0.0)
    assert await schedules.run(first + 100) is None


async def test_a_run_of_an_unknown_schedule_is_refused(schedules: ScheduleStore) -> None:
    with pytest.raises(Conflict):
        await schedules.claim(run("x", T0, schedule_id="ghost"))


async def test_claim_many_in_order(schedules: ScheduleStore) -> None:
    taken = await schedules.claim(run("k2", T0 + 2))
    ids = await schedules.claim_many([run("k1", T0 + 1, SKIPPED, reason="missed"),
                                      run("k2", T0 + 2, SKIPPED), run("k3", T0 + 3)])
    assert ids[0] is not None and ids[1] is None and ids[2] is not None
    assert taken is not None and len({taken, ids[0], ids[2]}) == 3
    skipped = await schedules.run(ids[0])
    assert skipped is not None
    assert (skipped.status, skipped.reason, skipped.ended_at) == (SKIPPED, "missed", T0 + 1)
    assert await schedules.claim_many([]) == []


async def test_a_halted_slot_becomes_its_catch_up_once(schedules: ScheduleStore) -> None:
    halted = await schedules.claim(run("k1", T0, SKIPPED, reason="halted"))
    missed = await schedules.claim(run("k2", T0, SKIPPED, reason="missed"))
    assert halted is not None and missed is not None
    assert await schedules.claim_catch_up(halted, "sup-1", T0 + 50)
    assert not await schedules.claim_catch_up(halted, "sup-2", T0 + 51)
    assert not await schedules.claim_catch_up(missed, "sup-1", T0 + 50)  # not a halt
    row = await schedules.run(halted)
    assert row is not None
    assert (row.status, row.catch_up, row.claimed_by, row.started_at, row.reason) == (
        RUNNING, 1, "sup-1", T0 + 50, "after the kill switch")


async def test_started_fills_what_is_given(schedules: ScheduleStore) -> None:
    run_id = await schedules.claim(run("k", T0))
    assert run_id is not None
    await schedules.started(run_id, agent_id="a1")
    await schedules.started(run_id, message_id=7)
    row = await schedules.run(run_id)
    assert row is not None and (row.agent_id, row.message_id) == ("a1", 7)


async def test_a_run_is_finished_once(schedules: ScheduleStore) -> None:
    run_id = await schedules.claim(run("k", T0))
    assert run_id is not None
    assert await schedules.finish(run_id, RAN, now=T0 + 9, cost_usd=0.25,
                                  outcome="o" * 3000)
    assert not await schedules.finish(run_id, TIMED_OUT, now=T0 + 10, reason="late")
    row = await schedules.run(run_id)
    assert row is not None
    assert (row.status, row.ended_at, row.cost_usd, row.reason) == (RAN, T0 + 9, 0.25, "")
    assert len(row.outcome) == 2000
    assert await schedules.running() == []


async def test_finish_keeps_the_reason_unless_given(schedules: ScheduleStore) -> None:
    kept = await schedules.claim(run("k1", T0, reason="manual by ann"))
    given = await schedules.claim(run("k2", T0))
    assert kept is not None and given is not None
    await schedules.finish(kept, FAILED, now=T0 + 1)
    await schedules.finish(given, FAILED, now=T0 + 1, reason="r" * 600)
    a, b = await schedules.run(kept), await schedules.run(given)
    assert a is not None and a.reason == "manual by ann"
    assert b is not None and b.reason == "r" * 500


async def test_interrupt_running_returns_the_runs_it_ended(store: Store,
                                                           schedules: ScheduleStore) -> None:
    await store.schedules.create(schedule("s2"))
    one = await schedules.claim(run("k", T0))
    two = await schedules.claim(run("k", T0, schedule_id="s2"))
    done = await schedules.claim(run("j", T0))
    assert done is not None
    await schedules.finish(done, RAN, now=T0 + 1)
    assert [r.id for r in await schedules.running()] == [one, two]
    assert [r.id for r in await schedules.running("s2")] == [two]
    ended = await schedules.interrupt_running(T0 + 5)
    assert sorted(r.id for r in ended) == sorted([one, two])
    assert {r.status for r in ended} == {RUNNING}  # as they were
    assert await schedules.running() == []
    assert one is not None
    row = await schedules.run(one)
    assert row is not None
    assert (row.status, row.ended_at, row.reason) == (
        INTERRUPTED, T0 + 5, "the supervisor stopped while it ran")
    assert await schedules.interrupt_running(T0 + 6) == []


async def test_history_and_last_slot(schedules: ScheduleStore) -> None:
    assert await schedules.history("s1") == []
    assert await schedules.last_slot("s1") is None
    for i in range(4):
        await schedules.claim(run(f"k{i}", T0 + i, SKIPPED))
    manual = await schedules.claim(run("manual-1", T0 + 10, manual=True))
    assert [r.slot_key for r in await schedules.history("s1")] == [
        "manual-1", "k3", "k2", "k1", "k0"]
    assert [r.slot_key for r in await schedules.history("s1", 2)] == ["manual-1", "k3"]
    last = await schedules.last_slot("s1")
    assert last is not None and last.slot_key == "k3"  # a manual run is no slot
    assert manual is not None


async def test_consecutive_failures_since_the_last_success(schedules: ScheduleStore) -> None:
    assert await schedules.consecutive_failures("s1") == 0
    statuses = [FAILED, RAN, FAILED, SKIPPED, TIMED_OUT, INTERRUPTED, FAILED]
    for i, status in enumerate(statuses):
        await schedules.claim(run(f"k{i}", T0 + i, status))
    assert await schedules.consecutive_failures("s1") == 3  # skips and interruptions neutral
    assert await schedules.consecutive_failures("s1", limit=2) == 2
    await schedules.claim(run("k9", T0 + 9, RAN))
    assert await schedules.consecutive_failures("s1") == 0


async def test_counts_by_status(schedules: ScheduleStore) -> None:
    assert await schedules.counts() == {}
    for i, status in enumerate([RAN, RAN, FAILED, RUNNING]):
        await schedules.claim(run(f"k{i}", T0 + i, status))
    assert await schedules.counts() == {RAN: 2, FAILED: 1, RUNNING: 1}
