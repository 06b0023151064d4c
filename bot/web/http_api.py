"""The HTTP API for scripts: every chat command as JSON, with the same roles, rate limits and
audit rows as chat, because every call runs through the same command runner.

    POST /api/v1/<command>   {"<param>": value, ...}   any command
    GET  /api/v1/<command>?<param>=value                the commands that only read
    GET  /api/v1/openapi.json                           this API, described (from the registry)

A call is authenticated by `Authorization: Bearer <token>` (`/token new <label>` in chat) or by
a web console session (then a POST carries its CSRF token). The answer is the command's reply
as data: `ok`, its text, its blocks, buttons and files, and for the reading commands the
supervisor's own read models under `data`. A refused command answers 422 with the reason and
what to do; a call that is not understood, 400; no or a revoked token, 401; a role too low, 403.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.web.auth import refusal, require, require_change
from commands.base import Arg, Opt, Param, Reply, Rest, Role
from commands.dispatcher import COMMANDS, REGISTRY
from supervisor.api import SupervisorError
from supervisor.sanitize import clean

if TYPE_CHECKING:
    from bot.web.listener import Listener, WebContext

logger = logging.getLogger(__name__)

PREFIX = "/api/v1"
# The commands that only look: served on GET as well (never a change on a GET).
READS = frozenset({"agents", "status", "logs", "cost", "pending", "help", "messages", "inbox",
                   "audit", "search", "results"})
MAX_BODY = 1024 * 1024


class BadCall(Exception):
    """The call was not understood (not a command, malformed JSON, a wrong parameter)."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def command_line(name: str, params: tuple[Param, ...], values: Mapping[str, Any]) -> str:
    """The chat line a JSON call stands for, every value quoted so it stays one argument: the
    same parser, checks and audit row as when the operator types it."""
    known = {p.name for p in params}
    unknown = sorted(set(values) - known)
    if unknown:
        raise BadCall(f"/{name} has no parameter {', '.join(unknown)}",
                      f"its parameters are: {', '.join(sorted(known)) or 'none'} "
                      f"(see {PREFIX}/openapi.json)")
    parts = [f"/{name}"]
    for p in params:  # options first: after them the positionals, the rest last
        if isinstance(p, Opt) and values.get(p.name) not in (None, False, ""):
            value = values[p.name]
            if p.switch:
                if value is not True:
                    raise BadCall(f"{p.name} is a switch", "send true or leave it out")
                parts.append(p.flag)
            else:
                parts.append(f"{p.flag}={_quote(_text(p.name, value))}")
    positional = [p for p in params if not isinstance(p, Opt)]
    given = [i for i, p in enumerate(positional) if values.get(p.name) not in (None, "")]
    last = given[-1] if given else -1
    rest: str | None = None
    for i, p in enumerate(positional):
        value = values.get(p.name)
        if value is None or value == "":
            if i < last or (p.required and not isinstance(p, Rest)) or (
                    isinstance(p, Rest) and p.required):
                raise BadCall(f"/{name} needs {p.name} ({p.help})",
                              f"add \"{p.name}\" to the call")
            continue
        if isinstance(p, Rest):
            rest = _text(p.name, value)
            if rest.lstrip().startswith("--"):
                raise BadCall(f"{p.name} may not start with --", "reword its start")
        elif isinstance(p, Arg):
            whole = isinstance(value, int) and not isinstance(value, bool) and p.kind is int
            text = str(value) if whole else _text(p.name, value)
            parts.append(_quote(text))
    if rest is not None:
        parts.append(rest)
    return " ".join(parts)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BadCall(f"{name} must be text, got {type(value).__name__}", "send it as a string")
    return value


def reply_json(reply: Reply) -> dict[str, Any]:
    return {
        "ok": reply.ok,
        "text": reply.plain(),
        "blocks": [{"text": b.text, "style": b.style} for b in reply.blocks],
        "buttons": [[{"label": b.label, "command": b.command, "confirm": b.confirm}
                     for b in row] for row in reply.buttons],
        "files": [{"filename": a.filename, "mime": a.mime,
                   "content_base64": base64.b64encode(a.content).decode()}
                  for a in reply.attachments],
    }


