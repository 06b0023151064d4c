"""Time as an injected seam: the `Clock` protocol, the real `SystemClock`, and a `FakeClock`
that moves only when a test tells it to.

Wall time (`now`, epoch seconds) is what gets stored: it means the same thing after a restart.
Monotonic time is for measuring how long something took and for rate windows: it never jumps.
`sleep` waits in monotonic time; a loop that waits for a stored wall-clock deadline recomputes
it after waking, so a step of the wall clock costs at most one sleep.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Wall time in epoch seconds (what goes into the store)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes backwards (durations, windows)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait this long in monotonic time; zero or less only yields to the event loop."""
        ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """A clock for tests: time stands still until `advance`. Sleepers wake in deadline order
    (ties in the order they went to sleep), and only once the deadline is reached, never
    before, so a test decides exactly which side of a deadline it is on."""

    def __init__(self, start: float = 1_800_000_000.0, *, monotonic_start: float = 1000.0) -> None:
        self._now = float(start)
        self._mono = float(monotonic_start)
        self._order = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self.sleep_calls = 0  # every sleep ever started, including zero-length ones
        self._call_waiters: list[tuple[int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        self.sleep_calls += 1
        for count, waiter in self._call_waiters:
            if self.sleep_calls >= count and not waiter.done():
                waiter.set_result(None)
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._order), fut))
        await fut  # cancelling the sleeper cancels fut; advance skips it

    async def wait_sleep_calls(self, count: int) -> None:
        """Return once `count` sleeps have been started in all: how a test knows a loop has
        finished a pass and gone back to sleep, without polling or sleeping itself."""
        if self.sleep_calls >= count:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._call_waiters.append((count, fut))
        try:
            await fut
        finally:
            self._call_waiters.remove((count, fut))

    def advance(self, seconds: float) -> None:
        """Move wall and monotonic time forward together and wake every sleeper whose deadline
        is now reached. The woken sleepers run when the caller next yields to the loop."""
        if seconds < 0:
            raise ValueError(f"time does not go backwards (advance({seconds}))")
        self._now += seconds
        self._mono += seconds
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are waiting (a test's way to know a loop has gone back to sleep)."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    @property
    def next_deadline(self) -> float | None:
        """Monotonic time the earliest sleeper wakes at, or None if nobody sleeps."""
        live = [deadline for deadline, _, fut in self._sleepers if not fut.done()]
        return min(live) if live else None

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now}, sleepers={self.sleepers})"


def backoff_s(failures: int, first_s: float, max_s: float) -> float:
    """The one backoff: the wait after `failures` failures in a row (0 for the first wait),
    `first_s` doubling each time, never more than `max_s`."""
    # The exponent is capped: 2.0 ** 1024 overflows a float (a part failing for hours, as a
    # bucket can, once reached that count).
    return min(max_s, first_s * 2.0 ** min(max(0, failures), 64))
