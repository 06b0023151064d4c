"""The kill switch's file watcher reads time from the injected clock and has a run-once
mode: one poll of the trigger file halts with the clock's time stamped on the flag."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from store import open_store
from store.kv import get_sync
from supervisor.clock import FakeClock
from supervisor.config import Settings
from supervisor.killswitch import HALT_KEY, KillSwitch, write_local_trigger


@dataclass
class StubPool:
    settings: Settings
    escalations: Any
    store: Any = None
    agents: list[Any] = field(default_factory=list)

    def runners(self) -> list[Any]:
        return self.agents


def test_one_poll_of_the_trigger_file_halts_with_the_clocks_time(tmp_path):
    async def prepare():  # the kv table the halt flag lives in
        store = await open_store(Settings(home=tmp_path).db_path)
        await store.db.close()
        return store

    store = asyncio.run(prepare())
    clock = FakeClock(start=1_900_000_000.0)
    settings = Settings(home=tmp_path)
    switch = KillSwitch(settings, store, StubPool(settings, None), clock)
    assert switch.poll_local() is False
    write_local_trigger(settings, "ops", "drill", clock)
    assert json.loads(switch.local_file.read_text())["at"] == 1_900_000_000.0
    assert switch.poll_local() is True
    assert switch.halt is not None and switch.halt["at"] == 1_900_000_000.0
    assert get_sync(settings.db_path, HALT_KEY)["by"] == "ops"
    assert switch.poll_local() is False  # already halted
