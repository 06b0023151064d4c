"""Long-lived parts as named services, started in order and stopped in reverse under one bound,
with every background task owned by one task group."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, Self

logger = logging.getLogger(__name__)


class Service(Protocol):
    """A part of the running system: `start` returns once it is ready; `stop` is idempotent
    and returns once nothing of it runs (its tasks are the group's, so it need not track
    them)."""

    @property
    def name(self) -> str: ...

    async def start(self, group: TaskGroup) -> None: ...

    async def stop(self) -> None: ...


class Lifecycle:
    """The async context manager every long-lived part is: `async with part:` starts it and
    stops it, and a start that fails stops what it had started. Subclasses give start/stop."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class GroupState(StrEnum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class FnService:
    """A service from two callables (for parts that are not classes of their own)."""

    name: str
    on_start: Callable[[TaskGroup], Awaitable[None]]
    on_stop: Callable[[], Awaitable[None]]

    async def start(self, group: TaskGroup) -> None:
        await self.on_start(group)

    async def stop(self) -> None:
        await self.on_stop()


class TaskGroup:
    """Owns every long-lived task of the services: each has a name; a task that dies of an
    exception is logged (it never passes silently) and does not take the others down."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("task died task=%s", task.get_name(), exc_info=task.exception())

    @property
    def names(self) -> list[str]:
        return sorted(t.get_name() for t in self._tasks)

    async def cancel_all(self, timeout_s: float) -> list[str]:
        """Cancel what is left; the names of tasks that did not end within the bound."""
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if not tasks:
            return []
        done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        return sorted(t.get_name() for t in pending)


class Services:
    """Start in order, stop in reverse; a start that fails stops what already started."""

    def __init__(self, services: list[Service], *, stop_timeout_s: float = 30.0) -> None:
        self.services = services
        self.group = TaskGroup()
        self.state = GroupState.NEW
        self.stop_timeout_s = stop_timeout_s
        self._started: list[Service] = []

    async def start(self) -> None:
        if self.state != GroupState.NEW:
            return
        self.state = GroupState.STARTING
        try:
            for svc in self.services:
                t0 = time.monotonic()
                await svc.start(self.group)
                self._started.append(svc)
                logger.debug("service started service=%s took_ms=%.0f", svc.name,
                             (time.monotonic() - t0) * 1000)
        except BaseException:
            await self.stop()
            raise
        self.state = GroupState.RUNNING

    async def add(self, svc: Service) -> None:
        """One more service, after the others: started now if the group runs, stopped first."""
        self.services.append(svc)
        if self.state == GroupState.RUNNING:
            await svc.start(self.group)
            self._started.append(svc)

    async def stop(self) -> None:
        if self.state in (GroupState.STOPPING, GroupState.STOPPED):
            return
        self.state = GroupState.STOPPING
        deadline = time.monotonic() + self.stop_timeout_s
        for svc in reversed(self._started):
            left = max(0.1, deadline - time.monotonic())
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for returns normally when a
                # cancel lands as its awaitable finishes, and the cancel is lost.
                async with asyncio.timeout(left):
                    await asyncio.shield(svc.stop())
            except TimeoutError:
                logger.error("service did not stop in time service=%s", svc.name)
            except Exception:  # noqa: BLE001 - one part failing to stop must not stop the rest
                logger.exception("service failed to stop service=%s", svc.name)
            else:
                logger.debug("service stopped service=%s", svc.name)
        self._started.clear()
        stuck = await self.group.cancel_all(max(0.1, deadline - time.monotonic()))
        if stuck:
            logger.error("tasks still running after stop tasks=%s", ",".join(stuck))
        self.state = GroupState.STOPPED


def loop_service(name: str, run: Callable[[], Coroutine[Any, Any, object]], *,
                 after: Callable[[], Awaitable[None]] | None = None) -> Service:
    """A part that is one long-running loop: its task is the group's; stopped, the loop is
    cancelled, then `after` ends what the loop had started."""
    task: list[asyncio.Task[Any]] = []

    async def start(group: TaskGroup) -> None:
        task.append(group.spawn(name, run()))

    async def stop() -> None:
        for t in task:
            t.cancel()
        await asyncio.gather(*task, return_exceptions=True)
        if after is not None:
            await after()

    return FnService(name, start, stop)
