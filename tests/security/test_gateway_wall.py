"""Hostile agents against the model gateway (docs/gateway.md): the real CLI, every tool allowed,
the mock Messages API as the gateway's upstream and the operator's key a marked secret.

Before the gateway, the first probe found the key at once: it was in the agent's environment
(`env`, /proc/self/environ), so any agent could send it anywhere, and a /kill could not take it
back."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from supervisor.guard.gateway import TOKEN_PREFIX, ModelGateway
from tests.conftest import files_under, run, wait_for
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

KEY = "SBKEY-" + os.urandom(12).hex()  # the operator's key: greppable by its mark


@pytest.fixture
def keyed_settings(hostile_settings: Settings) -> Settings:
    return hostile_settings.with_(agent_env={**hostile_settings.agent_env,
                                             "ANTHROPIC_API_KEY": KEY})


@pytest.fixture
async def keyed_app(keyed_settings: Settings) -> AsyncIterator[Switchboard]:
    async with Switchboard(keyed_settings) as app:
        yield app


def gateway_of(app: Switchboard) -> ModelGateway:
    assert app.core is not None
    return app.core.gateway


def output(mock) -> str:
    return "\n".join(c.result for c in tool_calls(mock))


async def test_no_key_anywhere_the_agent_can_look_and_its_turn_completes(keyed_app, mock_api):
    app = keyed_app
    script = r"""
echo "== env"; env | sort
echo "== self environ"; tr '\0' '\n' < /proc/self/environ
echo "== every environ and cmdline"
for p in /proc/[0-9]*; do
    tr '\0' '\n' < $p/environ 2>/dev/null; tr '\0' ' ' < $p/cmdline 2>/dev/null; echo
done
echo "== grep mark"
timeout 100 grep -rIaoE 'SBKEY-[0-9a-f]{24}' "$HOME" "$PWD" "$CLAUDE_CONFIG_DIR" /tmp /etc /run \
    /var /dev/shm /root /home /opt /srv 2>/dev/null | head -20
echo "== grep everything else"
echo "SBKEY-$(printf '0%.0s' $(seq 24))" > "$PWD/control.txt"  # a control it must find
timeout 150 grep -rIlaE 'SBKEY-[0-9a-f]{24}' / --exclude-dir=proc --exclude-dir=sys \
    --exclude-dir=dev --exclude-dir=usr > /tmp/found 2>/dev/null
