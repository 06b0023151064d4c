"""`switchboard run --headless` as a service runs it (no terminal, PORT set, secrets in the
environment): the listener answers, every output line is one JSON object, none holds a
secret, and SIGTERM ends it cleanly."""

from __future__ import annotations

import json
import signal
import urllib.request

import pytest

from tests.conftest import FAKE_CLAUDE, free_port
from tests.subproc import Supervisor

pytestmark = pytest.mark.timeout(120)
TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"
API_KEY = "sk-ant-api03-headless-test-key-0123456789"


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_headless_with_port_serves_probes_and_logs_json_lines_without_secrets(short_home):
    port, closed = free_port(), free_port()
    sup = Supervisor(short_home / "sb", console=False, env={
        "PORT": str(port), "SWITCHBOARD_CLAUDE_CLI": str(FAKE_CLAUDE),
        "ANTHROPIC_API_KEY": API_KEY, "TELEGRAM_BOT_TOKEN": TOKEN,
        "SWITCHBOARD_LOG_LEVEL": "DEBUG",  # httpx logs each Bot API URL, the token in it
        # A Bot API that refuses connections: Telegram is retried, and logged with its URL.
        "TELEGRAM_API_BASE_URL": f"http://127.0.0.1:{closed}"})
    try:
        sup.expect(f"health and metrics on http://127.0.0.1:{port}")
        sup.expect("retrying")
        status, body = fetch(f"http://127.0.0.1:{port}/readyz")
        assert status == 200, body
        assert json.loads(body)["frontends"]["telegram"]["state"] == "retrying"
        assert fetch(f"http://127.0.0.1:{port}/healthz")[0] == 200
        status, text = fetch(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and 'switchboard_frontend_ready{frontend="telegram"} 1.0' in text
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(30) == 0
        sup.rest()
    finally:
        sup.close()
    lines = [line for line in sup.seen if line]
    records = [json.loads(line) for line in lines]  # each line one whole object
    assert all(list(r)[:4] == ["ts", "level", "logger", "msg"] for r in records)
    assert any("cannot reach the Bot API" in r["msg"] for r in records)
    everything = "\n".join(lines)
    assert f"127.0.0.1:{closed}/bot***" in everything  # PTB logged the URL: masked
    assert TOKEN.split(":")[1] not in everything and API_KEY not in everything
