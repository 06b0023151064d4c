"""Standing agents with the fake CLI (cheap): the charter survives a supervisor restart, a bad
--charter is refused with what to do instead, the session TTL leaves a standing agent alone
while an ordinary agent is stopped, and a killed agent cannot be woken."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from supervisor.errors import AgentNotRunning, LimitExceeded
from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(60)


async def test_a_charter_survives_a_restart_and_bad_ones_are_refused(fake_settings, tmp_path):
    async with Switchboard(fake_settings) as app:
        missing = await run(app, f"/spawn nope --charter @{tmp_path / 'none.md'} hello")
        assert not missing.ok and "cannot read" in missing.plain()
        empty = await run(app, '/spawn nope --charter "  " hello')
        assert not empty.ok and "the charter is empty" in empty.plain()
        assert await app.store.agents.find("nope") is None  # nothing was started
        reply = await run(app, '/spawn keeper --charter "Goal: keep it tidy." hello')
        assert reply.ok, reply.plain()
        agent = await app.pool.fleet.get("keeper")
        await wait_for(lambda: agent.state == "idle", 30, "the first turn")
    async with Switchboard(fake_settings) as app:
        agent = await app.pool.fleet.get("keeper")
        assert agent.standing and agent.charter == "Goal: keep it tidy."
        assert "Goal: keep it tidy." in (await run(app, "/status keeper")).plain()
        assert (await run(app, "/kill keeper")).ok
        with pytest.raises(AgentNotRunning):
            await app.api.standing.wake("keeper", "wake up")


async def test_the_ttl_stops_an_ordinary_agent_but_not_a_standing_one(fake_settings):
    settings = fake_settings.with_(session_ttl_s=0.5, ttl_warn_s=0.0, watchdog_interval_s=0.1,
                                   standing_idle_stop_s=0.0)  # 0: a standing CLI stays up
    async with Switchboard(settings) as app:
        assert (await run(app, '/spawn standing --charter "Goal: stay." hello')).ok
        assert (await run(app, "/spawn ordinary hello")).ok
        standing = await app.pool.fleet.get("standing")
        ordinary = await app.pool.fleet.get("ordinary")
        await wait_for(lambda: standing.state == "idle", 30, "the standing agent's first turn")

        def past_ttl() -> bool:  # and a few watchdog ticks past it for the standing agent
            started = standing.session_started_at
            return (ordinary.state == "stopped" and started is not None
                    and app.pool.clock.now() - started > 1.0)

        await wait_for(past_ttl, 30, "the TTL to stop the ordinary agent")
        assert standing.state == "idle" and standing.process is not None
        titles = [r.title for r in await app.store.escalations.undelivered("t")]
        assert "ordinary stopped: session TTL reached" in titles
        assert not any(t.startswith("standing") and "TTL" in t for t in titles), titles


async def test_a_bus_question_the_charter_decides_goes_back_not_to_the_operator(fake_app):
    charter = "Authority: fix flaky tests yourself; never skip a test."
    ask = ('MCP send_message {"to": "operator", "type": "question", '
           '"body": "Should I skip the flaky test or fix it?"}')
    assert (await run(fake_app, f'/spawn asker --charter "{charter}" {ask}')).ok
    agent = await fake_app.pool.fleet.get("asker")

    async def answered() -> bool:
        return any(m.type == "result" and "decide this within your charter" in m.body
                   for m in await fake_app.store.bus.recent(agent.id, 20))

    await wait_for(answered, 30, "the send-back to reach the agent on the bus")
    assert [r for r in await fake_app.pool.escalations.pending() if r.kind == "question"] == []


async def test_a_charter_that_would_hand_the_agent_a_secret_is_refused(fake_app, tmp_path):
    settings_file = fake_app.settings.home / "switchboard.toml"  # Switchboard's own file
    settings_file.write_text("# settings\n")
    own = await run(fake_app, f"/spawn leaky --charter @{settings_file} hello")
    assert not own.ok and "holds only the charter" in own.plain(), own.plain()
    key = tmp_path / "charter.md"
    key.write_text("Goal: deploy.\nUse the key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789")
    secret = await run(fake_app, f"/spawn leaky --charter @{key} hello")
    assert not secret.ok and "looks like a secret" in secret.plain(), secret.plain()
    assert await fake_app.store.agents.find("leaky") is None


async def test_a_standing_agent_cannot_skip_the_question(fake_app):
    for mode in ("bypassPermissions", "auto"):
        reply = await run(fake_app, f'/spawn wild --mode {mode} --charter "Goal: x." hello')
        assert not reply.ok and "cannot run in permission mode" in reply.plain(), reply.plain()
    assert (await run(fake_app, '/spawn calm --mode acceptEdits --charter "Goal: x." hello')).ok


async def test_a_wake_is_refused_like_an_ask_when_the_agent_may_not_run(fake_settings):
    """Regression: a wake went onto the bus directly, past the budget an /ask is held to."""
    async with Switchboard(fake_settings.with_(agent_budget_usd=0.0001)) as app:
        assert (await run(app, '/spawn spent --charter "Goal: x." hello')).ok
        agent = await app.pool.fleet.get("spent")  # a fake turn costs $0.001: over budget at once
        await wait_for(lambda: agent.state == "stopped", 30, "the budget to stop it")
        with pytest.raises(LimitExceeded, match="daily budget crossed"):
            await app.api.standing.wake("spent", "wake up", dedup_key="slot-9")
        assert not [m for m in await app.store.bus.recent(agent.id, 20) if m.body == "wake up"]