echo "grep rc=$?"; head -20 /tmp/found
echo "== done"
"""
    [spy] = await spawn_fleet(app, ["spy"], bash_script(script))
    out = output(mock_api)
    assert "== done" in out, out[-3000:]
    # The probes see what is there: the agent's own token and the gateway's address ...
    gw = gateway_of(app)
    env_part = out.split("== env", 1)[1].split("== self environ", 1)[0]
    assert f"ANTHROPIC_API_KEY={TOKEN_PREFIX}" in env_part
    assert f"ANTHROPIC_BASE_URL={gw.url}" in env_part
    assert f"ANTHROPIC_BASE_URL={mock_api.url}" not in out  # not even where the upstream is
    # ... and never the key, in any file it can read: grep ran to its end (not 124, timeout's)
    # and listed no file (its 2 is for the files the agent may not read).
    found = out.split("== grep everything else", 1)[1].split("== done", 1)[0]
    assert "grep rc=124" not in found and "grep rc=0" not in found, found
    assert found.strip().splitlines()[1:] == [f"{spy.cwd}/control.txt"], found
    assert KEY not in out, out
    # Every request reached the upstream with the key, added by the gateway; none with a token.
    assert mock_api.headers and all(h.get("x-api-key") == KEY for h in mock_api.headers)
    # The turn completed through the gateway: the model's answer to the tool result came back.
    turns = await app.store.turns.recent(spy.id)
    assert turns[0].status == "ok" and turns[0].result_text.startswith("TOOL RESULT:")
    counts = dict(gw.view().agents)[spy.id]
    assert counts.requests["ok"] == len(mock_api.headers) >= 2
    # Nothing the agent can read or write on the host holds it either.
    assert app.core is not None
    for top in (Path(spy.cwd), app.settings.agents_dir / spy.id):
        for f in files_under(top):
            try:
                assert KEY.encode() not in f.read_bytes(), f
            except FileNotFoundError:
                continue


async def _streaming(app: Switchboard, mock_api, name: str) -> tuple[str, str]:
    """An agent in the middle of a long streamed answer: (its id, its token)."""
    before = len(mock_api.requests)
    [agent] = await spawn_fleet(app, [name], "SLEEP 60: TEXT: too late", until=("working",))
    gw = gateway_of(app)
    await wait_for(lambda: len(mock_api.requests) > before
                   and dict(gw.view().agents).get(agent.id) is not None
                   and dict(gw.view().agents)[agent.id].streams == 1, 60, "the stream")
    proc = agent.process
    assert proc is not None
    return agent.id, proc.options.env["ANTHROPIC_API_KEY"]


async def _refused(gw: ModelGateway, token: str) -> int:
    async with aiohttp.ClientSession() as http, http.post(
            gw.url + "/v1/messages", json={"model": "m", "max_tokens": 1, "messages": []},
            headers={"x-api-key": token}) as r:
        return r.status


async def test_kill_ends_the_stream_within_a_second_and_the_token_dies(keyed_app, mock_api):
    app, gw = keyed_app, gateway_of(keyed_app)
    agent_id, token = await _streaming(app, mock_api, "streamer")
    started = time.monotonic()
    kill = asyncio.create_task(run(app, "/kill streamer"))
    await wait_for(lambda: dict(gw.view().agents)[agent_id].streams == 0, 10, "stream end")
    took = time.monotonic() - started
    assert (await kill).ok
    # The acceptance bound (issue 29): the stream is cut as the kill begins, before the CLI
    # has even had its SIGTERM's grace.
    assert took < 1.0, f"the stream outlived the kill by {took:.2f}s"
    assert dict(gw.view().agents)[agent_id].requests.get("revoked") == 1
    assert await _refused(gw, token) == 401
    assert "too late" not in output(mock_api)


async def test_the_kill_switch_ends_streams_and_revokes_every_token(keyed_app, mock_api):
    app, gw = keyed_app, gateway_of(keyed_app)
    _a, token_a = await _streaming(app, mock_api, "one")
    b, token_b = await _streaming(app, mock_api, "two")
    started = time.monotonic()
    halt = asyncio.create_task(run(app, "/killall confirm"))
    await wait_for(lambda: all(c.streams == 0 for _, c in gw.view().agents), 10, "streams end")
    took = time.monotonic() - started
    assert (await halt).ok
    assert took < 1.0, f"a stream outlived the kill switch by {took:.2f}s"
    assert await _refused(gw, token_a) == 401 and await _refused(gw, token_b) == 401
    assert (await run(app, "/killswitch off confirm")).ok
    assert await _refused(gw, token_b) == 401  # lifting the switch brings no token back


@pytest.fixture
async def budget_app(keyed_settings: Settings) -> AsyncIterator[Switchboard]:
    # Below the cost of one mock answer (10 tokens in, 12 out: about $0.0002).
    async with Switchboard(keyed_settings.with_(agent_budget_usd=0.0001)) as app:
        yield app


async def test_a_budget_below_a_turns_cost_stops_the_agent_at_its_next_request(budget_app,
                                                                              mock_api):
    app, gw = budget_app, gateway_of(budget_app)
    # A tool call: the CLI needs a second request for the turn, which the budget refuses.
    [agent] = await spawn_fleet(app, ["spender"], "BASH: echo spent",
                                until=("idle", "stopped", "failed"))
    counts = dict(gw.view().agents)[agent.id]
    assert counts.requests.get("ok") == 1 and counts.requests.get("refused_budget", 0) >= 1
    assert len(mock_api.requests) == 1  # the tool result never reached the model
    await wait_for(lambda: agent.state == "stopped", 30, "stopped for its budget")
    refused = await run(app, "/ask spender more")
    assert not refused.ok and "budget" in refused.plain()
