"""The HTTP listener against a running Switchboard (the fake claude CLI, the fake Bot API):
/healthz, /readyz and /metrics answer, the metrics parse and show what the fleet did, readiness
follows the front ends, and Telegram's webhook shares the port."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.app import Switchboard
from bot.kit import LinkState
from bot.telegram.front import run_telegram
from supervisor.config_types import Secret
from tests.conftest import free_port, run, wait_for
from tests.fakes.fake_telegram import FakeTelegram

pytestmark = pytest.mark.timeout(90)
ADMIN = 100


async def get(app: Switchboard, path: str) -> tuple[int, str]:
    assert app.listener is not None
    async with aiohttp.ClientSession() as session:
        async with session.get(app.listener.url + path) as resp:
            return resp.status, await resp.text()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, parsed by prometheus_client's own parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        fake.add_chat(ADMIN, first_name="alice", username="alice")
        yield fake


async def test_health_readiness_and_metrics_of_a_running_fleet(fake_settings):
    settings = fake_settings.with_(http_port=free_port())
    async with Switchboard(settings) as app:
        assert (await run(app, "/spawn worker hello")).ok
        runner = await app.pool.fleet.get("worker")
        await wait_for(lambda: runner.state == "idle", 30, "the first turn to finish")

        status, body = await get(app, "/healthz")
        assert status == 200 and json.loads(body)["alive"] is True
        status, body = await get(app, "/readyz")
        assert status == 200, body
        ready = json.loads(body)
        assert ready == {"ready": True, "not_ready": [], "store": "writable", "frontends": {},
                         "halted": False}

        status, text = await get(app, "/metrics")
        assert status == 200
        got = samples(text)
        assert got[("switchboard_agents", (("state", "idle"),))] == 1
        assert got[("switchboard_agents", (("state", "killed"),))] == 0
        assert got[("switchboard_turns_total", (("outcome", "ok"),))] == 1
        assert got[("switchboard_turns_total", (("outcome", "failed"),))] == 0
        cost = got[("switchboard_cost_usd_total", (("agent", "worker"), ("agent_id", runner.id),
                                                    ("model", settings.default_model)))]
        assert cost == pytest.approx(0.001)
        assert got[("switchboard_kill_switch_engaged", ())] == 0
        assert got[("switchboard_bus_depth", ())] == 0
        assert got[("switchboard_schedule_runs_total", (("outcome", "ok"),))] == 0
        assert ("switchboard_event_loop_lag_seconds", ()) in got

        # Halted is still ready (the switch is turned off through a front end); /metrics says so.
        assert (await run(app, "/killall confirm")).ok
        status, body = await get(app, "/readyz")
        assert status == 200 and json.loads(body)["halted"] is True
        got = samples((await get(app, "/metrics"))[1])
        assert got[("switchboard_kill_switch_engaged", ())] == 1
        assert got[("switchboard_agents", (("state", "killed"),))] == 1

    # Stopped: nothing listens any more.
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(app, "/healthz")


async def test_readyz_names_a_front_end_that_is_down_and_one_retrying_is_ready(fake_settings,
                                                                              fake_tg):
    base = fake_settings.with_(http_port=free_port(), telegram_api_base_url=fake_tg.url,
                               telegram_admin_ids=(str(ADMIN),))
    # A token Telegram refuses: Switchboard runs without Telegram, and is not ready.
    async with Switchboard(base.with_(telegram_token=Secret("1:refused"))) as app:
        status, body = await get(app, "/readyz")  # configured, not started yet
        assert status == 503 and json.loads(body)["frontends"]["telegram"]["state"] == "starting"
        await asyncio.wait_for(run_telegram(app.telegram_context()), 30)
        status, body = await get(app, "/readyz")
        report = json.loads(body)
        assert status == 503 and report["ready"] is False
        assert report["not_ready"] == ["telegram: down (the bot token was refused)"]
        got = samples((await get(app, "/metrics"))[1])
        assert got[("switchboard_frontend_ready", (("frontend", "telegram"),))] == 0

    # The Bot API unreachable: retrying is ready (a restart would not bring Telegram back).
    fake_tg.outage(502)
    async with Switchboard(base.with_(telegram_token=Secret(fake_tg.token))) as app:
        task = asyncio.create_task(run_telegram(app.telegram_context(), retry_max_s=0.5))
        link = app.links.link("telegram")
        await wait_for(lambda: link.state == LinkState.RETRYING, 30, "retrying")
        status, body = await get(app, "/readyz")
        assert status == 200, body
        assert json.loads(body)["frontends"]["telegram"]["state"] == "retrying"

        # Back: connected, and the outbox's calls are counted (a 429 among them).
        fake_tg.outage(None)
        await wait_for(lambda: link.state == LinkState.CONNECTED, 30, "connected")
        fake_tg.flood(ADMIN, times=1, retry_after=1)
        fake_tg.user_sends(ADMIN, "/agents")
        await wait_for(lambda: link.stats.delivered >= 1, 30, "the reply")
        got = samples((await get(app, "/metrics"))[1])
        labels = (("frontend", "telegram"),)
        assert got[("switchboard_frontend_connected", labels)] == 1
        assert got[("switchboard_chat_rate_limited_total", labels)] == 1
        assert got[("switchboard_chat_ack_seconds", labels)] > 0
        assert got[("switchboard_chat_outbox_depth", labels)] == 0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_telegram_webhook_shares_the_listener_and_checks_the_secret(fake_settings, fake_tg):
    settings = fake_settings.with_(
        http_port=free_port(), telegram_token=Secret(fake_tg.token),
        telegram_api_base_url=fake_tg.url, telegram_admin_ids=(str(ADMIN),),
        telegram_webhook_url="https://switchboard.example.invalid/tg-hook",
        telegram_webhook_secret=Secret("s3cret-token"))
    update = {"update_id": 1, "message": {
        "message_id": 1, "date": 0, "text": "/agents",
        "entities": [{"type": "bot_command", "offset": 0, "length": 7}],
        "chat": {"id": ADMIN, "type": "private", "first_name": "alice"},
        "from": {"id": ADMIN, "is_bot": False, "first_name": "alice", "username": "alice"}}}
    async with Switchboard(settings) as app:
        task = asyncio.create_task(run_telegram(app.telegram_context()))
        link = app.links.link("telegram")
        await wait_for(lambda: link.state == LinkState.CONNECTED, 30, "connected")
        assert fake_tg.calls("setWebhook")[-1]["params"]["secret_token"] == "s3cret-token"
        assert app.listener is not None
        async with aiohttp.ClientSession() as session:
            async def post(path: str, secret: str | None) -> int:
                headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret else {}
                async with session.post(app.listener.url + path, json=update,
                                        headers=headers) as resp:
                    return resp.status

            assert await post("/tg-hook", "forged") == 403
            assert await post("/tg-hook", None) == 403
            assert await post("/elsewhere", "s3cret-token") == 404
            assert await post("/tg-hook", "s3cret-token") == 200
        await wait_for(lambda: any("No agents" in (m.get("text") or "")
                                   for m in fake_tg.sent(ADMIN)), 30, "the reply")
        assert [m.get("text") for m in fake_tg.sent(ADMIN)].count(None) == 0
        assert (await get(app, "/healthz"))[0] == 200  # the same port
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