def _plain(value: Any) -> Any:
    """A read model as JSON data (frozen dataclasses, tuples, enums)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


async def _data(ctx: WebContext, name: str, values: Mapping[str, Any]) -> Any:
    """The read model behind a reading command, for scripts that want fields, not text."""
    api = ctx.api
    try:
        if name in ("agents", "status"):
            return {"agents": _plain(api.agents(include_ended=values.get("which") == "all")),
                    "halted": _plain(api.halt_state())}
        if name == "pending":
            return {"pending": _plain(await api.pending())}
        if name == "cost":
            return {"spend": _plain(await api.spend(values.get("agent") or None))}
        if name == "logs" and values.get("agent"):
            return {"log": _plain(await api.logs(str(values["agent"])))}
    except SupervisorError:
        return None  # the reply already says what was wrong
    return None


async def _values(request: web.Request) -> dict[str, Any]:
    if request.method == "GET":
        return dict(request.query)
    if not request.body_exists:
        return {}
    if request.content_type != "application/json":
        raise BadCall(f"the body must be JSON, not {request.content_type}",
                      "send Content-Type: application/json")
    raw = await request.read()
    try:
        values = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadCall(f"the body is not valid JSON ({exc})",
                      "send an object of parameters") from None
    if not isinstance(values, dict):
        raise BadCall("the body must be a JSON object of parameters", 'e.g. {"agent": "dev"}')
    return values


def _handler(listener: Listener) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        ctx = listener.context()
        name = request.match_info["command"].lower()
        cmd = COMMANDS.get(name)
        if cmd is None:
            raise refusal(request, 404, f"There is no command {name!r}.",
                          f"The commands are listed in {PREFIX}/openapi.json.")
        if request.method == "GET" and name not in READS:
            raise web.HTTPMethodNotAllowed("GET", ["POST"], content_type="application/json",
                                           text=json.dumps({
                                               "ok": False, "error": f"/{name} changes "
                                               "something: use POST.", "fix": f"POST "
                                               f"{PREFIX}/{name} with a JSON body."}))
        if request.method == "POST":
            who, _form = await require_change(request, ctx, Role.VIEWER)
        else:
            who = await require(request, ctx, Role.VIEWER)
        try:
            values = await _values(request)
            cleaned = clean(command_line(name, cmd.params, values))
            if cleaned.problem:
                raise BadCall(cleaned.problem, "send less: a file goes through /file in chat")
        except BadCall as exc:
            await ctx.api.audit(who.caller, name, "(not understood)", ok=False, result=exc.what)
            raise refusal(request, 400, exc.what, exc.fix) from None
        reply = await ctx.commands(who.caller, cleaned.text)
        body = reply_json(reply)
        if reply.ok and name in READS:
            data = await _data(ctx, name, values)
            if data is not None:
                body["data"] = data
        status = 200 if reply.ok else (403 if who.caller.role < cmd.role else 422)
        return web.json_response(body, status=status)
    return handler


def openapi(public_url: str) -> dict[str, Any]:
    """The API described, from the command registry (so it cannot drift from the commands)."""
    paths: dict[str, Any] = {}
    for cmd in REGISTRY:
        props: dict[str, Any] = {}
        required: list[str] = []
        for p in cmd.params:
            kind = "boolean" if isinstance(p, Opt) and p.switch else (
                "integer" if isinstance(p, Arg) and p.kind is int else "string")
            props[p.name] = {"type": kind, "description": p.help}
            if isinstance(p, (Arg, Rest)) and p.required:
                required.append(p.name)
        schema: dict[str, Any] = {"type": "object", "properties": props,
                                  "additionalProperties": False}
        if required:
            schema["required"] = required
        op = {"summary": cmd.summary, "x-role": cmd.role.name.lower(),
              "operationId": cmd.name,
              "responses": {"200": {"$ref": "#/components/responses/Reply"},
                            "400": {"$ref": "#/components/responses/Problem"},
                            "401": {"$ref": "#/components/responses/Problem"},
                            "403": {"$ref": "#/components/responses/Problem"},
                            "422": {"$ref": "#/components/responses/Reply"}}}
        item: dict[str, Any] = {"post": {**op, "requestBody": {
            "content": {"application/json": {"schema": schema}}}}}
        if cmd.name in READS:
            item["get"] = {**op, "operationId": f"{cmd.name}_get", "parameters": [
                {"name": k, "in": "query", "required": k in required,
                 "schema": {"type": v["type"]}, "description": v["description"]}
                for k, v in props.items()]}
        paths[f"{PREFIX}/{cmd.name}"] = item
    reply = {"type": "object", "properties": {
        "ok": {"type": "boolean"}, "text": {"type": "string"},
        "blocks": {"type": "array", "items": {"type": "object"}},
        "buttons": {"type": "array", "items": {"type": "array"}},
        "files": {"type": "array", "items": {"type": "object"}},
        "data": {"type": "object", "description": "read models, for reading commands"}}}
    problem = {"type": "object", "properties": {
        "ok": {"type": "boolean"}, "error": {"type": "string"}, "fix": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Switchboard HTTP API", "version": "1",
                 "description": "Every chat command as JSON, with the operator's role; see "
                                "docs/http-api.md."},
        "servers": [{"url": public_url or "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "/token new <label> in chat"}},
            "responses": {
                "Reply": {"description": "the command's reply",
                          "content": {"application/json": {"schema": reply}}},
                "Problem": {"description": "what was wrong and what to do",
                            "content": {"application/json": {"schema": problem}}}}},
    }


def _openapi(listener: Listener) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(_request: web.Request) -> web.Response:
        ctx = listener.context()
        return web.json_response(openapi(ctx.public_url))
    return handler


def install(app: web.Application, listener: Listener) -> None:
    app.router.add_get(f"{PREFIX}/openapi.json", _openapi(listener))
    handler = _handler(listener)
    app.router.add_get(PREFIX + "/{command}", handler)
    app.router.add_post(PREFIX + "/{command}", handler)


__all__ = ["PREFIX", "READS", "BadCall", "command_line", "install", "openapi", "reply_json"]
