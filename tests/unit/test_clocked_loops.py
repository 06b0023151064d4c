"""The watchdog and the kill switch's file watcher read time from the injected clock and have
run-once modes: the watchdog's loop sleeps on the clock and ticks with its time; one poll of
the trigger file halts with the clock's time stamped on the flag."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from store import open_store
from store.kv import get_sync
from supervisor.agents.fleet import Fleet
from supervisor.clock import FakeClock
from supervisor.config import Settings
from supervisor.events import EventHub
from supervisor.guard.escalations import Escalations, Timeouts
from supervisor.guard.guardrails import MemoryReading
from supervisor.guard.killswitch import HALT_KEY, KillSwitch, write_local_trigger
from supervisor.guard.watchdog import Watchdog

BOUND_S = 10.0


class HighMemory:
    def read(self) -> MemoryReading:
        return MemoryReading(90, 100, "test")


def _no_escalations() -> Any:
    """These polls only set the halt flag: the loop's half (denying requests, the notice) is
    not reached, so no escalations are needed."""
    return None


async def memory_notices(store) -> list[float]:
    return [r.created_at for r in await store.escalations.undelivered("t")
            if r.title.startswith("Memory at")]


async def test_watchdog_ticks_on_the_clock_and_warns_about_memory_once_per_window(tmp_path):
    clock = FakeClock()
    store = await open_store(tmp_path / "db.sqlite")
    try:
        settings = Settings(home=tmp_path, watchdog_interval_s=5.0)
        esc = Escalations(store, EventHub(), Timeouts(), clock)
        dog = Watchdog(settings, Fleet(store), esc, store, HighMemory(), clock)
        t0 = clock.now()
        await dog.tick(t0)  # run once
        await dog.tick(t0 + 599)
        assert await memory_notices(store) == [t0]

        loop = asyncio.create_task(dog.run())
        try:
            await asyncio.wait_for(clock.wait_sleep_calls(1), BOUND_S)
            clock.advance(4.999)
            await asyncio.sleep(0)
            assert clock.sleep_calls == 1  # not yet
            clock.advance(601 - 4.999)  # one wake, ticking at the clock's time
            await asyncio.wait_for(clock.wait_sleep_calls(2), BOUND_S)
            assert await memory_notices(store) == [t0, t0 + 601]
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
        assert await dog.budget_for("a") is None  # no budget configured
    finally:
        await store.db.close()


def test_one_poll_of_the_trigger_file_halts_with_the_clocks_time(tmp_path):
    async def prepare():  # the kv table the halt flag lives in
        store = await open_store(Settings(home=tmp_path).db_path)
        await store.db.close()
        return store

    store = asyncio.run(prepare())
    clock = FakeClock(start=1_900_000_000.0)
    settings = Settings(home=tmp_path)
    switch = KillSwitch(settings, store, Fleet(store), _no_escalations(), clock)
    assert switch.poll_local() is False
    write_local_trigger(settings, "ops", "drill", clock)
    assert json.loads(switch.local_file.read_text())["at"] == 1_900_000_000.0
    assert switch.poll_local() is True
    assert switch.halt is not None and switch.halt["at"] == 1_900_000_000.0
    assert get_sync(settings.db_path, HALT_KEY)["by"] == "ops"
    assert switch.poll_local() is False  # already halted


def test_a_trigger_file_that_is_not_an_object_still_fires(tmp_path):
    """Regression: `[1]` (or any JSON that is not an object) in the trigger file raised in the
    watcher thread, which died silently: that file, and every later one, was ignored."""
    async def prepare():
        store = await open_store(Settings(home=tmp_path).db_path)
        await store.db.close()
        return store

    store = asyncio.run(prepare())
    settings = Settings(home=tmp_path)
    for content in ("[1]", '"stop"', "null", "{" * 5, "[" * 100_000):
        switch = KillSwitch(settings, store, Fleet(store), _no_escalations(), FakeClock())
        switch.local_file.write_text(content)
        assert switch.poll_local() is True, content
        assert switch.halt is not None and switch.halt["by"] == "local file"


def test_the_watcher_logs_a_failing_poll_and_keeps_watching(tmp_path, caplog):
    """Regression: any exception in a watcher thread ended it without a word."""
    settings = Settings(home=tmp_path)
    switch = KillSwitch(settings, None, Fleet(None), _no_escalations(),  # type: ignore[arg-type]
                        FakeClock())
    calls: list[int] = []

    def poll() -> None:
        calls.append(1)
        if len(calls) <= 3:
            raise OSError("the disk went away")
        if len(calls) == 5:
            switch.close()  # stop after two good polls

    with caplog.at_level("WARNING", logger="supervisor.guard.killswitch"):
        switch.watch_loop(poll, "killswitch-file", 0.001)
    assert len(calls) == 5
    failed = [r for r in caplog.records if "watcher failed" in r.getMessage()]
    assert len(failed) == 1 and "the disk went away" in (failed[0].exc_text or "")
    assert any("works again" in r.getMessage() for r in caplog.records)
