"""A whole Switchboard on an injected clock (what bench/operator_attention.py runs its day on):
the clock given to the composition root is the pool's and the scheduler's, so a schedule made
from chat fires when that clock, not the wall clock, reaches its slot."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.app import Switchboard
from supervisor.clock import FakeClock
from tests.conftest import make_settings, run, wait_for

pytestmark = pytest.mark.timeout(60)

NINE = datetime(2026, 12, 7, 9, 0, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()


async def test_a_schedule_fires_on_the_injected_clock(short_home: Path) -> None:
    clock = FakeClock(start=NINE)
    settings = make_settings(short_home, fake=True, timezone="Europe/Berlin")
    async with Switchboard(settings, clock) as app:
        assert app.pool is not None and app.api is not None and app.store is not None
        assert app.pool.clock is clock and app.api.schedules.scheduler.clock is clock
        await app.api.schedules.stop()  # the test ticks it (its run-once mode)
        assert (await run(app, "/spawn keeper hello")).ok
        keeper = await app.pool.fleet.get("keeper")
        await wait_for(lambda: keeper.state == "idle" and not keeper.busy, 30, "keeper idle")
        draft = await run(app, "/cron add every 2 hours keeper look around")
        assert draft.blocks[0].text == "Every 2 hours, next Mon 7 Dec 10:00", draft.plain()
        made = await run(app, "/cron confirm")
        sid = made.plain().split()[2].rstrip(":")

        clock.advance(3599)  # 09:59:59 on the clock: not due, whatever the wall clock says
        await app.api.schedules.tick()
        assert await app.store.schedules.history(sid, 5) == []
        clock.advance(1)  # 10:00
        await app.api.schedules.tick()
        [row] = await app.store.schedules.history(sid, 5)
        assert (row.status, row.slot_at, row.agent_id) == ("running", NINE + 3600, keeper.id)

        async def ran() -> bool:
            await app.api.schedules.tick()  # type: ignore[union-attr]
            rows = await app.store.schedules.history(sid, 5)  # type: ignore[union-attr]
            return rows[0].status == "ran"

        await wait_for(ran, 30, "the run recorded")
        prompts = [t.prompt for t in await app.store.turns.recent(keeper.id, 5)]
        assert any('from="scheduler"' in p and "look around" in p for p in prompts)
