"""Prove the two test fakes work with the real claude-agent-sdk.

* ``MockAnthropic`` (tests/fakes/mock_anthropic.py) driving the REAL bundled ``claude`` CLI.
* ``fake_claude.py`` (tests/fakes/fake_claude.py) driven by ``ClaudeSDKClient`` via ``cli_path``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ProcessError,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolPermissionContext,
)

from tests.conftest import FAKE_CLAUDE
from tests.fakes.mock_anthropic import MockAnthropic

FAKES = Path(__file__).resolve().parents[1] / "fakes"
MODEL = "claude-sonnet-4-5"


# ---------------------------------------------------------------------------------------
# helpers and fixtures
# ---------------------------------------------------------------------------------------


@pytest.fixture
def mock() -> Iterator[MockAnthropic]:
    with MockAnthropic() as m:
        yield m


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short TMPDIR for the CLI (its unix socket path must stay under ~107 bytes)."""
    d = tempfile.mkdtemp(prefix="sb", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


async def allow_all(
    tool_name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
) -> PermissionResultAllow:
    return PermissionResultAllow(updated_input=tool_input)


class Client:
    """A ClaudeSDKClient plus what its stderr said; always disconnected at the end."""

    def __init__(self, options: ClaudeAgentOptions):
        self.stderr: list[str] = []
        options.stderr = self.stderr.append
        self.sdk = ClaudeSDKClient(options)

    async def __aenter__(self) -> Client:
        await self.sdk.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.sdk.disconnect()

    async def turn(
        self,
        prompt: str,
        on_message: Callable[[Any], Awaitable[None]] | None = None,
    ) -> tuple[list[Any], ResultMessage]:
        await self.sdk.query(prompt)
        messages: list[Any] = []
        async for msg in self.sdk.receive_response():
            messages.append(msg)
            if on_message is not None:
                await on_message(msg)
        result = messages[-1]
        assert isinstance(result, ResultMessage), messages
        return messages, result


def real_cli_options(
    mock: MockAnthropic, home: Path, tmpdir: Path, cwd: Path
) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        env=mock.cli_env(home, tmpdir=tmpdir),
        cwd=str(cwd),
        model=MODEL,
        can_use_tool=allow_all,
        system_prompt={"type": "preset", "preset": "claude_code"},
        max_buffer_size=16 * 1024 * 1024,
    )


def fake_options(cwd: Path, **kw: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(cli_path=str(FAKE_CLAUDE), cwd=str(cwd), model=MODEL, **kw)


def texts(messages: list[Any]) -> list[str]:
    return [
        b.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, TextBlock)
    ]


async def wait_until(pred: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return pred()


# ---------------------------------------------------------------------------------------
# MockAnthropic over plain HTTP (no CLI): wire formats
# ---------------------------------------------------------------------------------------


def _post(mock: MockAnthropic, path: str, body: dict[str, Any]) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read().decode()
    finally:
        conn.close()


def _sse_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in raw.split("\n\n"):
        if not chunk.strip():
            continue
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def _body(*user_contents: Any, stream: bool = True, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i, content in enumerate(user_contents):
        if i:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        messages.append({"role": "user", "content": content})
    body: dict[str, Any] = {"model": "claude-test-1", "messages": messages, **extra}
    if stream:
        body["stream"] = True
    return body


@pytest.mark.timeout(30)
def test_mock_refuses_an_unpaired_tool_use_like_the_real_api(mock: MockAnthropic) -> None:
    use = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}]}
    cut = {"model": "m", "stream": True, "messages": [
        {"role": "user", "content": "BASH: ls"}, use, {"role": "user", "content": "TEXT: next"}]}
    status, _, text = _post(mock, "/v1/messages", cut)
    assert status == 400 and "toolu_9" in text and "invalid_request_error" in text
    assert mock.unpaired == ["toolu_9"]
    answered = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "interrupted"},
        {"type": "text", "text": "TEXT: next"}]}
    status, _, _ = _post(mock, "/v1/messages", {**cut, "messages": [cut["messages"][0], use,
                                                                      answered]})
    assert status == 200


