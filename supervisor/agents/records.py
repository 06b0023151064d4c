"""Pure translations of the SDK's messages: into the event rows we store and the outputs we
publish, and from cumulative cost counters into one turn's deltas. No I/O, no state."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from store.events import json_encoder
from supervisor.guard.describe import summarize_tool

SUMMARY_CHARS = 2000
RESULT_PREVIEW_CHARS = 500
OUTPUT_CHARS = 2000

NO_TOOL = ""  # `tool` value meaning: the tool finished


# Named tuples, not frozen dataclasses: one of each per SDK message, on the record path, and a
# tuple is made in a fraction of the time.
class Output(NamedTuple):
    kind: str  # text | tool_use | tool_result
    text: str


class EventRecord(NamedTuple):
    """What one SDK message means for us."""

    kind: str  # the stored event kind: system, assistant, user, result...
    summary: str
    data: str  # the message as JSON (data_json)
    outputs: tuple[Output, ...] = ()
    session_id: str | None = None  # set by system/init
    tool: str | None = None  # a tool started (its name), NO_TOOL when one finished, else None


def block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


# Each dataclass type's converter, made once from its fields: what orjson calls for it.
_MAKERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _maker(cls: type) -> Callable[[Any], dict[str, Any]]:
    """A function that makes the dict of an instance of `cls`: each field that is not None
    (None says nothing a missing key does not), as it is (the encoder comes back for what it
    holds). Built once per type, as source, so that a message costs one call and no loop
    over its fields."""
    names = [f.name for f in dataclasses.fields(cls) if f.name.isidentifier()]
    body = "".join(f"    x = m.{n}\n    if x is not None:\n        d[{n!r}] = x\n"
                   for n in names)
    namespace: dict[str, Any] = {}
    exec(f"def make(m):\n    d = {{}}\n{body}    return d\n", namespace)  # noqa: S102
    maker: Callable[[Any], dict[str, Any]] = namespace["make"]
    _MAKERS[cls] = maker
    return maker


def _default(v: Any) -> Any:
    """What the encoders call for what they cannot write: a dataclass (an SDK message, a
    content block) becomes its fields' dict, anything else its str()."""
    maker = _MAKERS.get(v.__class__)
    if maker is not None:
        return maker(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _maker(v.__class__)(v)
    return str(v)


_encode = json_encoder(_default, orjson.OPT_PASSTHROUGH_DATACLASS)


def data_json(msg: Any) -> str:
    """An SDK message as the JSON `dataclasses.asdict` and json.dumps would give, less its
    fields that are None, in one call to orjson (which asks `_default` for each dataclass in
    it): no dict tree of the message is built on the event loop, nothing deep-copied (asdict
    was about a tenth of the record path's CPU). What orjson refuses (a lone surrogate, an
    integer past 64 bits) goes through the standard encoder. Not a dataclass: {"repr": ...}."""
    if msg.__class__ not in _MAKERS and (
            not dataclasses.is_dataclass(msg) or isinstance(msg, type)):
        return json.dumps({"repr": repr(msg)})
    return _encode(msg)


_KINDS: dict[type, str] = {}


# Records and outputs made from a tuple without their named tuples' generated __new__ (a
# Python frame, and keyword defaults, per call): one record and an output or two per SDK
# message, on every agent's record path. The same objects EventRecord(...) and Output(...) make.
_make: Any = tuple.__new__


def record_of(msg: Any) -> EventRecord:
    cls = msg.__class__
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = cls.__name__.removesuffix("Message").lower() or "message"
    data = data_json(msg)
    if cls is AssistantMessage or isinstance(msg, AssistantMessage):  # the commonest first
        parts: list[str] = []
        outputs: list[Output] = []
        tool: str | None = None
        for block in msg.content:
            bcls = block.__class__
            if bcls is TextBlock or isinstance(block, TextBlock):
                text = block.text
                if text and not text.isspace():
                    parts.append(text)
                    outputs.append(_make(Output, ("text", text)))
            elif bcls is ToolUseBlock or isinstance(block, ToolUseBlock):
                line = summarize_tool(block.name, block.input)
                tool = block.name
                parts.append(f"[tool] {line}")
                outputs.append(_make(Output, ("tool_use", line)))
        summary = parts[0] if len(parts) == 1 else "\n".join(parts)
        if len(summary) > SUMMARY_CHARS:
            summary = summary[:SUMMARY_CHARS]
        record: EventRecord = _make(EventRecord, (kind, summary, data, tuple(outputs), None,
                                                  tool))
        return record
    if isinstance(msg, UserMessage) and isinstance(msg.content, list):
        summary = ""
        outputs = []
        tool = None
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                text = block_text(block.content)
                summary = (f"[result{' error' if block.is_error else ''}] "
                           f"{text[:RESULT_PREVIEW_CHARS]}")
                tool = NO_TOOL
                outputs.append(_make(Output, ("tool_result", text[:OUTPUT_CHARS])))
        record = _make(EventRecord, (kind, summary[:SUMMARY_CHARS], data, tuple(outputs), None,
                                     tool))
        return record
    if isinstance(msg, SystemMessage) and msg.subtype == "init":
        sid = msg.data.get("session_id")
        return EventRecord(kind, f"session {sid}", data, session_id=sid or None)
    if isinstance(msg, ResultMessage):
        text = msg.result or "; ".join(msg.errors or [])
        return EventRecord(kind, f"[{msg.subtype}] {text[:RESULT_PREVIEW_CHARS]}", data)
    return EventRecord(kind, "", data)


ModelCosts = dict[str, tuple[float, int, int]]  # model -> (usd, input tokens, output tokens)


def cost_delta(baseline: dict[str, float], msg: ResultMessage,
               model: str | None) -> tuple[float, ModelCosts, dict[str, float]]:
    """total_cost_usd and modelUsage are cumulative per process (and restored on resume): turn
    them into this turn's deltas. Returns (usd, per model, the new baseline)."""
    new = dict(baseline)

    def delta(key: str, value: float) -> float:
        base = new.get(key, 0.0)
        new[key] = value
        return value - base if value >= base else value  # a fresh process starts from zero

    total = delta("__total__", float(msg.total_cost_usd or 0.0))
    per_model: ModelCosts = {}
    for name, usage in (msg.model_usage or {}).items():
        u: dict[str, Any] = dict(usage) if isinstance(usage, dict) else {}
        per_model[name] = (
            delta(f"{name}:usd", float(u.get("costUSD") or 0.0)),
            int(delta(f"{name}:in", float(u.get("inputTokens") or 0))),
            int(delta(f"{name}:out", float(u.get("outputTokens") or 0))),
        )
    if not per_model and total:
        totals = msg.usage or {}
        per_model[model or "default"] = (
            total, int(totals.get("input_tokens") or 0), int(totals.get("output_tokens") or 0))
    return total, per_model, new


# Passing API errors: the CLI retries them itself (up to CLAUDE_CODE_MAX_RETRIES), and the
# runner continues a turn they still failed. 529 (overloaded) is one of them, like 500.
RETRYABLE_API_STATUSES = frozenset({429, 500, 502, 503, 504, 529})


def retryable_api_error(msg: ResultMessage) -> int | None:
    """The HTTP status of a result that an API error ended and that is worth retrying."""
    status = getattr(msg, "api_error_status", None)
    if not msg.is_error or not isinstance(status, int):
        return None
    return status if status in RETRYABLE_API_STATUSES else None


# The CLI's words when it has no credentials, or the API refused them: "/login" is the CLI's
# own interactive command, which no agent here can run.
CLI_LOGIN_HINTS = ("Not logged in", "Please run /login", "Invalid API key")
NO_CREDENTIALS_FIX = (
    "Switchboard: the agent has no working Claude credentials (/login is a command of the "
    "claude CLI's own terminal, not of Switchboard). Set ANTHROPIC_API_KEY (or "
    "ANTHROPIC_AUTH_TOKEN) where Switchboard runs or in [agent_env] of switchboard.toml, or "
    "log in once with the bundled CLI's `auth login` as the user that runs Switchboard "
    "(`switchboard doctor` names the CLI and checks the credentials); then restart Switchboard "
    "and /ask the agent again. `switchboard demo` shows the whole flow with no key.")


def in_switchboard_terms(text: str) -> str:
    """A turn's error as the operator can act on it: the CLI's "Please run /login" gets what
    to do here appended."""
    if any(hint in text for hint in CLI_LOGIN_HINTS) and NO_CREDENTIALS_FIX not in text:
        return f"{text}\n{NO_CREDENTIALS_FIX}"
    return text


def turn_status(msg: ResultMessage) -> str:
    """ok, interrupted or error, decided by subtype and is_error (an API error is 'success')."""
    if msg.subtype == "success" and not msg.is_error:
        return "ok"
    return "interrupted" if "abort" in (msg.terminal_reason or "") else "error"
