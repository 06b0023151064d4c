"""The clock seam: FakeClock moves only when told and wakes sleepers at their deadline, in
order; the guardrails that keep time read it from the injected clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from supervisor.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock
from supervisor.guard.guardrails import CrashTracker, LimitExceeded, RateLimiter, day_start


def test_both_clocks_fit_the_protocol():
    clocks: list[Clock] = [SystemClock(), FakeClock()]
    assert all(callable(c.now) and callable(c.monotonic) for c in clocks)
    assert abs(SYSTEM_CLOCK.now() - time.time()) < 5


async def test_a_fake_sleeper_wakes_at_its_deadline_not_before():
    clock = FakeClock(start=1000.0)
    woke: list[float] = []

    async def sleeper():
        await clock.sleep(10)
        woke.append(clock.now())

    task = asyncio.create_task(sleeper())
    await clock.wait_sleep_calls(1)
    clock.advance(9.999)
    await asyncio.sleep(0)
    assert woke == [] and clock.sleepers == 1 and clock.now() == 1009.999
    clock.advance(0.001)
    await task
    assert woke == [1010.0] and clock.sleepers == 0


async def test_sleepers_wake_in_deadline_order_ties_in_sleep_order():
    clock = FakeClock()
    order: list[str] = []

    async def sleeper(name: str, seconds: float):
        await clock.sleep(seconds)
        order.append(name)

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in
             (("late", 30), ("first-tie", 5), ("second-tie", 5), ("mid", 20))]
    await clock.wait_sleep_calls(4)
    clock.advance(25)  # one jump past three deadlines
    await asyncio.gather(*tasks[1:])
    assert order == ["first-tie", "second-tie", "mid"] and not tasks[0].done()
    clock.advance(5)
    await tasks[0]
    assert order[-1] == "late"


async def test_a_cancelled_sleeper_is_forgotten_and_time_never_goes_back():
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(5))
    await clock.wait_sleep_calls(1)
    assert clock.next_deadline == clock.monotonic() + 5
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers == 0 and clock.next_deadline is None
    clock.advance(10)  # waking a cancelled sleeper is a no-op
    with pytest.raises(ValueError):
        clock.advance(-1)
    await clock.sleep(0)  # only yields
    assert clock.sleep_calls == 2


def test_rate_limit_window_follows_the_clock():
    clock = FakeClock()
    limiter = RateLimiter(clock)
    limiter.hit("k", 2, "spawns")
    clock.advance(30)
    limiter.hit("k", 2, "spawns")
    with pytest.raises(LimitExceeded, match="Try again in 30s"):
        limiter.hit("k", 2, "spawns")
    clock.advance(30)  # the first hit leaves the window
    limiter.hit("k", 2, "spawns")


def test_crash_window_and_budget_day_follow_the_clock():
    clock = FakeClock(start=86400.0 * 20_000 + 3600)  # 01:00 UTC
    crashes = CrashTracker(2, 600, clock)
    crashes.record("a")
    clock.advance(100)
    crashes.record("a")
    assert crashes.in_loop("a") == pytest.approx(500)
    clock.advance(501)
    assert crashes.in_loop("a") is None
    assert day_start(clock=clock) == 86400.0 * 20_000
    clock.advance(86400)
    assert day_start(clock=clock) == 86400.0 * 20_001


def test_the_one_backoff_doubles_from_its_first_wait_up_to_its_bound():
    from supervisor.clock import backoff_s

    assert [backoff_s(n, 2.0, 30.0) for n in range(7)] == [2, 4, 8, 16, 30, 30, 30]
    assert backoff_s(-3, 0.5, 10.0) == 0.5  # no failure yet: the first wait
    assert backoff_s(10_000, 1.0, 60.0) == 60.0  # no overflow past the bound
