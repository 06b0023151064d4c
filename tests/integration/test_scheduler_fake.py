"""The scheduler over the real pool with the fake claude CLI: a test run that spawns a fresh
agent (recorded with cost and outcome, the agent stopped afterwards, no "finished" notice for a
run that went well), and an agent's schedule_wakeup called through its in-process MCP server
that wakes it when due."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import Switchboard
from tests.conftest import make_settings, run, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def app(short_home: Path) -> AsyncIterator[Switchboard]:
    async with Switchboard(make_settings(short_home, fake=True, schedule_tick_s=0.2)) as sb:
        yield sb


async def _ended(app: Switchboard, sid: str) -> bool:
    assert app.store is not None
    rows = await app.store.schedules.history(sid, 5)
    return bool(rows) and rows[0].status not in ("running",)


async def test_a_spawn_run_is_recorded_and_its_agent_stopped_quietly(app: Switchboard) -> None:
    assert (await run(app, "/cron add every day at 3am new:probe hello there")).ok
    made = await run(app, "/cron confirm run")
    assert made.ok and "A test run has started." in made.plain(), made.plain()
    sid = made.plain().split()[2].rstrip(":")
    await wait_for(lambda: _ended(app, sid), 60, "the test run to end")
    assert app.store is not None and app.pool is not None
    [row] = await app.store.schedules.history(sid, 5)
    assert (row.status, row.manual, row.cost_usd) == ("ran", 1, pytest.approx(0.001))
    assert row.outcome.startswith("ECHO: hello there")
    agent = await app.pool.fleet.get(row.agent_id or "")
    assert agent.name == f"probe-{row.id}"
    await wait_for(lambda: agent.state == "stopped", 30, "the run's agent stopped")
    titles = [e.title for e in await app.store.escalations.undelivered("nobody")]
    assert f"probe-{row.id} finished" not in titles  # the schedule's policy: quiet when fine


async def test_schedule_wakeup_through_the_mcp_server_wakes_the_agent(app: Switchboard) -> None:
    call = json.dumps({"when": "in 2 sec", "prompt": "woken up"})
    assert (await run(app, f"/spawn sleeper MCP schedule_wakeup {call}")).ok
    assert app.pool is not None and app.store is not None
    sleeper = await app.pool.fleet.get("sleeper")

    async def scheduled() -> list:
        return [v for v in await app.api.schedules.list()  # type: ignore[union-attr]
                if v.owner_agent == "sleeper"]

    await wait_for(scheduled, 30, "the wakeup made")
    [view] = await scheduled()
    await wait_for(lambda: _ended(app, view.id), 60, "the wakeup to run")
    [row] = await app.store.schedules.history(view.id, 5)
    assert (row.status, row.agent_id) == ("ran", sleeper.id)
    prompts = [t.prompt for t in await app.store.turns.recent(sleeper.id, 5)]
    assert any("woken up" in p and 'from="scheduler"' in p for p in prompts)
    first = [t for t in await app.store.turns.recent(sleeper.id, 5)
             if t.prompt.startswith("MCP schedule_wakeup")]
    assert first and "MCP RESULT: Scheduled " in (first[0].result_text or "")


async def test_kill_switch_skips_a_slot_and_release_catches_it_up_once(app: Switchboard) -> None:
    assert (await run(app, "/killall confirm")).ok
    assert (await run(app, "/cron add in 1 sec new:late hello --catch-up")).ok
    made = await run(app, "/cron confirm")
    sid = made.plain().split()[2].rstrip(":")
    assert app.store is not None

    async def statuses() -> list[tuple[str, str, int]]:
        rows = await app.store.schedules.history(sid, 5)  # type: ignore[union-attr]
        return [(r.status, r.reason, r.catch_up) for r in rows]

    await wait_for(lambda: _has(statuses, ("skipped", "halted", 0)), 30, "the slot skipped")
    assert (await run(app, "/killswitch off confirm")).ok
    await wait_for(lambda: _has(statuses, ("ran", "after the kill switch", 1)), 60,
                   "the one catch-up run")
    assert len(await statuses()) == 1  # the skipped slot became its catch-up: no second row


async def _has(statuses, wanted) -> bool:
    return wanted in await statuses()


async def test_a_woken_agent_sends_no_finished_notice_for_a_run_that_went_well(
        app: Switchboard) -> None:
    assert (await run(app, "/spawn keeper hello")).ok
    assert app.pool is not None and app.store is not None
    keeper = await app.pool.fleet.get("keeper")
    await wait_for(lambda: keeper.state == "idle" and not keeper.busy, 30, "keeper idle")

    async def finished_notices() -> int:
        rows = await app.store.escalations.undelivered("nobody")  # type: ignore[union-attr]
        return sum(1 for e in rows if e.title == "keeper finished")

    assert await finished_notices() == 1  # its own first turn: news as always
    assert (await run(app, "/cron add in 1 sec keeper all fine?")).ok
    sid = (await run(app, "/cron confirm")).plain().split()[2].rstrip(":")
    await wait_for(lambda: _ended(app, sid), 60, "the scheduled run to end")
    [row] = await app.store.schedules.history(sid, 5)
    assert (row.status, row.outcome) == ("ran", "BUS: 1 message(s)")  # the fake CLI's answer
    assert await finished_notices() == 1  # the scheduled turn went well: no notice


async def test_a_timeout_never_interrupts_other_work_of_a_busy_agent(app: Switchboard) -> None:
    assert (await run(app, "/spawn busy SLEEP 30")).ok
    assert app.pool is not None and app.store is not None
    busy = await app.pool.fleet.get("busy")
    await wait_for(lambda: busy.busy, 30, "busy at work")
    assert (await run(app, "/cron add in 1 sec busy hi --timeout 0.02")).ok  # 1.2 s
    sid = (await run(app, "/cron confirm")).plain().split()[2].rstrip(":")
    await wait_for(lambda: _ended(app, sid), 30, "the run to time out")
    [row] = await app.store.schedules.history(sid, 5)
    assert (row.status, row.outcome) == ("timed_out", "no result within 0.02 min")
    [work] = await app.store.turns.recent(busy.id, 5)
    assert work.prompt == "SLEEP 30" and work.status == "running" and busy.busy
