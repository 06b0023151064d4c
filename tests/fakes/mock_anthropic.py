"""A scriptable mock of the Anthropic Messages API, for driving the REAL ``claude`` CLI.

Standard library only: it runs an ``http.server.ThreadingHTTPServer`` in a daemon
thread, so it can be used from any test (sync or async) and from subprocesses.

Usage::

    with MockAnthropic() as mock:
        env = mock.cli_env(tmp_path)          # HOME, CLAUDE_CONFIG_DIR, ANTHROPIC_BASE_URL, ...
        ...run the CLI with env...
        assert mock.user_texts() == ["BASH: echo hi", ...]

The model's behaviour is driven by a *directive*: the text of the last text block of the
last ``role:"user"`` message (``<system-reminder>`` blocks are skipped). Rules, in order:

* last user message carries a ``tool_result`` -> ``TOOL RESULT: <content, max 2000 chars>``
* a Switchboard bus turn (``<message ...>`` blocks) -> the rules below, applied to the body of
  its last message
* ``SLEEP <seconds>: <rest>``  -> wait (pinging every 0.5 s, abortable), then apply the
  rules to ``<rest>`` (an empty rest replies ``SLEPT <seconds>``)
* ``BASH: <command>``          -> a ``Bash`` tool_use with ``{"command", "description"}``
* ``TOOL <Name> <json input>``  -> a ``<Name>`` tool_use with that input
* ``RECALL``                   -> ``HISTORY: d1 | d2 | ...`` (every user text, in order)
* ``TEXT: <t>``                -> exactly ``<t>``
* ``REPEAT <n>[/<ms>]: <t>``    -> ``<t>`` n times, streamed as n text deltas, ``<ms>`` apart (a
  long answer to a short request, at full speed or a model's pace: bench/gateway.py)
* ``LONG <n>``                 -> an answer of exactly n characters, ``long_text(n)``: numbered
  lines of 100 characters, so a reader can tell it arrived whole and in order
* anything else                -> ``ECHO: <directive>``

Like the real API, a request whose ``tool_use`` blocks are not answered by ``tool_result``
blocks in the next message is refused with a 400 (``mock.unpaired`` lists the ids refused).

``mock.on_request`` (``Callable[[dict], dict | None]``) may override a reply: return
``{"text": ...}``, ``{"tool": name, "input": {...}}`` or ``{"error": status}`` (optionally
with ``"message"``); ``None`` falls through to the directive rules.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if __package__:
    from tests.fakes._http import (
        ClientGone,
        LoopbackServer,
        QuietHandler,
        serve_in_thread,
        stop_serving,
    )
else:  # run as a script: python tests/fakes/mock_anthropic.py [port]
    from _http import ClientGone, LoopbackServer, QuietHandler, serve_in_thread, stop_serving

__all__ = ["MockAnthropic", "directive_of", "image_blocks", "long_text", "unpaired_tool_uses",
           "user_directives"]

SYSTEM_REMINDER = "<system-reminder>"
TOOL_RESULT_MAX = 2000
PING_INTERVAL = 0.5
INPUT_TOKENS = 10
OUTPUT_TOKENS = 12
# A unix socket path is limited to ~107 bytes; the CLI puts one under $TMPDIR/cc-socks/.
_MAX_TMPDIR_LEN = 40

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_SLEEP_RE = re.compile(r"^SLEEP\s+(\d+(?:\.\d+)?)\s*(?::\s?(.*))?$", re.DOTALL)
_BASH_RE = re.compile(r"^BASH:\s?(.*)$", re.DOTALL)
_TOOL_RE = re.compile(r"^TOOL\s+(\S+)\s+(.*)$", re.DOTALL)
_TEXT_RE = re.compile(r"^TEXT:\s?(.*)$", re.DOTALL)
_REPEAT_RE = re.compile(r"^REPEAT\s+(\d+)(?:/(\d+(?:\.\d+)?))?:\s?(.*)$", re.DOTALL)
_LONG_RE = re.compile(r"^LONG\s+(\d+)$")
_BUS_BODY_RE = re.compile(r"<message [^>]*>\n(.*?)\n</message>", re.DOTALL)
# The CLI appends reminders to tool_result content ("...\n\n<system-reminder>...</...>").
_REMINDER_RE = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.DOTALL)


# ---------------------------------------------------------------------------------------
# Request-body helpers (pure functions; exported for tests that want them)
# ---------------------------------------------------------------------------------------


def long_text(n: int) -> str:
    """Exactly `n` characters: lines `L000000 ....` of 100 characters each (newline included),
    the last one cut."""
    return "".join(f"L{i:06d} {'.' * 91}\n" for i in range(n // 100 + 1))[:n]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _user_texts_of(message: dict[str, Any]) -> list[str]:
    """The non-reminder text blocks of one message."""
    return [
        b.get("text", "")
        for b in _blocks(message.get("content"))
        if b.get("type") == "text"
        and isinstance(b.get("text"), str)
        and not b["text"].lstrip().startswith(SYSTEM_REMINDER)
    ]


def _last_user_message(body: dict[str, Any]) -> dict[str, Any] | None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message
    return None


def directive_of(body: dict[str, Any]) -> str:
    """Text of the last non-reminder text block of the last user message ('' if none)."""
    message = _last_user_message(body)
    if message is None:
        return ""
    texts = _user_texts_of(message)
    return texts[-1] if texts else ""


def bus_directive(directive: str) -> str:
    """The body of the last message of a bus turn; any other text as it is."""
    bodies = _BUS_BODY_RE.findall(directive)
    return bodies[-1] if bodies else directive


def user_directives(body: dict[str, Any]) -> list[str]:
    """Every user text in ``messages`` in order, ignoring tool results and reminders."""
    out: list[str] = []
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            out.extend(_user_texts_of(message))
    return out


def image_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``image`` content block the request carries in its user messages, at the top
    level or inside a ``tool_result`` (where the CLI's Read tool puts an image file it read),
    as the real API receives them: ``{"type": "image", "source": {"type": "base64",
    "media_type": ..., "data": ...}}``."""
    found: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        for block in _blocks(message.get("content")):
            inner = _blocks(block.get("content")) if block.get("type") == "tool_result" else []
            found += [b for b in (block, *inner) if b.get("type") == "image"]
    return found


