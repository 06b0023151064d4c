"""The scheduler end to end with the real claude CLI and the mock Anthropic API: a schedule made
from plain words with /cron add wakes a standing agent through the bus when its slot comes, and
the run is in /cron history with its cost and outcome."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import Switchboard
from tests.conftest import make_settings, run, wait_for
from tests.fakes.mock_anthropic import MockAnthropic

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]


@pytest.fixture
async def app(short_home: Path, mock_api: MockAnthropic) -> AsyncIterator[Switchboard]:
    (short_home / "t").mkdir(exist_ok=True)
    settings = make_settings(short_home, mock_api, schedule_tick_s=0.2, timezone="Europe/Berlin")
    async with Switchboard(settings) as sb:
        yield sb


async def test_plain_words_schedule_wakes_a_standing_agent_and_is_in_history(
        app: Switchboard) -> None:
    charter = "Goal: keep the nightly build green. Authority: read and report."
    reply = await run(app, f'/spawn keeper --charter "{charter}" TEXT: standing by')
    assert reply.ok, reply.plain()
    keeper = await app.pool.fleet.get("keeper")  # type: ignore[union-attr]
    assert keeper.charter is not None  # a standing agent
    await wait_for(lambda: keeper.state == "idle" and not keeper.busy, 90, "keeper idle")
    draft = await run(app, "/cron add in 2 sec keeper TEXT: nightly check done --notify always")
    assert draft.ok, draft.plain()
    assert re.fullmatch(r"Once, \w{3} \d+ \w{3} \d\d:\d\d Europe/Berlin, next .+",
                        draft.blocks[0].text)
    made = await run(app, "/cron confirm")
    assert made.ok, made.plain()
    sid = made.plain().split()[2].rstrip(":")
    assert app.store is not None

    async def ran() -> bool:
        rows = await app.store.schedules.history(sid, 5)  # type: ignore[union-attr]
        return bool(rows) and rows[0].status == "ran"

    await wait_for(ran, 90, "the scheduled run to end")
    [row] = await app.store.schedules.history(sid, 5)
    assert row.agent_id == keeper.id and row.cost_usd > 0 and row.manual == 0
    # It reached the agent as a bus message from the scheduler, as a turn of its own.
    [turn] = [t for t in await app.store.turns.recent(keeper.id, 10)
              if "nightly check done" in t.prompt]
    assert 'from="scheduler" type="task"' in turn.prompt
    history = (await run(app, f"/cron history {sid}")).plain()
    assert re.search(rf"· ran · \$0\.\d{{4}} · agent keeper \({keeper.id}\) · nightly check "
                     r"done", history), history
    listed = (await run(app, "/cron list")).plain()
    assert f"{sid} · Once, " in listed and "last: " in listed and "· done" in listed
