"""The core (supervisor/core.py) builds every part of the runtime; the pool builds none and is
handed its parts. The core's services start in SERVICE_ORDER and stop in reverse, and a start
that fails stops what had started before it, leaving the later parts untouched."""

from __future__ import annotations

import ast
import asyncio
import logging
import re
from pathlib import Path

import pytest

from store import open_store
from supervisor.bus.core import BusState
from supervisor.config import Settings
from supervisor.coordinator import Coordinator
from supervisor.core import SERVICE_ORDER, Core
from supervisor.events import EventHub
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
# Every long-lived part of the runtime, by its class: the core builds each of them.
PARTS = ("Policy", "Fleet", "Escalations", "EscalationTimers", "StorageGuard", "KillSwitch",
         "CrashTracker", "RateLimiter", "MemoryProbe", "Watchdog", "Bus", "EventIngest",
         "Retention", "StandingAgents", "Repos")


def _built_in(path: Path) -> set[str]:
    """The PARTS a module constructs (a call of the class, or Policy.load)."""
    built = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in PARTS:
                built.add(name)
            if name == "Policy.load":
                built.add("Policy")
    return built


def _order(caplog: pytest.LogCaptureFixture, verb: str) -> list[str]:
    pattern = re.compile(rf"service {verb} service=(\S+)")
    return [m.group(1) for r in caplog.records if (m := pattern.search(r.getMessage()))]


def test_the_pool_builds_no_part_and_the_core_builds_every_one():
    assert _built_in(ROOT / "supervisor" / "agents" / "pool.py") == set()
    assert _built_in(ROOT / "supervisor" / "core.py") == set(PARTS)


async def test_the_pool_works_with_the_cores_parts(fake_settings: Settings):
    store = await open_store(fake_settings.db_path)
    try:
        core = Core(fake_settings, store, EventHub())
        pool = core.pool
        for part in ("fleet", "policy", "escalations", "killswitch", "watchdog", "bus",
                     "ingest", "repos", "storage", "memory"):
            assert getattr(pool, part) is getattr(core, part), part
        assert [s.name for s in core.services.services] == list(SERVICE_ORDER)
    finally:
        await store.db.close()


async def test_services_start_in_order_and_stop_in_reverse(fake_settings: Settings, caplog):
    store = await open_store(fake_settings.db_path)
    try:
        core = Core(fake_settings, store, EventHub())
        with caplog.at_level(logging.DEBUG, logger="supervisor.service"):
            await core.services.start()
            assert core.bus.state == BusState.RUNNING
            assert _order(caplog, "started") == list(SERVICE_ORDER)
            await core.services.stop()
        assert _order(caplog, "stopped") == list(reversed(SERVICE_ORDER))
        assert core.bus.state == BusState.CLOSED
    finally:
        await store.db.close()


async def test_a_start_that_fails_stops_the_ones_before_it(fake_settings: Settings, caplog):
    # A real failure: the agents' workspaces directory cannot be made (a file is in the way),
    # so the "recovery" service (the pool's prepare) fails.
    fake_settings.home.mkdir(parents=True, exist_ok=True)
    fake_settings.workspaces.write_text("not a directory")
    store = await open_store(fake_settings.db_path)
    try:
        core = Core(fake_settings, store, EventHub())
        with caplog.at_level(logging.DEBUG, logger="supervisor.service"), \
                pytest.raises(FileExistsError):
            await core.services.start()
        before = list(SERVICE_ORDER[:SERVICE_ORDER.index("recovery")])
        assert _order(caplog, "started") == before
        assert _order(caplog, "stopped") == list(reversed(before))
        assert core.bus.state == BusState.NEW  # never started
        assert core.killswitch.halt is None and not core.fleet.everyone()
    finally:
        await store.db.close()


async def test_only_the_coordinator_runs_the_retention(fake_settings: Settings):
    """Deleting old events is single: the retention runs on the worker holding the coordinator
    role (always the one process on SQLite, once its first try took the role)."""
    def retention_runs() -> bool:
        return any(t.get_name() == "retention" and not t.done() for t in asyncio.all_tasks())

    store = await open_store(fake_settings.db_path)
    coordinator = Coordinator(None)
    try:
        core = Core(fake_settings, store, EventHub(), coordinator=coordinator)
        await core.services.start()
        try:
            await asyncio.sleep(0.1)
            assert not coordinator.held and not retention_runs()
            assert await coordinator.try_once()
            await wait_for(retention_runs, 10, "the retention started with the role")
            await coordinator.close()
            await wait_for(lambda: not retention_runs(), 10, "the retention stopped with it")
        finally:
            await core.services.stop()
    finally:
        await store.db.close()