def unpaired_tool_uses(body: dict[str, Any]) -> list[str]:
    """The ids of tool_use blocks not answered by a tool_result in the next user/assistant
    message: the real API refuses such a request with a 400."""
    turns = [m for m in body.get("messages") or [] if isinstance(m, dict)
             and m.get("role") in ("user", "assistant")]
    missing: list[str] = []
    for i, message in enumerate(turns):
        if message.get("role") != "assistant":
            continue
        ids = [b.get("id") for b in _blocks(message.get("content")) if b.get("type") == "tool_use"]
        if not ids:
            continue
        nxt = turns[i + 1] if i + 1 < len(turns) else None
        answered = {b.get("tool_use_id") for b in _blocks((nxt or {}).get("content"))
                    if b.get("type") == "tool_result"} if nxt and nxt.get("role") == "user" \
            else set()
        missing += [str(t) for t in ids if t not in answered]
    return missing


def _tool_result_text(message: dict[str, Any]) -> str | None:
    """Text of the last tool_result block of a message (reminders removed), else None."""
    found: str | None = None
    for block in _blocks(message.get("content")):
        if block.get("type") != "tool_result":
            continue
        content = block.get("content")
        if isinstance(content, str):
            found = content
        elif isinstance(content, list):
            found = "\n".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
        else:
            found = "" if content is None else json.dumps(content)
    return None if found is None else _REMINDER_RE.sub("\n", found).strip()


# ---------------------------------------------------------------------------------------
# HTTP plumbing
# ---------------------------------------------------------------------------------------


