"""Every guardrail, with the fake claude CLI: fleet size, the 21st child, depth 4, a budget
crossed mid-turn, memory admission (fake cgroup files), TTL expiry, a stalled turn, a crash
loop, and rate limits."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def app_with(fake_settings):
    """An app factory: `async with app_with(max_agents=3) as app: ...`."""

    def make(**changes):
        return Switchboard(fake_settings.with_(**changes))

    return make


async def spawn_ok(app, line):
    reply = await run(app, line)
    assert reply.ok, reply.plain()
    return reply


async def notices(app):
    return [r for r in await app.store.escalations.undelivered("test-view", 1000)]


async def test_twenty_first_child_is_refused(app_with):
    async with app_with() as app:
        await spawn_ok(app, "/spawn boss plan")
        for i in range(20):
            await spawn_ok(app, f"/spawn kid{i} --parent boss work")
        reply = await run(app, "/spawn kid20 --parent boss work")
        assert not reply.ok
        assert "20 live children" in reply.plain() and "limit is 20" in reply.plain()
        assert len(app.pool.fleet.live()) == 21


async def test_depth_four_is_refused(app_with):
    async with app_with() as app:
        await spawn_ok(app, "/spawn l1 go")
        await spawn_ok(app, "/spawn l2 --parent l1 go")
        await spawn_ok(app, "/spawn l3 --parent l2 go")
        reply = await run(app, "/spawn l4 --parent l3 go")
        assert not reply.ok and "depth 4" in reply.plain() and "limit is 3" in reply.plain()


async def test_max_agents(app_with):
    async with app_with(max_agents=2) as app:
        await spawn_ok(app, "/spawn a1 go")
        await spawn_ok(app, "/spawn a2 go")
        reply = await run(app, "/spawn a3 go")
        assert not reply.ok and "limit is 2" in reply.plain()
        await spawn_ok(app, "/kill a1")
        await spawn_ok(app, "/spawn a3 go")


async def test_budget_crossed_mid_turn_stops_after_the_turn_and_asks(app_with):
    # The fake CLI costs $0.001 a turn: the second turn crosses a $0.0015 budget.
    async with app_with(agent_budget_usd=0.0015) as app:
        await spawn_ok(app, "/spawn spender first")
        r = await app.pool.fleet.get("spender")
        await wait_for(lambda: r.state == "idle", 30)
        await spawn_ok(app, "/ask spender second")
        await wait_for(lambda: r.state == "stopped", 30, "stopped after the turn")
        turns = await app.store.turns.recent(r.id)
        assert turns[0].status == "ok" and turns[0].result_text == "ECHO: second"  # it finished
        assert "daily budget crossed" in [t for t in await app.store.agents.transitions(r.id)][
            -1].reason
        row = None

        async def budget_question():
            nonlocal row
            rows = [x for x in await app.pool.escalations.pending() if "budget" in x.title]
            row = rows[0] if rows else None
            return row

        await wait_for(budget_question, 10, "the budget escalation")
        assert row.options == ("Raise by $5", "Raise by $20", "Stop")
        refused = await run(app, "/ask spender third")
        assert not refused.ok and "budget" in refused.plain()
        await spawn_ok(app, f"/answer {row.id} 1")
        await wait_for(lambda: r.budget_blocked is None, 10)
        await spawn_ok(app, "/ask spender third")
        await wait_for(lambda: r.state == "idle", 30)


async def test_memory_admission_reads_cgroup_files(app_with, tmp_path):
    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "memory.max").write_text("1000000000\n")
    (cg / "memory.current").write_text("900000000\n")
    async with app_with(cgroup_dir=cg, watchdog_interval_s=0.1) as app:
        reply = await run(app, "/spawn hungry go")
        assert not reply.ok
        assert "90%" in reply.plain() and "85%" in reply.plain() and "cgroup" in reply.plain()
        (cg / "memory.current").write_text("800000000\n")
        await spawn_ok(app, "/spawn fits go")

        async def warned():
            return any(n.title.startswith("Memory at 80%") for n in await notices(app))

        await wait_for(warned, 10, "the 75% warning")


async def test_session_ttl_warns_then_stops(app_with):
    """Deterministic: the watchdog's run-once tick is driven at chosen instants of the
    session (its own loop sleeps for an hour), so neither a slow start nor a slow tick can skip
    the warning or race the stop notice (it used to poll wall time on a 1.5 s TTL)."""
    async with app_with(session_ttl_s=100.0, ttl_warn_s=30.0, watchdog_interval_s=3600.0) as app:
        await spawn_ok(app, "/spawn mayfly go")
        r = await app.pool.fleet.get("mayfly")
        await wait_for(lambda: r.state == "idle" and r.session_started_at, 20, "mayfly idle")
        start = r.session_started_at

        async def titles():
            return [n.title for n in await notices(app)]

        await app.pool.watchdog.tick(start + 69.0)
        assert not any("session TTL" in t for t in await titles())
        await app.pool.watchdog.tick(start + 70.0)
        got = await titles()
        assert any("mayfly reaches its session TTL in 0.5 min" in t for t in got), got
        assert r.state == "idle"
        await app.pool.watchdog.tick(start + 80.0)  # warned once only
        assert sum("reaches its session TTL" in t for t in await titles()) == 1
        await app.pool.watchdog.tick(start + 100.0)
        assert r.state == "stopped"
        assert "mayfly stopped: session TTL reached" in await titles()


async def test_stalled_agent_is_flagged_and_recovers(app_with):
    async with app_with(stall_s=0.5, watchdog_interval_s=0.1) as app:
        await spawn_ok(app, "/spawn sleepy SLEEP 2")
        r = await app.pool.fleet.get("sleepy")
        await wait_for(lambda: r.state == "stalled", 20, "stalled")

        async def told():
            return any("is stalled" in n.title for n in await notices(app))

        await wait_for(told, 10, "the stall notice")
        await wait_for(lambda: r.state == "idle", 20, "finished after the stall")
        states = [t.to_state for t in await app.store.agents.transitions(r.id)]
        assert "stalled" in states and states[-1] == "idle"


async def test_crash_loop_is_not_restarted(app_with):
    async with app_with(crash_loop_max=2) as app:
        await spawn_ok(app, "/spawn flaky CRASH")
        r = await app.pool.fleet.get("flaky")
        await wait_for(lambda: r.state == "failed", 20)
        await spawn_ok(app, "/ask flaky CRASH")

        async def failed_twice() -> bool:
            # Not `r.state == "failed"`: that holds already before the second turn starts.
            failures = [t for t in await app.store.agents.transitions(r.id)
                        if t.to_state == "failed"]
            return len(failures) == 2 and r.process is None

        await wait_for(failed_twice, 20, "the second crash")
        starts_before = len([t for t in await app.store.agents.transitions(r.id)
                             if t.to_state == "starting"])
        reply = await run(app, "/ask flaky hello")
        assert not reply.ok and "crashed 2 times" in reply.plain(), reply.plain()
        starts_after = len([t for t in await app.store.agents.transitions(r.id)
                            if t.to_state == "starting"])
        assert starts_after == starts_before == 2
        assert any("crash loop" in n.title for n in await notices(app))


async def test_command_rate_limit_per_operator(app_with):
    async with app_with(commands_per_minute=5) as app:
        for _ in range(5):
            assert (await run(app, "/agents")).ok
        reply = await run(app, "/agents")
        assert not reply.ok and "at most 5 commands per minute" in reply.plain()
        assert (await run(app, "/killall")).ok  # never rate limited


async def test_message_rate_limit_per_agent(app_with):
    async with app_with(messages_per_minute=2) as app:
        await spawn_ok(app, "/spawn chatty hi")
        assert (await run(app, "/ask chatty one")).ok
        assert (await run(app, "/ask chatty two")).ok
        reply = await run(app, "/ask chatty three")
        assert not reply.ok and "messages to chatty" in reply.plain()
