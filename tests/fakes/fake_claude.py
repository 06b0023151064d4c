#!/usr/bin/env python3
"""A small fake ``claude`` CLI for fleet-scale tests (standard library only).

It speaks enough of Claude Code's ``--input-format stream-json`` /
``--output-format stream-json`` protocol and control protocol that
claude-agent-sdk's ``ClaudeSDKClient`` drives it like the real CLI
(use ``ClaudeAgentOptions(cli_path=<this file>)``).

Directives, read from the user text (the last non-``<system-reminder>`` text of the
message; ``content`` may be a string or a block list):

* ``SLEEP <n>`` / ``SLEEP <n>: <rest>`` - wait n seconds (interruptible), then apply the
  rules to ``<rest>``; with no rest the reply is ``SLEPT <n>``.
* ``BG``            - start ``sh -c 'sleep 1000'`` in a new session (escaping the process
  group, like the real Bash tool's background commands); reply ``BG STARTED <pid>``.
* ``CRASH``         - write ``fake crash: boom`` to stderr and exit 3 mid-turn (no result).
* ``STDERR <text>`` - write ``<text>`` to stderr, then reply ``ECHO: STDERR <text>``.
* ``MCP <tool> <json>`` - call ``<tool>`` of the SDK's in-process MCP server ``switchboard``
  (a ``mcp_message`` control request, as the real CLI does); reply ``MCP RESULT: <text>``.
* ``SPAM <n> <to>[,<to>...]`` - send ``n`` bus messages (``send_message``), round robin, each
  with a dedup key; every id the bus returns is appended to ``./bus-sent.log``, every refusal
  (the recipient and the tool's answer) to ``./bus-refused.log``.
* a bus turn (``<message ... id="N" from="X" ...>`` blocks): every id is appended to
  ``./bus-received.log``; a body ``PINGPONG <k>`` is answered with ``PINGPONG <k+1>`` to its
  sender; a body that is itself a directive (``MCP``, ``SPAM``, ``STREAM``; ``SLEEP`` when it
  is the turn's only message) is applied.
* ``STREAM <n>``    - stream ``n`` assistant text messages (``chunk <i>``) as fast as it
  can, then reply ``STREAMED <n>``: many events from one turn, for the event ingest.
* ``SLOWSTART <n>: <rest>`` - take n seconds to begin the turn (before its ``system/init``),
  as the real CLI can under load; an ``interrupt`` meanwhile finds no turn running and is a
  no-op (it answers ``still_queued``), as in the real CLI; then apply the rules to ``<rest>``.
* ``INJECT <s> <text>`` - reply ``INJECT SCHEDULED``; ``s`` seconds later, begin a turn of its
  own on ``<text>``, as the real CLI does for a background task's notification: its user
  message and its result carry ``origin: {"kind": "task-notification"}`` and no uuid of ours.
* ``ASKTOOL <name> <json>`` - ask ``can_use_tool`` for that call, as the real CLI does before
  running a tool; reply ``TOOL ALLOWED`` or ``TOOL DENIED: <message>``.
* anything else     - reply ``ECHO: <text>``.

A text block before the directive that begins with ``[Switchboard]`` (a note Switchboard sends
with a turn, e.g. that the agent was restarted) is appended to ``./switchboard-notes.log``.

Each completed turn adds 0.001 USD to the process's cumulative ``total_cost_usd``
(an interrupted turn adds nothing).
"""

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

VERSION = "2.1.332"
DEFAULT_MODEL = "claude-opus-5-5"
COST_PER_TURN = 0.001
INPUT_TOKENS = 10
OUTPUT_TOKENS = 12

_SLOWSTART_RE = re.compile(r"SLOWSTART (\d+(?:\.\d+)?):")
_SLEEP_RE = re.compile(r"^SLEEP\s+(\d+(?:\.\d+)?)\s*(?::\s?(.*))?$", re.DOTALL)
_STDERR_RE = re.compile(r"^STDERR\s+(.*)$", re.DOTALL)
_MCP_RE = re.compile(r"^MCP\s+(\S+)\s+(.*)$", re.DOTALL)
_SPAM_RE = re.compile(r"^SPAM\s+(\d+)\s+(\S+)\s*$")
_STREAM_RE = re.compile(r"^STREAM\s+(\d+)\s*$")
_BUS_RE = re.compile(
    r'<message n="\d+" of="\d+" id="(\d+)" from="([^"]*)"[^>]*>\n(.*?)\n</message>', re.DOTALL)