class _Handler(QuietHandler):
    server_version = "MockAnthropic/1.0"

    def setup(self) -> None:
        super().setup()
        # Each SSE event is its own small write: without this, Nagle's algorithm holds one back
        # until the client's delayed ACK (40 ms), and a benchmark against the mock measures that.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- routing ---------------------------------------------------------------------
    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path.rstrip("/")
        raw = self._read_body()
        if path == "/v1/messages":
            self.server.owner.record_headers(dict(self.headers.items()))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send_error_json(400, "mock: request body is not JSON")
                return
            if not isinstance(body, dict):
                body = {}
            self.server.owner._handle_messages(self, body)
        elif path == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": INPUT_TOKENS})
        else:
            self._send_json(200, {})

    def do_GET(self) -> None:  # noqa: N802
        if urlsplit(self.path).path.rstrip("/") == "/v1/models":
            self.server.owner._handle_models(self)
        else:
            self._send_json(200, {})

    def do_HEAD(self) -> None:  # noqa: N802
        data = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def _other(self) -> None:
        self._send_json(200, {})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other  # noqa: N815

    # -- helpers ---------------------------------------------------------------------
    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_mock_{next(_request_ids)}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_json(self, status: int, message: str | None = None) -> None:
        err_type = _ERROR_TYPES.get(status, "api_error")
        self._send_json(
            status,
            {
                "type": "error",
                "error": {"type": err_type, "message": message or f"mock error {status}"},
            },
        )

    # SSE over chunked transfer encoding, so keep-alive connections stay usable.
    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", f"req_mock_{next(_request_ids)}")
        self.end_headers()
        self.wfile.flush()

    def _sse(self, event: str, data: dict[str, Any]) -> None:
        payload = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()

    def _end_sse(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


_request_ids = itertools.count(1)


# ---------------------------------------------------------------------------------------
# The mock
# ---------------------------------------------------------------------------------------


class MockAnthropic:
    """Scriptable loopback Messages API. See the module docstring for the directives."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.host = host
        self.port = port
        self.url = ""
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each /v1/messages request's headers, in order
        self.errors: list[str] = []
        self.on_request: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._server: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._tmpdirs: list[str] = []
        self.unpaired: list[str] = []  # tool_use ids of requests refused for want of a result
        # GET /v1/models: the credentials it was asked with, and (when set) the only ones it
        # accepts, as the real API answers a wrong key: 401 authentication_error.
        self.accepted_keys: set[str] | None = None
        self.model_list_auth: list[str] = []

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> MockAnthropic:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = LoopbackServer((self.host, self.port), _Handler, self,
                                      lambda error: self.errors.append(error))
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self._thread = serve_in_thread(self._server, f"MockAnthropic:{self.port}")
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        self._stopping.set()
        stop_serving(server, thread)
        for d in self._tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
        self._tmpdirs.clear()

    def __enter__(self) -> MockAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- inspection ------------------------------------------------------------------
    def user_texts(self) -> list[str]:
        """The directive text of each recorded request, in order."""
        with self._cond:
            bodies = list(self.requests)
        return [directive_of(b) for b in bodies]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until at least ``n`` requests were recorded; return them (a copy).

        Raises ``TimeoutError`` if fewer than ``n`` arrived within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"MockAnthropic: {len(self.requests)} of {n} requests after {timeout}s"
                    )
                self._cond.wait(left)
            return list(self.requests)

    # -- environment -----------------------------------------------------------------
    def cli_env(self, home: Path | str, tmpdir: Path | str | None = None) -> dict[str, str]:
        """Environment for a ``claude`` process that talks to this mock (reference §7).

        ``TMPDIR`` is ``home/tmp`` when that path is short enough for the CLI's unix
        socket (~107-byte limit), else a fresh ``/tmp/sb*`` directory removed by
        ``stop()``; pass ``tmpdir`` to choose it yourself.
        """
        if not self.url:
            raise RuntimeError("MockAnthropic.cli_env() needs start() first")
        home = Path(home)
        config = home / ".claude"
        config.mkdir(parents=True, exist_ok=True)
        if tmpdir is None:
            candidate = home / "tmp"
            if len(str(candidate)) <= _MAX_TMPDIR_LEN:
                candidate.mkdir(parents=True, exist_ok=True)
                tmpdir = candidate
            else:
                tmpdir = tempfile.mkdtemp(prefix="sb", dir="/tmp")
                self._tmpdirs.append(tmpdir)
        else:
            Path(tmpdir).mkdir(parents=True, exist_ok=True)
        return {
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(config),
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "dummy-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "TMPDIR": str(tmpdir),
        }

    # -- the model -------------------------------------------------------------------
    def record_headers(self, headers: dict[str, str]) -> None:
        with self._cond:
            self.headers.append({k.lower(): v for k, v in headers.items()})

    def _record(self, body: dict[str, Any]) -> None:
        with self._cond:
            self.requests.append(body)
            self._cond.notify_all()

    def _override(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The real API's 400 for a tool_use with no tool_result in the next message, else
        what `on_request` says (a hook that raises becomes a 500)."""
        missing = unpaired_tool_uses(body)
        if missing:
            self.unpaired += missing
            return {"error": 400, "message": "messages: `tool_use` ids were found without "
                    f"`tool_result` blocks immediately after: {', '.join(missing)}. Each "
                    "`tool_use` block must have a corresponding `tool_result` block in the "
                    "next message."}
        if self.on_request is None:
            return None
        try:
            return self.on_request(body)
        except Exception as e:  # noqa: BLE001 - a broken hook becomes a 500
            self.errors.append(f"on_request raised {e!r}")
            return {"error": 500, "message": f"mock on_request raised: {e!r}"}

    def _handle_models(self, h: _Handler) -> None:
        bearer = (h.headers.get("authorization") or "").removeprefix("Bearer ")
        key = h.headers.get("x-api-key") or bearer
        with self._cond:
            self.model_list_auth.append(key)
        if self.accepted_keys is not None and key not in self.accepted_keys:
            h._send_error_json(401, "invalid x-api-key")
            return
        h._send_json(200, {"data": [{"type": "model", "id": "claude-mock",
                                     "display_name": "Mock"}],
                           "has_more": False, "first_id": "claude-mock",
                           "last_id": "claude-mock"})

    def _handle_messages(self, h: _Handler, body: dict[str, Any]) -> None:
        self._record(body)
        streaming = bool(body.get("stream"))
        model = body.get("model") or "claude-mock"

        reply = self._override(body)
        if reply is not None and "error" in reply:
            h._send_error_json(int(reply["error"]), reply.get("message"))
            return

        started = False
        if reply is None:
            directive = bus_directive(directive_of(body))
            last_user = _last_user_message(body) or {}
            tool_result = _tool_result_text(last_user)
            if tool_result is not None:
                reply = {"text": "TOOL RESULT: " + tool_result[:TOOL_RESULT_MAX]}
            else:
                while True:
                    m = _SLEEP_RE.match(directive.strip())
                    if not m:
                        break
                    seconds = float(m.group(1))
                    if streaming and not started:
                        h._start_sse()
                        started = True
                        h._sse("message_start", self._message_start(model))
                    self._wait(h, seconds, ping=streaming)
                    rest = (m.group(2) or "").strip()
                    if not rest:
                        reply = {"text": f"SLEPT {m.group(1)}"}
                        break
                    directive = rest
                if reply is None:
                    reply = self._apply_rules(directive, body)

        if streaming:
            if not started:
                h._start_sse()
                h._sse("message_start", self._message_start(model))
            self._stream_reply(h, reply)
        else:
            h._send_json(200, self._message_body(model, reply))

    def _apply_rules(self, directive: str, body: dict[str, Any]) -> dict[str, Any]:
        d = directive.strip()
        if m := _BASH_RE.match(d):
            return {
                "tool": "Bash",
                "input": {"command": m.group(1), "description": "run a command"},
            }
        if m := _TOOL_RE.match(d):
            try:
                tool_input = json.loads(m.group(2))
            except ValueError:
                return {"text": f"MOCK ERROR: bad JSON tool input: {m.group(2)}"}
            return {"tool": m.group(1), "input": tool_input}
        if d == "RECALL":
            return {"text": "HISTORY: " + " | ".join(user_directives(body))}
        if m := _TEXT_RE.match(d):
            return {"text": m.group(1)}
        if m := _REPEAT_RE.match(d):
            return {"text": m.group(3) * int(m.group(1)), "pieces": int(m.group(1)),
                    "pace_s": float(m.group(2) or 0) / 1000}
        if m := _LONG_RE.match(d):
            return {"text": long_text(int(m.group(1)))}
        return {"text": f"ECHO: {directive}"}

    def _wait(self, h: _Handler, seconds: float, ping: bool) -> None:
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._stopping.wait(min(PING_INTERVAL, left)):
                raise ClientGone("server stopping")
            if h._client_gone():
                raise ClientGone("client disconnected")
            if ping and deadline - time.monotonic() > 0:
                h._sse("ping", {"type": "ping"})

    # -- wire formats ----------------------------------------------------------------
    def _message_start(self, model: str) -> dict[str, Any]:
        return {
            "type": "message_start",
            "message": {
                "id": f"msg_mock_{next(self._ids)}",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": INPUT_TOKENS,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }

    def _content_block(self, reply: dict[str, Any]) -> tuple[dict[str, Any], str]:
        if "tool" in reply:
            block = {
                "type": "tool_use",
                "id": f"toolu_{next(self._ids)}",
                "name": str(reply["tool"]),
                "input": reply.get("input") or {},
            }
            return block, "tool_use"
        return {"type": "text", "text": str(reply.get("text", ""))}, "end_turn"

    def _stream_reply(self, h: _Handler, reply: dict[str, Any]) -> None:
        block, stop_reason = self._content_block(reply)
        h._sse("ping", {"type": "ping"})
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        h._sse("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": start})
        pieces = int(reply.get("pieces") or 1)
        if pieces > 1 and block["type"] == "text":
            size = len(block["text"]) // pieces
            for i in range(pieces):
                if i and reply.get("pace_s"):
                    time.sleep(reply["pace_s"])
                h._sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "text_delta", "text": block["text"][i * size:(i + 1) * size]}})
        else:
            h._sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": delta})
        h._sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        h._sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                 "usage": {"output_tokens": OUTPUT_TOKENS}})
        h._sse("message_stop", {"type": "message_stop"})
        h._end_sse()

    def _message_body(self, model: str, reply: dict[str, Any]) -> dict[str, Any]:
        block, stop_reason = self._content_block(reply)
        return {
            "id": f"msg_mock_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "content": [block],
            "model": model,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": INPUT_TOKENS,
                "output_tokens": OUTPUT_TOKENS,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }


if __name__ == "__main__":  # pragma: no cover - manual use: python mock_anthropic.py [port]
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    with MockAnthropic(port=port) as mock:
        print(mock.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
