"""The demo's model: a scripted Messages API on a loopback port (standard library only, no key,
no network) that the real bundled `claude` CLI talks to in `switchboard demo`.

It plays two agents by the prompt they were spawned with. The scout asks to run a command (a
permission request), asks the operator a question, messages the reviewer over the bus, then
gives a long answer; the reviewer acknowledges what it is sent. Which step comes next is read
from the conversation itself (how many tools the model has called so far), so the script needs
no state of its own and a retried request gets the same reply."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

SCOUT_PROMPT = "Look around this project, ask me what matters most, and brief the reviewer."
REVIEWER_PROMPT = "You are the reviewer: acknowledge each brief the scout sends you."
NOTES_COMMAND = "printf '# Notes\\n\\nStarted by the scout.\\n' > NOTES.md && ls -l NOTES.md"
QUESTION = "Which part of the project should the brief cover first?"
OPTIONS = (("Tests", "what is tested, and what is not"),
           ("Docs", "what a newcomer reads first"))
REVIEWER_ACK = "Reviewer here: got the scout's brief; I will start where it says."


def brief(choice: str) -> str:
    return f"Brief from the scout: start with the {choice.lower()}; my notes are in NOTES.md."


def long_answer(choice: str) -> str:
    """The scout's final answer: long enough to show how long output reads."""
    lines = [f"## Scout's report (focus: {choice})", "",
             "I wrote NOTES.md, asked you where to start, and briefed the reviewer.", "",
             "### What I would look at, in order", ""]
    lines += [f"{n}. Step {n}: read the {choice.lower()} for part {n} of the project, note what "
              "is missing, and send the reviewer one message per finding." for n in range(1, 21)]
    lines += ["", "### How this demo worked", "",
              "- Every tool call went through the policy: the command asked for your approval.",
              "- The question came to you as an escalation, answered with /answer.",
              "- The brief reached the reviewer through the bus, as its next turn.",
              "- Nothing left this machine: the model was a script on a loopback port."]
    return "\n".join(lines)


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    return [str(b.get("text") or "") for b in blocks
            if isinstance(b, dict) and b.get("type") == "text"
            and not str(b.get("text") or "").lstrip().startswith("<system-reminder>")]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _tool_results(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                inner = " ".join(str(b.get("text") or "") for b in inner if isinstance(b, dict))
            out.append(str(inner or ""))
    return out


def reply_for(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted reply to one request: {"text": ...} or {"tool": name, "input": {...}}."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    said = " ".join(t for m in messages if m.get("role") == "user" for t in _texts(m))
    calls = sum(1 for m in messages if m.get("role") == "assistant"
                for b in _blocks(m) if b.get("type") == "tool_use")
    if REVIEWER_PROMPT in said:
        return {"text": REVIEWER_ACK if "<message" in said else "Ready for the scout's brief."}
    if SCOUT_PROMPT not in said:  # a side query (a title, a model check): any short text
        return {"text": "ok"}
    if calls == 0:
        return {"tool": "Bash", "input": {"command": NOTES_COMMAND,
                                          "description": "start a notes file"}}
    if calls == 1:
        return {"tool": "AskUserQuestion", "input": {"questions": [{
            "question": QUESTION, "header": "Focus", "multiSelect": False,
            "options": [{"label": label, "description": d} for label, d in OPTIONS]}]}}
    results = " ".join(r for m in messages if m.get("role") == "user" for r in _tool_results(m))
    choice = next((label for label, _ in OPTIONS if label in results), OPTIONS[0][0])
    if calls == 2:
        return {"tool": "mcp__switchboard__send_message",
                "input": {"to": "reviewer", "type": "task", "body": brief(choice)}}
    if calls == 3:
        return {"text": long_answer(choice)}
    return {"text": "Done: see the report above."}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.live: set[socket.socket] = set()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.live.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.live.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away (an agent killed mid-reply) is routine here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the CLI expects; SSE goes chunked
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - the base's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        if urlsplit(self.path).path.rstrip("/") != "/v1/messages":
            self._json({})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        self.server.model.count()
        reply = reply_for(body)
        model = str(body.get("model") or "demo")
        if body.get("stream"):
            self._stream(model, reply)
        else:
            self._json(self.server.model.message(model, reply))

    def do_GET(self) -> None:  # noqa: N802 - the base's name
        self._json({})

    do_HEAD = do_GET  # noqa: N815 - the base's name

    def _json(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _event(self, name: str, data: dict[str, Any]) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def _stream(self, model: str, reply: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        message = self.server.model.message(model, reply)
        block = message["content"][0]
        start = {**message, "content": [], "stop_reason": None}
        self._event("message_start", {"type": "message_start", "message": start})
        if block["type"] == "tool_use":
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self._event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": first})
        self._event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": delta})
        self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
        self._event("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": message["stop_reason"],
                                                "stop_sequence": None},
                                      "usage": {"output_tokens": 12}})
        self._event("message_stop", {"type": "message_stop"})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ScriptedModel:
    """The loopback server: `with ScriptedModel() as model:` then point the CLI at model.url."""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self.requests = 0
        self.url = ""

    def count(self) -> None:
        self.requests += 1

    def message(self, model: str, reply: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        if "tool" in reply:
            block = {"type": "tool_use", "id": f"toolu_demo_{n}", "name": reply["tool"],
                     "input": reply["input"]}
        else:
            block = {"type": "text", "text": reply["text"]}
        return {"id": f"msg_demo_{n}", "type": "message", "role": "assistant",
                "content": [block], "model": model,
                "stop_reason": "tool_use" if "tool" in reply else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 12,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}

    def __enter__(self) -> ScriptedModel:
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="demo-model", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            with server.lock:
                live = list(server.live)
            for sock in live:  # keep-alive connections the CLI never closed
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
