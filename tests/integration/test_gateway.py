"""The model gateway on its own, in front of the mock Messages API: it swaps an agent's token for
the real key, streams the answer through unchanged, reads the usage out of it, and refuses what
it must (no token, a revoked one, the kill switch, the rate, the budget, an upstream that is
down) with an Anthropic-style error naming why."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDict

from supervisor.config import Settings
from supervisor.guard.gateway import ModelGateway, upstream_of
from supervisor.guard.gateway_usage import StreamUsage, price_of, usage_of_body
from tests.conftest import MODEL, free_port, make_settings
from tests.fakes.mock_anthropic import INPUT_TOKENS, OUTPUT_TOKENS, MockAnthropic

REAL_KEY = "sk-ant-real-key-of-the-operator"


def body(directive: str, *, stream: bool = True) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 100, "stream": stream,
            "messages": [{"role": "user", "content": [{"type": "text", "text": directive}]}]}


def settings_for(tmp_path: Path, mock: MockAnthropic, **kw: Any) -> Settings:
    s = make_settings(tmp_path, mock, **kw)
    return s.with_(agent_env={**s.agent_env, "ANTHROPIC_API_KEY": REAL_KEY})


class World:
    def __init__(self, gateway: ModelGateway, http: aiohttp.ClientSession) -> None:
        self.gateway = gateway
        self.http = http
        self.halted = False
        self.budget: tuple[float, float] | None = None

    async def post(self, token: str | None, payload: dict[str, Any], *,
                   header: str = "x-api-key") -> tuple[int, bytes, CIMultiDict[str]]:
        headers = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
        if token is not None:
            headers[header] = token if header == "x-api-key" else f"Bearer {token}"
        async with self.http.post(self.gateway.url + "/v1/messages?beta=true",
                                  data=json.dumps(payload), headers=headers) as r:
            return r.status, await r.read(), CIMultiDict(r.headers)


@pytest.fixture
async def world(tmp_path: Path, mock_api: MockAnthropic) -> AsyncIterator[World]:
    w: World

    async def budget(_agent_id: str) -> tuple[float, float] | None:
        return w.budget

    gateway = ModelGateway(settings_for(tmp_path, mock_api, gateway_requests_per_minute=5),
                           halted=lambda: w.halted, budget=budget)
    await gateway.start()
    async with aiohttp.ClientSession() as http:
        w = World(gateway, http)
        yield w
    await gateway.close()


def token_of(env: dict[str, str]) -> str:
    assert set(env) == {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}, env
    return env["ANTHROPIC_API_KEY"]


def error_of(data: bytes) -> dict[str, Any]:
    parsed = json.loads(data)
    assert parsed["type"] == "error", parsed
    return parsed["error"]  # type: ignore[no-any-return]


def events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in data.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_the_upstream_gets_the_key_and_the_agent_gets_the_stream(world, mock_api):
    env = world.gateway.issue("a1", "alice")
    token = token_of(env)
    assert REAL_KEY not in json.dumps(env) and token.startswith("sbg-")
    assert env["ANTHROPIC_BASE_URL"] == world.gateway.url != mock_api.url
    status, through, headers = await world.post(token, body("TEXT: hello"))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    sent = mock_api.headers[-1]
    assert sent["x-api-key"] == REAL_KEY and "authorization" not in sent
    assert token not in json.dumps(sent)
    # The same answer as the mock gives directly, event for event (ids aside).
    async with world.http.post(mock_api.url + "/v1/messages", json=body("TEXT: hello"),
                               headers={"x-api-key": REAL_KEY}) as r:
        direct = await r.read()
    def shape(data: bytes) -> list[tuple[str, str]]:
        return [(e, json.dumps({k: v for k, v in d.items() if k != "message"}))
                for e, d in events(data)]
    assert shape(through) == shape(direct)
    assert ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "text_delta", "text": "hello"}}) \
        in events(through)
    # The usage was read out of the stream and priced.
    counts = dict(world.gateway.view().agents)["a1"]
    assert (counts.input_tokens, counts.output_tokens) == (INPUT_TOKENS, OUTPUT_TOKENS)
    inp, out = price_of(MODEL)
    assert counts.cost_usd == pytest.approx((INPUT_TOKENS * inp + OUTPUT_TOKENS * out) / 1e6)
    assert counts.requests == {"ok": 1} and counts.streams == 0


async def test_a_json_answer_is_forwarded_and_counted(world, mock_api):
    token = token_of(world.gateway.issue("a1", "alice"))
    status, data, _ = await world.post(token, body("TEXT: plain", stream=False))
    assert status == 200 and json.loads(data)["content"][0]["text"] == "plain"
    assert dict(world.gateway.view().agents)["a1"].output_tokens == OUTPUT_TOKENS


async def test_no_token_a_wrong_one_or_the_real_key_is_refused(world, mock_api):
    token_of(world.gateway.issue("a1", "alice"))
    for token in (None, "sbg-made-up", REAL_KEY, ""):
        status, data, _ = await world.post(token, body("TEXT: x"))
        assert status == 401, (token, data)
        assert error_of(data)["type"] == "authentication_error"
        assert "not (or no longer) valid" in error_of(data)["message"]
    assert mock_api.requests == []  # nothing reached the upstream
    assert world.gateway.view().refused_unknown == 4


async def test_an_auth_token_goes_as_a_bearer(tmp_path, mock_api):
    s = make_settings(tmp_path, mock_api)
    env = {k: v for k, v in s.agent_env.items() if k != "ANTHROPIC_API_KEY"}
    s = s.with_(agent_env={**env, "ANTHROPIC_AUTH_TOKEN": "real-bearer"})
    up = upstream_of(s)
    assert up is not None and up.var == "ANTHROPIC_AUTH_TOKEN"
    gateway = ModelGateway(s, halted=lambda: False)
    await gateway.start()
    try:
        token = gateway.issue("a1", "alice")["ANTHROPIC_AUTH_TOKEN"]
        async with aiohttp.ClientSession() as http:
            w = World(gateway, http)
            status, _, _ = await w.post(token, body("TEXT: hi"), header="authorization")
        assert status == 200
        assert mock_api.headers[-1]["authorization"] == "Bearer real-bearer"
        assert "x-api-key" not in mock_api.headers[-1]
    finally:
        await gateway.close()


def test_without_a_key_or_switched_off_there_is_no_gateway(tmp_path, mock_api):
    s = make_settings(tmp_path, mock_api)
    assert upstream_of(s.with_(model_gateway=False)) is None
    login = s.with_(agent_env={k: v for k, v in s.agent_env.items()
                               if k != "ANTHROPIC_API_KEY"})
    assert upstream_of(login) is None
    view = ModelGateway(login, halted=lambda: False).view()
    assert not view.active and "CLI's own login" in view.detail


async def test_a_revoked_token_ends_its_stream_and_is_refused_after(world, mock_api):
    token = token_of(world.gateway.issue("a1", "alice"))
    headers = {"x-api-key": token, "content-type": "application/json"}
    async with world.http.post(world.gateway.url + "/v1/messages",
                               data=json.dumps(body("SLEEP 30: TEXT: late")),
                               headers=headers) as r:
        first = await r.content.readuntil(b"\n\n")  # the stream has begun
        assert b"message_start" in first
        assert world.gateway.revoke("a1") == 1
        # Bounded by the test's timeout, not by a clock: the mock would go on for 30 s.
        rest = await asyncio.wait_for(r.content.read(), 10)
    errors = [d for e, d in events(rest) if e == "error"]
    assert errors and "revoked" in errors[0]["error"]["message"], rest
    assert b"late" not in rest
    status, data, _ = await world.post(token, body("TEXT: again"))
    assert status == 401 and len(mock_api.requests) == 1
    counts = dict(world.gateway.view().agents)["a1"]
    assert counts.requests.get("revoked") == 1 and counts.streams == 0


async def test_a_new_token_revokes_the_old_and_an_old_revoker_spares_the_new(world):
    old = token_of(world.gateway.issue("a1", "alice"))
    new = token_of(world.gateway.issue("a1", "alice"))
    assert (await world.post(old, body("TEXT: x")))[0] == 401
    assert world.gateway.revoke("a1", old) == 0  # the old process's end, after the new start
    assert (await world.post(new, body("TEXT: x")))[0] == 200


async def test_the_kill_switch_refuses_every_request(world, mock_api):
    token = token_of(world.gateway.issue("a1", "alice"))
    world.halted = True
    status, data, _ = await world.post(token, body("TEXT: x"))
    assert status == 403 and "kill switch" in error_of(data)["message"]
    assert await world.gateway.revoke_everything() == 1
    world.halted = False
    assert (await world.post(token, body("TEXT: x")))[0] == 401
    assert mock_api.requests == []


async def test_the_rate_limit_answers_429_with_retry_after(world, mock_api):
    token = token_of(world.gateway.issue("a1", "alice"))
    for _ in range(5):
        assert (await world.post(token, body("TEXT: x", stream=False)))[0] == 200
    status, data, headers = await world.post(token, body("TEXT: x", stream=False))
    assert status == 429 and error_of(data)["type"] == "rate_limit_error"
    assert "gateway_requests_per_minute" in error_of(data)["message"]
    assert 1 <= int(headers["retry-after"]) <= 61
    assert len(mock_api.requests) == 5
    assert dict(world.gateway.view().agents)["a1"].requests["refused_rate"] == 1
    # Another agent has a window of its own.
    other = token_of(world.gateway.issue("a2", "bob"))
    assert (await world.post(other, body("TEXT: x", stream=False)))[0] == 200


async def test_a_budget_stops_the_agent_at_its_next_request(world, mock_api):
    token = token_of(world.gateway.issue("a1", "alice"))
    inp, out = price_of(MODEL)
    one = (INPUT_TOKENS * inp + OUTPUT_TOKENS * out) / 1e6
    world.budget = (one / 2, 0.0)  # below one request's cost; nothing recorded yet
    assert (await world.post(token, body("TEXT: first")))[0] == 200
    status, data, _ = await world.post(token, body("TEXT: second"))
    assert status == 403 and error_of(data)["type"] == "permission_error"
    assert "crossed its daily budget" in error_of(data)["message"]
    assert len(mock_api.requests) == 1
    # What the store recorded counts too (a restart forgets what the gateway saw).
    fresh = token_of(world.gateway.issue("a2", "bob"))
    world.budget = (1.0, 1.5)
    assert (await world.post(fresh, body("TEXT: x")))[0] == 403


async def test_an_upstream_that_is_down_is_a_502_naming_it(tmp_path, mock_api):
    s = settings_for(tmp_path, mock_api)
    dead = f"http://127.0.0.1:{free_port()}"
    gateway = ModelGateway(s.with_(agent_env={**s.agent_env, "ANTHROPIC_BASE_URL": dead}),
                           halted=lambda: False)
    await gateway.start()
    try:
        token = gateway.issue("a1", "alice")["ANTHROPIC_API_KEY"]
        async with aiohttp.ClientSession() as http:
            status, data, _ = await World(gateway, http).post(token, body("TEXT: x"))
        assert status == 502 and dead in error_of(data)["message"]
    finally:
        await gateway.close()


def test_stream_usage_reads_events_split_anywhere():
    stream = (b'event: message_start\ndata: {"type":"message_start","message":{"model":'
              b'"claude-sonnet-4-5","usage":{"input_tokens":7,"cache_read_input_tokens":100,'
              b'"output_tokens":1}}}\n\nevent: ping\ndata: {"type":"ping"}\n\n'
              b'event: message_delta\ndata: {"type":"message_delta","delta":{},'
              b'"usage":{"output_tokens":42}}\n\n')
    for step in (1, 3, 17, len(stream)):
        reader = StreamUsage()
        for i in range(0, len(stream), step):
            reader.feed(stream[i:i + step])
        u = reader.usage
        assert (u.model, u.input_tokens, u.cache_read_tokens, u.output_tokens) == \
            ("claude-sonnet-4-5", 7, 100, 42), step
    assert usage_of_body(b"not json") is None
    assert usage_of_body(b'{"type":"error"}') is None


async def test_metrics_show_each_agents_requests_tokens_cost_and_streams(world, mock_api):
    from prometheus_client.parser import text_string_to_metric_families

    from bot.metrics import Metrics, Sample
    from supervisor.api import StatsView

    token = token_of(world.gateway.issue("a1", "alice"))
    await world.post(token, body("TEXT: hello"))
    await world.post("sbg-bogus", body("TEXT: hello"))
    stats = StatsView(agents=(), turns=(), costs=(), open_escalations=0,
                      oldest_escalation_age_s=0.0, halted=False, bus_depth=0, schedule_runs=(),
                      gateway=world.gateway.view())
    text = Metrics().render(Sample(stats, (), 0.0)).decode()
    got = {(s.name, tuple(s.labels.values())): s.value
           for f in text_string_to_metric_families(text) for s in f.samples}
    assert got[("switchboard_gateway_active", ())] == 1
    assert got[("switchboard_gateway_requests_total", ("alice", "a1", "ok"))] == 1
    assert got[("switchboard_gateway_tokens_total", ("alice", "a1", "output"))] == OUTPUT_TOKENS
    assert got[("switchboard_gateway_cost_usd_total", ("alice", "a1"))] > 0
    assert got[("switchboard_gateway_streams", ("alice", "a1"))] == 0
    assert got[("switchboard_gateway_refused_unknown_token_total", ())] == 1
