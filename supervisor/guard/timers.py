"""The escalation timer service: fires stored reminders and timeouts when the clock says so.

It holds no schedule of its own. Each pass runs `Escalations.fire_due(now)` (what `tick` does,
the run-once mode tests call with a FakeClock), then sleeps on the clock until the earliest
stored time, or until a new open escalation is published, whichever comes first. The sleep is
capped at `max_sleep_s`, so a step of the wall clock (the stored times are wall-clock seconds)
delays a firing by at most that much. Because everything lives in rows, a restart loses
nothing: the first pass after start fires whatever came due while the supervisor was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from enum import StrEnum
from typing import Any

from supervisor.clock import Clock
from supervisor.guard.escalations import EscalationEvent, Escalations, Fired

logger = logging.getLogger(__name__)


class TimerState(StrEnum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class EscalationTimers:
    """Start after `Escalations.expire_orphans` (so rows about to be expired are not reminded
    first) and stop before the pool closes its agents (so no timeout acts mid-shutdown)."""

    name = "escalation-timers"

    def __init__(self, escalations: Escalations, clock: Clock | None = None, *,
                 max_sleep_s: float = 60.0, retry_s: float = 5.0) -> None:
        self.escalations = escalations
        self.clock: Clock = clock or escalations.clock
        self.max_sleep_s = max_sleep_s
        self.retry_s = retry_s
        self.state = TimerState.NEW
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> EscalationTimers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self, group: Any = None) -> None:
        """Idempotent. With a task group (anything with `spawn(name, coro)`), the loop is the
        group's task; without one, this service owns it."""
        if self.state != TimerState.NEW:
            return
        self.state = TimerState.RUNNING
        if group is not None:
            self._task = group.spawn(self.name, self.run())
        else:
            self._task = asyncio.create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        """Idempotent; returns once the loop has ended."""
        self.state = TimerState.STOPPED
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def tick(self, now: float | None = None) -> list[Fired]:
        """Run once: fire what is due at `now` (the clock's time if not given)."""
        return await self.escalations.fire_due(now)

    async def run(self) -> None:
        hub = self.escalations.hub
        with hub.subscription(EscalationEvent) as queue:
            while True:
                try:
                    await self.tick()
                    delay = await self._until_next_due()
                except Exception:  # noqa: BLE001 - a store hiccup must not end the timers
                    logger.exception("escalation timers: pass failed; retrying")
                    delay = self.retry_s
                await self._sleep_or_wake(delay, queue)

    async def _until_next_due(self) -> float:
        due = await self.escalations.next_due()
        if due is None:
            return self.max_sleep_s
        return min(self.max_sleep_s, max(0.0, due - self.clock.now()))

    async def _sleep_or_wake(self, delay: float, queue: asyncio.Queue[Any]) -> None:
        sleep = asyncio.create_task(self.clock.sleep(delay), name=f"{self.name}:sleep")
        woken = asyncio.create_task(_next_open_escalation(queue), name=f"{self.name}:wake")
        try:
            await asyncio.wait({sleep, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleep, woken):
                task.cancel()
            await asyncio.gather(sleep, woken, return_exceptions=True)


async def _next_open_escalation(queue: asyncio.Queue[Any]) -> None:
    """Returns when an escalation with timers is created: it may be due before the sleep ends."""
    while True:
        event = await queue.get()
        if (isinstance(event, EscalationEvent) and event.what == "created"
                and event.escalation.status == "open"):
            return
