"""The scheduler on an injected clock and a real SQLite store: a restart across a due time
(catch_up_once runs once, skip records the slot skipped), two schedulers on one store, overlap,
three failures pausing with a notice, timeouts, crash-interrupted runs, and the kill switch."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from store import Store, open_store
from store.schedules import RunRow, ScheduleRow
from supervisor.clock import FakeClock
from supervisor.errors import LimitExceeded
from supervisor.schedule.scheduler import CATCH_UP_ONCE, SKIP, SPAWN, Outcome, Scheduler, Started

TZ = "Europe/Berlin"
# Mon 7 Dec 2026 08:00 Berlin
T0 = datetime(2026, 12, 7, 8, 0, tzinfo=ZoneInfo(TZ)).timestamp()


@dataclass
class FakeTargets:
    """The runs' side of the seam: records what was started, ends runs when told to."""

    starts: list[tuple[str, int, str]] = field(default_factory=list)
    results: dict[int, Outcome] = field(default_factory=dict)
    cancelled: list[int] = field(default_factory=list)
    refuse: bool = False
    finish_with: Outcome | None = None  # every run ends at once with this

    async def start(self, schedule: ScheduleRow, run_id: int, prompt: str) -> Started:
        if self.refuse:
            raise LimitExceeded("10 agents are live; the limit is 10.", "Stop one.")
        self.starts.append((schedule.id, run_id, prompt))
        if self.finish_with is not None:
            self.results[run_id] = self.finish_with
        return Started(agent_id=f"agent{run_id}")

    async def outcome(self, schedule: ScheduleRow, run: RunRow) -> Outcome | None:
        return self.results.get(run.id)

    async def cancel(self, schedule: ScheduleRow, run: RunRow) -> None:
        self.cancelled.append(run.id)


@dataclass
class World:
    store: Store
    clock: FakeClock
    notices: list[tuple[str, str]]
    db: Path

    def scheduler(self, targets: FakeTargets, store: Store | None = None,
                  halted: list[bool] | None = None) -> Scheduler:
        async def notify(_agent: str | None, title: str, body: str) -> None:
            self.notices.append((title, body))

        flag = halted if halted is not None else [False]
        return Scheduler(store or self.store, targets, notify=notify, clock=self.clock,
                         halted=lambda: flag[0], tick_s=15, grace_s=300)

    async def schedule(self, sid: str, spec: str = "0 9 * * *", *, missed: str = SKIP,
                       timeout_s: float = 3600.0) -> None:
        await self.store.schedules.create(ScheduleRow(
            id=sid, spec=spec, tz=TZ, target_kind=SPAWN, target="cron", model=None,
            prompt="check the build", enabled=1, paused_why="", missed=missed, overlap=SKIP,
            timeout_s=timeout_s, budget_usd=None, notify="failure", created_by="test:op",
            owner_agent=None, expires_at=None, created_at=self.clock.now(), deleted_at=None))

    async def history(self, sid: str) -> list[tuple[str, str, int]]:
        rows = await self.store.schedules.history(sid, 50)
        return [(r.status, r.reason, r.catch_up) for r in reversed(rows)]


@pytest.fixture
async def world(tmp_path: Path, migrated_db: Path) -> AsyncIterator[World]:
    db = tmp_path / "s.db"
    shutil.copyfile(migrated_db, db)
    store = await open_store(db)
    try:
        yield World(store, FakeClock(T0), [], db)
    finally:
        await store.db.close()


async def test_restart_across_a_due_time(world: World) -> None:
    await world.schedule("catch", missed=CATCH_UP_ONCE)
    await world.schedule("skips", missed=SKIP)
    before = FakeTargets()
    await world.scheduler(before).tick()  # 08:00: nothing due yet
    assert before.starts == []
    # The supervisor is down from 08:00 to 11:00, across 09:00; a new one starts.
    world.clock.advance(3 * 3600)
    targets = FakeTargets()
    after = world.scheduler(targets)
    await after.recover()
    for _ in range(3):
        await after.tick()
        world.clock.advance(15)
    assert [(s, p.split("\n")[0]) for s, _, p in targets.starts] == [
        ("catch", "[Switchboard] Catch-up run of schedule catch: it was due at Mon 7 Dec 09:00 "
                  "Europe/Berlin, and it was missed while Switchboard was not running. Do what "
                  "that run would have done, as of now.")]
    assert await world.history("catch") == [("running", "", 1)]
    assert await world.history("skips") == [("skipped", "down", 0)]
    # Another restart: nothing is run or recorded again.
    again = FakeTargets()
    await world.scheduler(again).tick()
    assert again.starts == []
    assert len(await world.history("catch")) == 1


async def test_catch_up_is_one_run_for_the_newest_missed_slot(world: World) -> None:
    await world.schedule("catch", missed=CATCH_UP_ONCE)
    world.clock.advance(3 * 86400 + 3 * 3600)  # down for three days: Mon, Tue, Wed, Thu 09:00
    targets = FakeTargets()
    await world.scheduler(targets).tick()
    assert len(targets.starts) == 1
    assert "due at Thu 10 Dec 09:00" in targets.starts[0][2]
    assert await world.history("catch") == [("skipped", "down", 0)] * 3 + [("running", "", 1)]