@pytest.mark.timeout(30)
def test_mock_wire_formats(mock: MockAnthropic) -> None:
    reminder = {"type": "text", "text": "<system-reminder>\nignore me\n</system-reminder>"}

    # Streaming text reply: the exact SSE sequence, the model echoed, reminders skipped.
    status, ctype, raw = _post(
        mock, "/v1/messages?beta=true", _body([reminder, {"type": "text", "text": "hello"}])
    )
    assert status == 200 and ctype.startswith("text/event-stream")
    events = _sse_events(raw)
    assert [e for e, _ in events] == [
        "message_start", "ping", "content_block_start", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]
    assert events[0][1]["message"]["model"] == "claude-test-1"
    assert events[3][1]["delta"] == {"type": "text_delta", "text": "ECHO: hello"}
    assert events[5][1]["usage"] == {"output_tokens": 12}

    # BASH -> tool_use with input_json_delta, stop_reason tool_use.
    _, _, raw = _post(mock, "/v1/messages", _body("BASH: ls -l"))
    events = _sse_events(raw)
    start = events[2][1]["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Bash" and start["input"] == {}
    assert start["id"].startswith("toolu_")
    delta = events[3][1]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"]) == {"command": "ls -l", "description": "run a command"}
    assert events[5][1]["delta"]["stop_reason"] == "tool_use"

    # Non-streaming (no "stream" key): a JSON Message; TOOL with any name and input.
    status, ctype, raw = _post(
        mock, "/v1/messages", _body('TOOL Write {"file_path": "/x", "content": "hi"}', stream=False)
    )
    msg = json.loads(raw)
    assert status == 200 and ctype.startswith("application/json")
    assert msg["type"] == "message" and msg["model"] == "claude-test-1"
    assert msg["stop_reason"] == "tool_use"
    assert msg["content"][0]["name"] == "Write"
    assert msg["content"][0]["input"] == {"file_path": "/x", "content": "hi"}
    assert msg["usage"]["input_tokens"] == 10 and msg["usage"]["output_tokens"] == 12

    # tool_result (list content, CLI-style appended reminder stripped) wins over directives.
    tool_result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [
            {"type": "text", "text": "x" * 3000 + "\n\n<system-reminder>r</system-reminder>"}
        ],
    }
    _, _, raw = _post(mock, "/v1/messages", _body("BASH: ls", [tool_result], stream=False))
    text = json.loads(raw)["content"][0]["text"]
    assert text == "TOOL RESULT: " + "x" * 2000

    # RECALL, TEXT, role:"system" entries, plain-string content.
    body = _body([reminder, {"type": "text", "text": "one"}], "two", "RECALL", stream=False)
    body["messages"].insert(1, {"role": "system", "content": "mid-conversation note"})
    _, _, raw = _post(mock, "/v1/messages", body)
    assert json.loads(raw)["content"][0]["text"] == "HISTORY: one | two | RECALL"
    _, _, raw = _post(mock, "/v1/messages", _body("TEXT: exactly this", stream=False))
    assert json.loads(raw)["content"][0]["text"] == "exactly this"

    # SLEEP then rest.
    t0 = time.monotonic()
    _, _, raw = _post(mock, "/v1/messages", _body("SLEEP 0.6: TEXT: woke", stream=True))
    assert time.monotonic() - t0 >= 0.6
    events = _sse_events(raw)
    assert [e for e, _ in events].count("ping") >= 2  # keep-alive ping(s) + the usual one
    assert events[-4][1]["delta"]["text"] == "woke"

    # count_tokens and other paths.
    count = json.loads(_post(mock, "/v1/messages/count_tokens", _body("x"))[2])
    assert count == {"input_tokens": 10}
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=5)
    conn.request("HEAD", "/api/hello")
    assert conn.getresponse().status == 200
    conn.close()

    # on_request hook: text, tool, error.
    mock.on_request = lambda b: {"text": "hooked"}
    hooked = json.loads(_post(mock, "/v1/messages", _body("x", stream=False))[2])
    assert hooked["content"][0]["text"] == "hooked"
    mock.on_request = lambda b: {"tool": "Read", "input": {"file_path": "/etc/hostname"}}
    events = _sse_events(_post(mock, "/v1/messages", _body("x"))[2])
    assert events[2][1]["content_block"]["name"] == "Read"
    mock.on_request = lambda b: {"error": 529}
    status, _, raw = _post(mock, "/v1/messages", _body("x"))
    assert status == 529
    assert json.loads(raw) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "mock error 529"},
    }
    mock.on_request = None

    assert mock.user_texts()[:3] == [
        "hello",
        "BASH: ls -l",
        'TOOL Write {"file_path": "/x", "content": "hi"}',
    ]
    assert len(mock.wait_for_requests(3, timeout=1)) == len(mock.requests)
    with pytest.raises(TimeoutError):
        mock.wait_for_requests(len(mock.requests) + 1, timeout=0.2)
    assert mock.errors == []


