"""What /metrics and the logs rest on, without a running fleet: the turn tally equals the
tables and costs no scan per scrape, the open-escalation count uses its index, the listener's
settings, the event-loop lag, and JSON log lines (one object a line, no secret in any)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.cli import configure_logging, json_logs
from bot.kit import Links, LinkState
from bot.logs import STABLE, JsonFormatter
from bot.metrics import Metrics, Sample
from bot.web import LoopLag, readiness
from store import open_store
from supervisor.config import Settings
from supervisor.config_types import Secret
from supervisor.errors import ConfigError
from supervisor.redact import SECRETS
from tests.conftest import free_port

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"


@pytest.fixture
async def store(tmp_path, migrated_db):
    shutil.copyfile(migrated_db, tmp_path / "db")
    s = await open_store(tmp_path / "db")
    for agent_id in ("a1", "a2"):
        await s.agents.create(id=agent_id, name=agent_id, parent_id=None, model=None, cwd="/tmp",
                              prompt="p", permission_mode="default", state="idle")
    yield s
    await s.db.close()


async def grouped(store) -> tuple[dict[str, int], dict[tuple[str, str], float]]:
    """What a scan of the tables says, to hold the tally to."""
    rows = await store.db.fetchall("SELECT status, COUNT(*) AS n FROM turns"
                                   " WHERE status != 'running' GROUP BY status")
    costs = await store.db.fetchall("SELECT agent_id, model, SUM(cost_usd) AS c FROM costs"
                                    " GROUP BY agent_id, model")
    return ({r["status"]: r["n"] for r in rows},
            {(r["agent_id"], r["model"]): r["c"] for r in costs})


async def test_the_turn_tally_equals_the_tables_and_a_scrape_reads_none(store):
    t1 = await store.turns.start("a1", "x")
    await store.turns.finish(t1, status="ok", cost_usd=0.5,
                             model_costs={"sonnet": (0.4, 1, 1), "haiku": (0.1, 1, 1)})
    first = await store.turns.tally()  # loaded from the tables once
    assert dict(first.outcomes) == {"ok": 1}
    t2 = await store.turns.start("a2", "y")
    t3 = await store.turns.start("a1", "z")
    await store.turns.finish(t2, status="ok", cost_usd=0.2, model_costs={"sonnet": (0.2, 1, 1)})
    # A turn finished twice (ok, then failed as its notice could not be written) counts once.
    await store.turns.finish(t2, status="failed", error="boom")
    assert await store.turns.close_running(None, "restart") == 1  # t3
    await store.turns.finish(t3 + 99, status="ok")  # no such turn: nothing changes

    statements: list[str] = []
    for conn in (store.db._reader, store.db._writer):
        await conn.set_trace_callback(statements.append)
    tally = await store.turns.tally()
    assert statements == []  # from memory: a scrape costs no query
    outcomes, costs = await grouped(store)
    assert dict(tally.outcomes) == outcomes == {"ok": 1, "failed": 1, "interrupted": 1}
    assert {(a, m): c for a, m, c in tally.costs} == pytest.approx(costs)
    assert costs[("a1", "sonnet")] == pytest.approx(0.4)


async def test_open_escalations_are_counted_through_the_status_index(store):
    assert await store.escalations.open_summary() == (0, None)
    for esc_id, at in (("e1", 100.0), ("e2", 200.0)):
        await store.escalations.create(id=esc_id, agent_id="a1", kind="question", title="?",
                                       body="", now=at)
    assert await store.escalations.open_summary() == (2, 100.0)
    plan = await store.db.fetchall(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM escalations"
        " WHERE status='open'")
    assert "USING INDEX escalations_open" in " ".join(str(r["detail"]) for r in plan)


# -- settings -----------------------------------------------------------------------------------


def load(**env: str) -> Settings:
    return Settings.load({"HOME": "/nonexistent", "SWITCHBOARD_HOME": "/nonexistent/sb", **env})


def test_the_listener_is_off_unless_a_port_is_given_and_ours_wins_over_port():
    assert load().http_listen is None
    assert load(PORT="8080").http_listen == ("127.0.0.1", 8080)
    assert load(PORT="8080", SWITCHBOARD_HTTP_PORT="9090",
                SWITCHBOARD_HTTP_HOST="0.0.0.0").http_listen == ("0.0.0.0", 9090)
    # Webhook mode with no port of its own listens where the webhook settings say.
    hook = dict(TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_WEBHOOK_URL="https://x.invalid/hook",
                TELEGRAM_WEBHOOK_LISTEN="127.0.0.2", TELEGRAM_WEBHOOK_PORT="9443")
    assert load(**hook).http_listen == ("127.0.0.2", 9443)
    assert load(**hook, PORT="8080").http_listen == ("127.0.0.1", 8080)


@pytest.mark.parametrize("env,needle", [
    ({"PORT": "eighty"}, "environment: PORT / http_port must be a whole number, got 'eighty'"),
    ({"PORT": "0"}, "environment: PORT / http_port must be at least 1, got '0'"),
    ({"SWITCHBOARD_HTTP_PORT": "70000"},
     "environment: SWITCHBOARD_HTTP_PORT / http_port must be at most 65535, got '70000'"),
    ({"SWITCHBOARD_LOG_FORMAT": "xml"},
     "SWITCHBOARD_LOG_FORMAT / log_format must be one of auto, text, json, got 'xml'"),
])
def test_a_bad_listener_or_log_setting_is_refused_by_its_name(env, needle):
    with pytest.raises(ConfigError) as err:
        load(**env)
    assert needle in str(err.value)


# -- the event loop's lag -----------------------------------------------------------------------


async def test_loop_lag_shows_a_blocked_loop():
    lag = LoopLag(interval_s=0.02)
    task = asyncio.create_task(lag.run())
    try:
        await asyncio.sleep(0.05)
        assert lag.lag_s < 0.15
        time.sleep(0.2)  # noqa: ASYNC251 - blocking the loop is the point
        deadline = time.monotonic() + 5
        while lag.lag_s < 0.1 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert lag.lag_s >= 0.1
    finally:
        task.cancel()


# -- JSON log lines -----------------------------------------------------------------------------


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:], _ = saved[0], root.setLevel(saved[1])


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_format_auto_is_json_off_a_terminal(tmp_path, monkeypatch):
    s = Settings(home=tmp_path)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert json_logs(s) and json_logs(s.with_(log_format="json"))
    assert not json_logs(s.with_(log_format="text"))
    monkeypatch.setattr("sys.stderr", Tty())
    assert not json_logs(s) and json_logs(s.with_(log_format="json"))


def test_json_logs_are_one_object_a_line_with_stable_keys_and_no_secret(tmp_path, capsys,
                                                                        restore_logging):
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    settings = Settings(home=tmp_path / "home", telegram_token=Secret(TOKEN),
                        agent_env={"SERVICE_API_TOKEN": "agent-env-token-9"},
                        log_format="json")
    configure_logging(settings, to_stderr=True)
    log = logging.getLogger("supervisor.agents.runner")
    log.warning("agent failed agent=ab12cd name=fixer error=%s", f"GET /bot{TOKEN}/getMe\nnext")
    log.info("quoting \"%s\" and a key %s", "agent-env-token-9", pem)
    log.info("with extras", extra={"turn_id": 7, "header": "Authorization: Bearer abcdef123456"})
    try:
        raise RuntimeError(f"token {TOKEN} in a traceback")
    except RuntimeError:
        log.exception("crashed agent=ab12cd")
    for handler in logging.getLogger().handlers:
        handler.flush()
    for text in (capsys.readouterr().err, Path(settings.log_path).read_text()):
        lines = text.splitlines()
        assert len(lines) == 4, text
        records = [json.loads(line) for line in lines]  # every line one whole object
        for rec in records:
            assert list(rec)[:4] == list(STABLE) and rec["ts"].endswith("Z")
        assert TOKEN.split(":")[1] not in text and "agent-env-token-9" not in text
        assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in text and "abcdef123456" not in text
        failed, quoted, extras, crashed = records
        assert failed["level"] == "WARNING" and failed["logger"] == "supervisor.agents.runner"
        assert (failed["agent"], failed["name"]) == ("ab12cd", "fixer")
        assert failed["msg"].startswith("agent failed agent=ab12cd") and "\nnext" in failed["msg"]
        assert "/bot***/getMe" in failed["msg"]
        assert quoted["msg"].startswith('quoting "***" and a key -----BEGIN PRIVATE KEY-----***')
        assert extras["turn_id"] == 7 and extras["header"] == "Authorization: Bearer ***"
        assert crashed["agent"] == "ab12cd" and "RuntimeError: token ***" in crashed["exc"]
    # The JSON formatter is the handlers' redacting formatter, with the process's redactor.
    for handler in logging.getLogger().handlers:
        assert isinstance(handler.formatter, JsonFormatter) and handler.formatter.redact is SECRETS


def test_json_lines_survive_the_handler_redactor_on_any_secret_shape(tmp_path, restore_logging):
    """Regression: redacting the finished line ate the backslash of an escaped quote
    (`password=***\\"`) and broke the JSON; values are redacted before encoding instead."""
    settings = Settings(home=tmp_path / "home", log_format="json",
                        telegram_token=Secret('we"ird\\tok\\"en'))
    configure_logging(settings, to_stderr=False)
    nasty = ['we"ird\\tok\\"en', "password=hunter22\"", 'x-api-key: "sk-ant-abcdefgh"',
             "-----BEGIN RSA PRIVATE KEY-----\\\"abc", "/start CODE123\"", "token=abcdefghij\\"]
    for value in nasty:
        logging.getLogger("x").info("value %s end", value)
    for handler in logging.getLogger().handlers:
        handler.flush()
    lines = Path(settings.log_path).read_text().splitlines()
    assert len(lines) == len(nasty)
    for line in lines:
        assert json.loads(line)["msg"].endswith(" end"), line


# -- the API's counts, the plug-ins, readiness ---------------------------------------------------


@dataclass
class Running:
    """What the listener reads of a Switchboard (bot.web.Observed), over a real API."""

    api: object
    links: Links = field(default_factory=Links)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)


async def test_the_bus_and_the_scheduler_plug_their_counts_into_the_api(quiet_app):
    api = quiet_app.api
    stats = await api.stats()
    assert (stats.bus_depth, dict(stats.schedule_runs)) == (0, {"ok": 0, "failed": 0,
                                                                "skipped": 0})
    api.report_bus_depth(lambda: 3)
    api.report_schedule_runs(lambda: {"ok": 2, "late": 1})
    stats = await api.stats()
    assert stats.bus_depth == 3
    assert dict(stats.schedule_runs) == {"ok": 2, "failed": 0, "skipped": 0, "late": 1}
    text = Metrics().render(Sample(stats, (), 0.0)).decode()
    got = {(s.name, tuple(s.labels.values())): s.value
           for f in text_string_to_metric_families(text) for s in f.samples}
    assert got[("switchboard_bus_depth", ())] == 3
    assert got[("switchboard_schedule_runs_total", ("late",))] == 1
    assert got[("switchboard_agents", ("idle",))] == 0


async def test_readiness_needs_a_writable_store_and_each_front_end_connected_or_retrying(
        quiet_app):
    app = Running(quiet_app.api)
    assert await readiness(app) == {"ready": True, "not_ready": [], "store": "writable",
                                    "frontends": {}, "halted": False}
    link = app.links.link("telegram")
    assert (await readiness(app))["not_ready"] == ["telegram: starting"]
    link.set(LinkState.RETRYING, "cannot reach the Bot API")
    assert (await readiness(app))["ready"] is True
    link.set(LinkState.CONNECTED)
    app.stopping.set()
    assert (await readiness(app))["not_ready"] == ["shutting down"]
    app.stopping.clear()
    await quiet_app.store.db.close()
    report = await readiness(app)
    assert report["ready"] is False
    assert report["not_ready"] == ["store: the database takes no writes: opened read-only or "
                                   "closed"]
    assert str(quiet_app.settings.home) not in json.dumps(report)  # no path to strangers
    assert (await readiness(Running(None)))["not_ready"] == ["store: not open yet (starting)"]


async def test_a_scrape_while_the_store_is_closed_is_a_503_not_a_crash(quiet_app):
    from bot.web import Listener
    from supervisor.service import TaskGroup

    listener = Listener(Running(quiet_app.api), "127.0.0.1", free_port())
    group = TaskGroup()
    await listener.start(group)
    try:
        await quiet_app.store.db.close()
        async with aiohttp.ClientSession() as session:
            async with session.get(listener.url + "/metrics") as resp:
                assert resp.status == 503
                assert "state database" in await resp.text()
            async with session.get(listener.url + "/healthz") as resp:
                assert resp.status == 200  # alive all the same
    finally:
        await listener.stop()
        await group.cancel_all(1)
