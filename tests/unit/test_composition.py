"""The composition root: services start in order and stop in reverse, a failed start stops what
had started, signals become a two-phase shutdown, a task service is owned by the group."""

from __future__ import annotations

import asyncio
import signal

import pytest

from bot.app import Switchboard
from supervisor.service import FnService, Services, TaskGroup


async def test_services_start_in_order_stop_in_reverse_and_a_failed_start_unwinds():
    seen: list[str] = []

    def svc(name: str, fail: bool = False) -> FnService:
        async def start(_group: TaskGroup) -> None:
            if fail:
                raise RuntimeError(f"{name} cannot start")
            seen.append(f"start {name}")

        async def stop() -> None:
            seen.append(f"stop {name}")

        return FnService(name, start, stop)

    group = Services([svc("a"), svc("b")])
    await group.start()
    await group.add(svc("c"))
    await group.stop()
    await group.stop()  # idempotent
    assert seen == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]

    seen.clear()
    with pytest.raises(RuntimeError, match="b cannot start"):
        await Services([svc("a"), svc("b", fail=True), svc("c")]).start()
    assert seen == ["start a", "stop a"]


async def test_a_stuck_service_does_not_hold_up_the_others():
    stopped: list[str] = []

    async def hang() -> None:
        await asyncio.sleep(3600)

    async def note() -> None:
        stopped.append("first")

    async def nothing(_group: TaskGroup) -> None:
        return None

    group = Services([FnService("first", nothing, note), FnService("stuck", nothing, hang)],
                     stop_timeout_s=0.2)
    await group.start()
    await group.stop()
    assert stopped == ["first"]


async def test_signals_shut_down_in_two_phases(fake_settings):
    async with Switchboard(fake_settings) as app:
        ran = asyncio.Event()

        async def frontend() -> None:
            ran.set()
            await asyncio.sleep(3600)

        await app.add_task_service("frontend", frontend)
        await asyncio.wait_for(ran.wait(), 5)
        assert "frontend" in app.services.group.names
        waiter = asyncio.create_task(app.run_until_stopped())
        await asyncio.sleep(0)
        assert not waiter.done()
        app.on_signal(signal.SIGTERM)
        assert app.stopping.is_set() and not app.forced.is_set()
        app.on_signal(signal.SIGINT)  # a second signal forces
        assert app.forced.is_set()
        assert await asyncio.wait_for(waiter, 10) is False  # forced: not a clean drain
    assert app.services.group.names == []  # the front end's task ended with the services