async def test_two_schedulers_on_one_store_never_double_fire(world: World) -> None:
    await world.schedule("both", "*/5 * * * *")
    other = await open_store(world.db)  # a second connection: another replica on the file
    try:
        # Both see how runs end (as they would from the store's turns).
        a = FakeTargets(finish_with=Outcome("ran", 0.01, "ok"))
        b = FakeTargets(results=a.results, finish_with=a.finish_with)
        one, two = world.scheduler(a), world.scheduler(b, store=other)
        for _ in range(6):  # half an hour of ticks, both at once
            world.clock.advance(300)
            await asyncio.gather(one.tick(), two.tick())
        keys = [r.slot_key for r in await world.store.schedules.history("both", 100)]
        assert len(keys) == len(set(keys)) == 6
        assert len(a.starts) + len(b.starts) == 6
    finally:
        await other.db.close()


async def test_overlap_is_skipped_and_recorded(world: World) -> None:
    await world.schedule("busy", "* * * * *")
    targets = FakeTargets()  # runs never end
    sched = world.scheduler(targets)
    world.clock.advance(60)
    await sched.tick()
    world.clock.advance(60)
    await sched.tick()
    assert len(targets.starts) == 1
    assert await world.history("busy") == [("running", "", 0), ("skipped", "overlap", 0)]
    targets.results[targets.starts[0][1]] = Outcome("ran", 0.02, "all good")
    world.clock.advance(60)
    await sched.tick()
    assert len(targets.starts) == 2
    assert (await world.history("busy"))[0] == ("ran", "", 0)


async def test_three_failures_pause_with_a_notice(world: World) -> None:
    await world.schedule("flaky", "*/10 * * * *")
    targets = FakeTargets(finish_with=Outcome("failed", 0.01, "tests are red"))
    sched = world.scheduler(targets)
    for _ in range(3):
        world.clock.advance(600)
        await sched.tick()  # started
        await sched.tick()  # ended (failed)
    row = await world.store.schedules.get("flaky")
    assert row is not None and not row.enabled
    assert row.paused_why == "paused after 3 failures in a row"
    assert ("Schedule flaky paused" in [t for t, _ in world.notices])
    assert [t for t, _ in world.notices].count("Schedule flaky failed") == 3
    world.clock.advance(600)
    await sched.tick()
    assert len(targets.starts) == 3
    assert (await world.history("flaky"))[-1] == ("skipped", "paused", 0)
    assert await world.store.schedules.consecutive_failures("flaky") == 3


async def test_a_refused_start_is_a_failure(world: World) -> None:
    await world.schedule("full", "*/10 * * * *")
    sched = world.scheduler(FakeTargets(refuse=True))
    world.clock.advance(600)
    await sched.tick()
    [run] = await world.store.schedules.history("full")
    assert (run.status, run.outcome) == ("failed", "not started: Refused by a guardrail: 10 "
                                                   "agents are live; the limit is 10.")


async def test_a_run_past_its_timeout_is_stopped_and_recorded(world: World) -> None:
    await world.schedule("slow", "0 9 * * *", timeout_s=1800)
    targets = FakeTargets()
    sched = world.scheduler(targets)
    world.clock.advance(3600)
    await sched.tick()
    world.clock.advance(1799)
    await sched.tick()
    assert targets.cancelled == []
    world.clock.advance(2)
    await sched.tick()
    [run] = await world.store.schedules.history("slow")
    assert (run.status, run.outcome) == ("timed_out", "no result within 30 min")
    assert targets.cancelled == [run.id]


async def test_a_run_a_crash_interrupted_is_never_replayed(world: World) -> None:
    await world.schedule("crash", "0 9 * * *", missed=CATCH_UP_ONCE)
    world.clock.advance(3600)
    first = FakeTargets()
    await world.scheduler(first).tick()
    assert len(first.starts) == 1  # ... and the supervisor dies while it runs
    world.clock.advance(600)
    targets = FakeTargets()
    restarted = world.scheduler(targets)
    [interrupted] = await restarted.recover()
    await restarted.tick()
    assert targets.starts == []
    assert await world.history("crash") == [("interrupted",
                                             "the supervisor stopped while it ran", 0)]


async def test_kill_switch_skips_slots_and_release_catches_up_once(world: World) -> None:
    await world.schedule("catch", "0 * * * *", missed=CATCH_UP_ONCE)
    await world.schedule("skips", "0 * * * *", missed=SKIP)
    halted = [True]
    targets = FakeTargets()
    sched = world.scheduler(targets, halted=halted)
    for _ in range(3):  # 09:00, 10:00, 11:00 while the switch is on
        world.clock.advance(3600)
        await sched.tick()
    assert targets.starts == []
    assert await world.history("catch") == [("skipped", "halted", 0)] * 3
    halted[0] = False
    world.clock.advance(600)
    await sched.tick()
    await sched.tick()
    assert [s for s, _, _ in targets.starts] == ["catch"]
    assert "skipped while the kill switch was on" in targets.starts[0][2]
    assert "due at Mon 7 Dec 11:00" in targets.starts[0][2]
    assert await world.history("catch") == [("skipped", "halted", 0)] * 2 + [
        ("running", "after the kill switch", 1)]
    assert await world.history("skips") == [("skipped", "halted", 0)] * 3


async def test_a_run_of_a_deleted_schedule_still_ends_and_is_recorded(world: World) -> None:
    await world.schedule("gone", "0 9 * * *")
    targets = FakeTargets()
    sched = world.scheduler(targets)
    world.clock.advance(3600)
    await sched.tick()
    [(_, run_id, _)] = targets.starts
    await world.store.schedules.delete("gone", world.clock.now())
    targets.results[run_id] = Outcome("ran", 0.03, "done anyway")
    await sched.tick()
    run = await world.store.schedules.run(run_id)
    assert run is not None and (run.status, run.cost_usd) == ("ran", 0.03)