_SENT_ID_RE = re.compile(r"^message #(\d+)")
_INJECT_RE = re.compile(r"^INJECT\s+(\d+(?:\.\d+)?)\s+(.*)$", re.DOTALL)
_ASKTOOL_RE = re.compile(r"^ASKTOOL\s+(\S+)\s+(.*)$", re.DOTALL)
INJECTED_ORIGIN = {"kind": "task-notification"}

_out_lock = threading.Lock()


def emit(obj):
    line = json.dumps(obj, separators=(",", ":")) + "\n"
    with _out_lock:
        try:
            sys.stdout.write(line)
            sys.stdout.flush()
        except (BrokenPipeError, ValueError, OSError):
            os._exit(0)


def parse_args(argv):
    opts = {
        "model": None,
        "resume": None,
        "session_id": None,
        "fork": False,
        "permission_mode": "default",
        "version": False,
    }
    valued = {
        "--model": "model",
        "--resume": "resume",
        "-r": "resume",
        "--session-id": "session_id",
        "--permission-mode": "permission_mode",
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-v", "--version"):
            opts["version"] = True
        elif arg == "--fork-session":
            opts["fork"] = True
        elif "=" in arg and arg.split("=", 1)[0] in valued:
            key, value = arg.split("=", 1)
            opts[valued[key]] = value
        elif arg in valued and i + 1 < len(argv):
            opts[valued[arg]] = argv[i + 1]
            i += 1
        i += 1
    return opts


def user_text(message):
    """The directive text of a stdin ``user`` line."""
    content = (message.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    texts = []
    if isinstance(content, list):
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
                and not block["text"].lstrip().startswith("<system-reminder>")
            ):
                texts.append(block["text"])
    return texts[-1] if texts else ""


def keep_notes(message):
    """A note of Switchboard's before the prompt (a restart), appended to a file for tests."""
    content = (message.get("message") or {}).get("content")
    notes = [b["text"] for b in (content if isinstance(content, list) else [])[:-1]
             if isinstance(b, dict) and str(b.get("text", "")).startswith("[Switchboard]")]
    if notes:
        with open("switchboard-notes.log", "a") as fh:
            fh.write("".join(n.replace("\n", " ") + "\n" for n in notes))


class Turn:
    def __init__(self, line):
        self.line = line
        self.abort = threading.Event()


class FakeClaude:
    def __init__(self, opts):
        self.model = opts["model"] or DEFAULT_MODEL
        self.permission_mode = opts["permission_mode"] or "default"
        if opts["resume"] and not opts["fork"]:
            self.session_id = opts["resume"]
        elif opts["session_id"] and not opts["resume"]:
            self.session_id = opts["session_id"]
        else:
            self.session_id = str(uuid.uuid4())
        self.cwd = os.getcwd()
        self.turns = queue.Queue()
        self.current = None  # the Turn being run, if any
        self.lock = threading.RLock()  # re-entered by the SIGINT handler
        self.cost = 0.0
        self.completed = 0
        self.children = []  # keep Popen objects alive (BG)
        self.exit_after_turn = False
        self.state_events = bool(os.environ.get("CLAUDE_CODE_SDK_READS_SESSION_STATE")) or bool(
            os.environ.get("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS")
        )
        # Frames sent only because the SDK asked for them are marked sdk_host_only, which
        # the SDK reads and keeps out of the caller's stream (as the real CLI does).
        self.state_host_only = not os.environ.get("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS")
        self.pending = {}  # request id -> [Event, response] for our control requests
        self.mcp_ready = False
        self.next_id = 0

    # -- stdin ---------------------------------------------------------------------
    def reader(self):
        stdin = sys.stdin.buffer
        while True:
            try:
                raw = stdin.readline()
            except (OSError, ValueError):
                raw = b""
            if not raw:
                break
            raw = raw.strip()
            if not raw:
                continue
            try:
                msg = json.loads(raw)
            except ValueError:
                sys.stderr.write(
                    "Error parsing streaming input line (type=unknown, %d chars): SyntaxError\n"
                    % len(raw)
                )
                sys.stderr.flush()
                continue
            if not isinstance(msg, dict):
                continue
            kind = msg.get("type")
            if kind == "control_response":
                response = msg.get("response") or {}
                waiter = self.pending.get(response.get("request_id"))
                if waiter is not None:
                    waiter[1] = response
                    waiter[0].set()
            elif kind == "control_request":
                self.control(msg)
            elif kind == "user":
                self.turns.put(Turn(msg))
            # control_response, control_cancel_request, anything else: ignored
        self.turns.put(None)  # EOF

    def control(self, msg):
        request_id = msg.get("request_id")
        request = msg.get("request") or {}
        subtype = request.get("subtype")
        response = {}
        if subtype == "initialize":
            response = {
                "commands": [],
                "agents": [],
                "output_style": "default",
                "available_output_styles": ["default"],
                "models": [],
                "account": {
                    "tokenSource": "none",
                    "apiKeySource": "ANTHROPIC_API_KEY",
                    "apiProvider": "firstParty",
                },
                "pid": os.getpid(),
                "claude_code_version": VERSION,
                "current_permission_mode": self.permission_mode,
                "hook_on_failure_supported": True,
                "fast_mode_state": "off",
                "session_state": "idle",
                "capabilities": [],
            }
        elif subtype == "interrupt":
            with self.lock:
                if self.current is not None:
                    self.current.abort.set()
                    response = {"still_queued": []}
                else:  # between turns: nothing to interrupt; a queued message stays queued
                    response = {"still_queued": ["queued"] if not self.turns.empty() else []}
        elif subtype == "set_model":
            self.model = request.get("model") or DEFAULT_MODEL
            response = {"model": self.model}
        elif subtype == "set_permission_mode":
            self.permission_mode = request.get("mode") or "default"
            response = {"mode": self.permission_mode}
        emit(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": response},
            }
        )

    # -- turns ---------------------------------------------------------------------
    def state(self, state):
        if not self.state_events:
            return
        frame = {"type": "system", "subtype": "session_state_changed", "state": state}
        if self.state_host_only:
            frame["sdk_host_only"] = True
        frame["uuid"] = str(uuid.uuid4())
        frame["session_id"] = self.session_id
        emit(frame)

    def run(self):
        threading.Thread(target=self.reader, name="stdin", daemon=True).start()
        while True:
            turn = self.turns.get()
            if turn is None:
                break
            slow = _SLOWSTART_RE.match(user_text(turn.line).strip())
            if slow:
                time.sleep(float(slow.group(1)))
            with self.lock:
                self.current = turn
            try:
                self.run_turn(turn)
            finally:
                with self.lock:
                    self.current = None
            if self.exit_after_turn:
                break
        return 0

    def run_turn(self, turn):
        started = time.monotonic()
        self.state("running")
        emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": self.cwd,
                "session_id": self.session_id,
                "tools": [],
                "mcp_servers": [],
                "model": self.model,
                "permissionMode": self.permission_mode,
                "slash_commands": [],
                "apiKeySource": "ANTHROPIC_API_KEY",
                "claude_code_version": VERSION,
                "output_style": "default",
                "agents": [],
                "skills": [],
                "plugins": [],
                "capabilities": [],
                "uuid": str(uuid.uuid4()),
                "fast_mode_state": "off",
            }
        )
        text = user_text(turn.line)
        keep_notes(turn.line)
        if turn.line.get("origin"):  # a turn of its own: the CLI shows the message it injected
            emit({"type": "user", "message": turn.line["message"], "parent_tool_use_id": None,
                  "origin": turn.line["origin"], "session_id": self.session_id,
                  "uuid": str(uuid.uuid4())})
        reply = self.reply_for(text, turn)
        if reply is None:  # interrupted
            self.finish_aborted(turn, started)
            return
        emit(
            {
                "type": "assistant",
                "message": {
                    "id": "msg_fake_%s" % uuid.uuid4().hex[:12],
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": reply}],
                    "model": self.model,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
            }
        )
        self.completed += 1
        self.cost = round(self.cost + COST_PER_TURN, 6)
        elapsed = int((time.monotonic() - started) * 1000)
        result = {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 1,
            "result": reply,
            "stop_reason": "end_turn",
            "session_id": self.session_id,
            "duration_ms": elapsed,
            "duration_api_ms": elapsed,
            "total_cost_usd": self.cost,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
            "modelUsage": self.model_usage(),
            "permission_denials": [],
            "terminal_reason": "completed",
            "api_error_status": None,
            "uuid": str(uuid.uuid4()),
        }
        self.add_user_uuid(result, turn)
        if turn.line.get("origin"):
            result["origin"] = turn.line["origin"]
        emit(result)
        self.state("idle")

    def inject(self, delay, text):
        """A turn the CLI begins on its own, `delay` seconds from now."""
        def later():
            time.sleep(delay)
            self.turns.put(Turn({"type": "user", "origin": INJECTED_ORIGIN,
                                 "message": {"role": "user", "content": text}}))

        threading.Thread(target=later, name="inject", daemon=True).start()

    def ask_tool(self, name, tool_input):
        resp = self.request({"subtype": "can_use_tool", "tool_name": name, "input": tool_input,
                             "permission_suggestions": None, "blocked_path": None})
        decision = resp.get("response") or {}
        if decision.get("behavior") == "allow":
            return "TOOL ALLOWED"
        return "TOOL DENIED: %s" % decision.get("message", "")

    def finish_aborted(self, turn, started):
        emit(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "text", "text": "[Request interrupted by user]"}],
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
            }
        )
        elapsed = int((time.monotonic() - started) * 1000)
        result = {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "num_turns": 1,
            "stop_reason": None,
            "session_id": self.session_id,
            "duration_ms": elapsed,
            "duration_api_ms": 0,
            "total_cost_usd": self.cost,
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "modelUsage": self.model_usage(),
            "permission_denials": [],
            "terminal_reason": "aborted_streaming",
            "errors": ["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],
            "uuid": str(uuid.uuid4()),
        }
        self.add_user_uuid(result, turn)
        emit(result)
        self.state("idle")

    @staticmethod
    def add_user_uuid(result, turn):
        if turn.line.get("uuid"):
            result["user_message_uuid"] = turn.line["uuid"]
            result["user_message_uuids"] = [turn.line["uuid"]]

    def model_usage(self):
        if not self.completed:
            return {}
        return {
            self.model: {
                "inputTokens": INPUT_TOKENS * self.completed,
                "outputTokens": OUTPUT_TOKENS * self.completed,
                "costUSD": self.cost,
            }
        }

    # -- our control requests: the SDK's in-process MCP server ----------------------
    def request(self, body, timeout=30):
        self.next_id += 1
        request_id = "fake_req_%d" % self.next_id
        waiter = [threading.Event(), None]
        self.pending[request_id] = waiter
        emit({"type": "control_request", "request_id": request_id, "request": body})
        if not waiter[0].wait(timeout):
            raise RuntimeError("no control_response to %s" % request_id)
        del self.pending[request_id]
        return waiter[1] or {}

    def mcp(self, tool, arguments):
        def rpc(method, params, notify=False):
            message = {"jsonrpc": "2.0", "method": method, "params": params}
            if not notify:
                message["id"] = self.next_id + 1
            resp = self.request({"subtype": "mcp_message", "server_name": "switchboard",
                                 "message": message})
            return ((resp.get("response") or {}).get("mcp_response") or {})

        if not self.mcp_ready:
            rpc("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                               "clientInfo": {"name": "fake-claude", "version": VERSION}})
            rpc("notifications/initialized", {}, notify=True)
            self.mcp_ready = True
        result = rpc("tools/call", {"name": tool, "arguments": arguments}).get("result") or {}
        return "\n".join(c.get("text", "") for c in result.get("content") or []
                         if isinstance(c, dict))

    def spam(self, count, targets):
        sent = 0
        with open("bus-sent.log", "a") as fh:
            for i in range(count):
                to = targets[i % len(targets)]
                text = self.mcp("send_message", {
                    "to": to, "type": "info", "body": "spam %d from %s" % (i, self.session_id),
                    "dedup_key": "%s-%d" % (self.session_id, i)})
                m = _SENT_ID_RE.match(text)
                if m:  # acknowledged by the bus: logged at once, as a real sender would
                    fh.write(m.group(1) + "\n")
                    fh.flush()
                    sent += 1
                else:  # refused: why, for whoever reads the workspace (a bench, a test)
                    with open("bus-refused.log", "a") as why:
                        why.write("%s: %s\n" % (to, " ".join(text.split())))
        return "SPAM SENT %d of %d" % (sent, count)

    def stream(self, count, turn):
        for i in range(count):
            if turn.abort.is_set():
                return None
            emit({"type": "assistant",
                  "message": {"id": "msg_fake_%d" % i, "type": "message", "role": "assistant",
                              "content": [{"type": "text", "text": "chunk %d" % i}],
                              "model": self.model, "stop_reason": None, "stop_sequence": None,
                              "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1}},
                  "parent_tool_use_id": None, "session_id": self.session_id,
                  "uuid": str(uuid.uuid4())})
        return "STREAMED %d" % count

    def bus_turn(self, items, turn):
        with open("bus-received.log", "a") as fh:
            fh.write("".join(i + "\n" for i, _, _ in items))
        replies = []
        for _msg_id, sender, body in items:
            body = body.strip()
            if body.startswith("PINGPONG "):
                k = int(body.split()[1]) + 1
                replies.append(self.mcp("send_message", {"to": sender, "type": "info",
                                                         "body": "PINGPONG %d" % k}))
            elif body.startswith(("MCP ", "SPAM ", "STREAM ")) or body == "CRASH" or (
                    len(items) == 1 and body.startswith("SLEEP ")):
                replies.append(self.reply_for(body, turn) or "")
        return "BUS: %d message(s)%s" % (len(items), "".join("\n" + r for r in replies))

    def reply_for(self, text, turn):
        """The reply text, or None if the turn was interrupted."""
        directive = text.strip()
        slow = _SLOWSTART_RE.match(directive)
        if slow:
            directive = directive[slow.end():].strip()
        while True:
            m = _SLEEP_RE.match(directive)
            if not m:
                break
            if turn.abort.wait(float(m.group(1))):
                return None
            rest = (m.group(2) or "").strip()
            if not rest:
                return "SLEPT %s" % m.group(1)
            directive = rest
        if turn.abort.is_set():
            return None
        if directive == "CRASH":
            sys.stderr.write("fake crash: boom\n")
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(3)
        if directive == "BG":
            child = subprocess.Popen(
                ["sh", "-c", "sleep 1000"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
            self.children.append(child)
            return "BG STARTED %d" % child.pid
        items = _BUS_RE.findall(directive)
        if items:
            return self.bus_turn(items, turn)
        return self.tool_reply(directive, turn)

    def tool_reply(self, directive, turn):
        """MCP, SPAM, STREAM, STDERR, else the echo."""
        m = _MCP_RE.match(directive)
        if m:
            return "MCP RESULT: " + self.mcp(m.group(1), json.loads(m.group(2)))
        m = _INJECT_RE.match(directive)
        if m:
            self.inject(float(m.group(1)), m.group(2))
            return "INJECT SCHEDULED"
        m = _ASKTOOL_RE.match(directive)
        if m:
            return self.ask_tool(m.group(1), json.loads(m.group(2)))
        m = _SPAM_RE.match(directive)
        if m:
            return self.spam(int(m.group(1)), m.group(2).split(","))
        m = _STREAM_RE.match(directive)
        if m:
            return self.stream(int(m.group(1)), turn)
        m = _STDERR_RE.match(directive)
        if m:
            sys.stderr.write(m.group(1) + "\n")
            sys.stderr.flush()
        return "ECHO: %s" % directive


def main(argv):
    opts = parse_args(argv)
    if opts["version"]:
        sys.stdout.write("%s (Claude Code)\n" % VERSION)
        sys.stdout.flush()
        return 0
    fake = FakeClaude(opts)

    # SIGTERM: exit 143 with no result, like the real CLI.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))

    # SIGINT: abort the running turn (error_during_execution), then exit 0.
    def on_sigint(*_):
        fake.exit_after_turn = True
        with fake.lock:
            if fake.current is not None:
                fake.current.abort.set()
            else:
                os._exit(0)

    signal.signal(signal.SIGINT, on_sigint)
    return fake.run()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    try:
        sys.stdout.flush()
    finally:
        os._exit(code)