@pytest.mark.timeout(30)
def test_mock_client_disconnect_mid_sleep_and_fast_stop(capfd: pytest.CaptureFixture[str]) -> None:
    mock = MockAnthropic().start()
    data = json.dumps(_body("SLEEP 30: late")).encode()
    s = socket.create_connection(("127.0.0.1", mock.port))
    s.sendall(
        b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    mock.wait_for_requests(1, timeout=5)
    assert s.recv(65536).startswith(b"HTTP/1.1 200")  # headers + message_start already sent
    s.close()  # disconnect mid-sleep
    time.sleep(1.2)
    # An idle keep-alive connection must not hold stop() up.
    idle = socket.create_connection(("127.0.0.1", mock.port))
    t0 = time.monotonic()
    mock.stop()
    assert time.monotonic() - t0 < 2
    idle.close()
    assert mock.errors == []
    out, err = capfd.readouterr()
    assert "Traceback" not in err and "Traceback" not in out


# ---------------------------------------------------------------------------------------
# The REAL bundled CLI against MockAnthropic
# ---------------------------------------------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.timeout(90)
async def test_real_cli_bash_then_recall(
    mock: MockAnthropic, tmp_path: Path, short_tmp: Path, workdir: Path
) -> None:
    permission_asks: list[str] = []

    async def allow(name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext) -> Any:
        permission_asks.append(name)
        return PermissionResultAllow(updated_input=tool_input)

    options = real_cli_options(mock, tmp_path / "home", short_tmp, workdir)
    options.can_use_tool = allow
    async with Client(options) as c:
        messages, result = await c.turn("BASH: echo hi > out.txt")
        assert result.subtype == "success" and not result.is_error, (result, c.stderr)
        assert result.result and result.result.startswith("TOOL RESULT"), result.result
        assert (workdir / "out.txt").read_text() == "hi\n"
        assert permission_asks == ["Bash"]
        init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
        assert init.data["model"] == MODEL
        first_session = result.session_id

        _, result2 = await c.turn("RECALL")
        assert result2.result == "HISTORY: BASH: echo hi > out.txt | RECALL", result2.result
        assert result2.session_id == first_session
        assert result2.total_cost_usd and result.total_cost_usd
        assert result2.total_cost_usd > result.total_cost_usd  # cumulative per process

    # Requests: the BASH turn, its tool_result follow-up, then RECALL.
    assert mock.user_texts() == ["BASH: echo hi > out.txt", "", "RECALL"]
    assert all(r.get("stream") is True and r["model"] == MODEL for r in mock.requests)
    assert mock.errors == []


@pytest.mark.real_cli
@pytest.mark.timeout(90)
async def test_real_cli_interrupt_error_and_set_model(
    mock: MockAnthropic, tmp_path: Path, short_tmp: Path, workdir: Path
) -> None:
    async with Client(real_cli_options(mock, tmp_path / "home", short_tmp, workdir)) as c:
        # Interrupt while the mock is holding the stream open (SLEEP pings keep it alive).
        await c.sdk.query("SLEEP 30: TEXT: too late")
        await asyncio.to_thread(mock.wait_for_requests, 1, 20)
        await asyncio.sleep(0.7)  # at least one keep-alive ping
        t0 = time.monotonic()
        await c.sdk.interrupt()
        result = None
        async for msg in c.sdk.receive_response():
            result = msg
        assert isinstance(result, ResultMessage)
        assert result.subtype == "error_during_execution" and result.is_error
        assert result.terminal_reason == "aborted_streaming"
        assert time.monotonic() - t0 < 5

        # The same process takes the next turn.
        _, ok = await c.turn("TEXT: still here")
        assert ok.result == "still here" and not ok.is_error

        # An HTTP error from the hook surfaces as an API-error result.
        mock.on_request = lambda body: {"error": 500}
        _, failed = await c.turn("anything")
        assert failed.is_error and failed.api_error_status == 500, failed
        mock.on_request = None

        # set_model makes a NON-streaming validation call; the mock answers JSON.
        await c.sdk.set_model("claude-haiku-4-5")
        _, after = await c.turn("after model switch")
        assert after.result == "ECHO: after model switch"

    assert any("stream" not in r for r in mock.requests)  # the validation request
    assert mock.requests[-1]["model"] == "claude-haiku-4-5"
    assert mock.errors == []


# ---------------------------------------------------------------------------------------
# fake_claude.py driven by the SDK
# ---------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
async def test_fake_claude_two_turns_cumulative_cost(workdir: Path) -> None:
    async with Client(fake_options(workdir)) as c:
        info = await c.sdk.get_server_info()
        assert info is not None and info["claude_code_version"] == "2.1.332"
        assert isinstance(info["pid"], int)

        messages, r1 = await c.turn("hello")
        assert texts(messages) == ["ECHO: hello"]
        init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
        assert init.data["model"] == MODEL and init.data["session_id"] == r1.session_id
        assert init.data["cwd"] == str(workdir)
        assert r1.subtype == "success" and not r1.is_error and r1.num_turns == 1
        assert r1.result == "ECHO: hello" and r1.stop_reason == "end_turn"
        assert r1.total_cost_usd == pytest.approx(0.001)
        assert r1.usage == {"input_tokens": 10, "output_tokens": 12}

        _, r2 = await c.turn("STDERR side note")
        assert r2.result == "ECHO: STDERR side note"
        assert r2.total_cost_usd == pytest.approx(0.002)
        assert r2.session_id == r1.session_id
        assert r2.model_usage and r2.model_usage[MODEL]["costUSD"] == pytest.approx(0.002)
        assert await wait_until(lambda: "side note" in c.stderr)

        # Turns sent back to back are queued and run in order.
        await c.sdk.query("one")
        await c.sdk.query("SLEEP 0.2: two")
        got = []
        for _ in range(2):
            async for msg in c.sdk.receive_response():
                if isinstance(msg, ResultMessage):
                    got.append(msg.result)
        assert got == ["ECHO: one", "ECHO: two"]


@pytest.mark.timeout(30)
async def test_fake_claude_resume_keeps_session(workdir: Path) -> None:
    sid = "0b9a4b4e-1111-4a2b-9c3d-123456789abc"
    async with Client(fake_options(workdir, resume=sid)) as c:
        _, r = await c.turn("hi")
        assert r.session_id == sid


@pytest.mark.timeout(30)
async def test_fake_claude_interrupt_during_sleep(workdir: Path) -> None:
    async with Client(fake_options(workdir)) as c:
        t0 = 0.0

        async def interrupt_on_init(msg: Any) -> None:
            nonlocal t0
            if isinstance(msg, SystemMessage) and msg.subtype == "init":
                t0 = time.monotonic()
                await c.sdk.interrupt()

        messages, r = await c.turn("SLEEP 30", on_message=interrupt_on_init)
        assert r.subtype == "error_during_execution" and r.is_error
        assert r.terminal_reason == "aborted_streaming"
        assert time.monotonic() - t0 < 2
        assert r.total_cost_usd == 0

        _, r2 = await c.turn("next")
        assert r2.result == "ECHO: next" and r2.total_cost_usd == pytest.approx(0.001)


@pytest.mark.timeout(30)
async def test_fake_claude_crash(workdir: Path) -> None:
    async with Client(fake_options(workdir)) as c:
        await c.sdk.query("CRASH")
        with pytest.raises(ProcessError) as info:
            async for _ in c.sdk.receive_response():
                pass
        assert info.value.exit_code == 3
        assert await wait_until(lambda: "fake crash: boom" in c.stderr), c.stderr


@pytest.mark.timeout(30)
async def test_fake_claude_bg_escapes_process_group(workdir: Path) -> None:
    async with Client(fake_options(workdir)) as c:
        info = await c.sdk.get_server_info()
        assert info is not None
        fake_pid = info["pid"]
        _, r = await c.turn("BG")
        assert r.result and r.result.startswith("BG STARTED ")
        bg_pid = int(r.result.split()[-1])
    try:
        # The fake exited on disconnect, the grandchild lives on in its own session.
        assert os.getsid(bg_pid) == bg_pid
        assert os.getpgid(bg_pid) != fake_pid
        with pytest.raises(ProcessLookupError):
            os.kill(fake_pid, 0)
    finally:
        # `sh -c 'sleep 1000'` may fork the sleep: kill the whole (escaped) group.
        try:
            os.killpg(bg_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass



@pytest.mark.timeout(60)
async def test_fake_claude_many_concurrent(workdir: Path) -> None:
    """A small fleet: ten fake CLIs at once, two turns each."""

    async def one(i: int) -> tuple[str, float | None, set[str]]:
        async with Client(fake_options(workdir)) as c:
            _, a = await c.turn(f"agent {i} turn 1")
            _, b = await c.turn(f"SLEEP 0.3: agent {i} turn 2")
            return b.result or "", b.total_cost_usd, {a.session_id, b.session_id}

    results = await asyncio.gather(*(one(i) for i in range(10)))
    assert [r[0] for r in results] == [f"ECHO: agent {i} turn 2" for i in range(10)]
    assert all(r[1] == pytest.approx(0.002) for r in results)
    sessions = [r[2] for r in results]
    assert all(len(s) == 1 for s in sessions) and len(set().union(*sessions)) == 10
