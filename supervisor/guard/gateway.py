"""The model gateway: the one place an agent's model requests go, and the only holder of the
real credential. Each agent's CLI gets `ANTHROPIC_BASE_URL` pointing here and a random token of
its own in place of the key; the gateway checks the token, the kill switch, the agent's rate and
budget, swaps the token for the real `x-api-key` or `Authorization`, and forwards to the
upstream (the Anthropic API, or the operator's own `ANTHROPIC_BASE_URL`), streaming the answer
back unchanged while it reads the usage out of it. A token lives as long as the agent's process:
`/kill`, a stop, the kill switch and the process's end revoke it, and a response in flight is
cut with an error event. A refusal is an Anthropic-style JSON error, so the model is told why.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from supervisor.config import Settings
from supervisor.guard.egress import EgressProxy, Refusal
from supervisor.guard.gateway_usage import StreamUsage, Usage, usage_of_body

logger = logging.getLogger(__name__)

DEFAULT_UPSTREAM = "https://api.anthropic.com"
TOKEN_PREFIX = "sbg-"
# Not forwarded either way: the hop's own, and the credentials (ours are added, the agent's
# token never leaves the supervisor).
_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                  "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host",
                  "content-length"})
_REQUEST_DROP = _HOP | {"x-api-key", "authorization", "accept-encoding"}
_RESPONSE_DROP = _HOP | {"content-encoding"}
MAX_BODY_BYTES = 64 << 20  # a long conversation with images; the API's own limit is 32 MB
MAX_SOCKET_PATH = 107  # sun_path, less its terminating NUL


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where the gateway forwards and the credential it adds. `var` is the variable the
    agent's token goes in: the same kind the operator configured, so the CLI sends it the way
    it would have sent the key."""

    url: str
    header: str  # "x-api-key" or "authorization"
    value: str = field(repr=False)
    var: str  # ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN

    def credential(self) -> str:
        return self.value if self.header == "x-api-key" else f"Bearer {self.value}"


def upstream_of(settings: Settings) -> Upstream | None:
    """The credential the gateway can hold, or None: the gateway is off, or the agents run on
    the CLI's own login (a login cannot be swapped per request; docs/gateway.md)."""
    if not settings.model_gateway:
        return None
    env = settings.agent_env
    url = (env.get("ANTHROPIC_BASE_URL") or settings.anthropic_base_url
           or DEFAULT_UPSTREAM).rstrip("/")
    key = env.get("ANTHROPIC_API_KEY") or (settings.anthropic_api_key.value
                                           if settings.anthropic_api_key else None)
    if key:
        return Upstream(url, "x-api-key", key, "ANTHROPIC_API_KEY")
    token = env.get("ANTHROPIC_AUTH_TOKEN") or (settings.anthropic_auth_token.value
                                                if settings.anthropic_auth_token else None)
    if token:
        return Upstream(url, "authorization", token, "ANTHROPIC_AUTH_TOKEN")
    return None


class Refused(Exception):
    """A request the gateway will not forward: an HTTP status and the API's error type."""

    def __init__(self, status: int, kind: str, message: str, outcome: str,
                 retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.outcome = outcome
        self.retry_after_s = retry_after_s

    def response(self) -> web.Response:
        headers = {"retry-after": str(self.retry_after_s)} if self.retry_after_s else None
        return web.json_response(error_body(self.kind, self.message), status=self.status,
                                 headers=headers)


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": f"Switchboard: {message}"}}


@dataclass(slots=True, eq=False)
class _Flight:
    """One forwarded request: its task (cancelled if revoked before the answer began) and the
    upstream response (closed if revoked while it streams)."""

    task: asyncio.Task[Any] | None
    response: aiohttp.ClientResponse | None = None


@dataclass(slots=True)
class AgentCounts:
    """What one agent did through the gateway, since the supervisor started."""

    name: str
    requests: dict[str, int] = field(default_factory=dict)  # by outcome
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    streams: int = 0  # responses in flight now


@dataclass(slots=True, eq=False)
class _Grant:
    agent_id: str
    name: str
    live: bool = True
    flights: set[_Flight] = field(default_factory=set)
    recent: deque[float] = field(default_factory=deque)  # request times, the last minute


@dataclass(frozen=True, slots=True)
class GatewayView:
    """For /metrics and doctor: whether it runs, where, and each agent's counts."""

    active: bool
    detail: str
    upstream: str
    agents: tuple[tuple[str, AgentCounts], ...]  # (agent id, counts)
    refused_unknown: int  # requests with no token, or one that was never or is no longer good


# (budget, spent today as recorded) for an agent, or None when it has no budget.
BudgetLookup = Callable[[str], Awaitable[tuple[float, float] | None]]


class ModelGateway:
    """An aiohttp server on a loopback port of its own. `start`/`close` are idempotent."""

    def __init__(self, settings: Settings, *, halted: Callable[[], bool],
                 budget: BudgetLookup | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 day: Callable[[], int] | None = None,
                 on_refused: Refusal | None = None) -> None:
        self.settings = settings
        self.upstream = upstream_of(settings)
        self._halted = halted
        self._budget = budget
        self._clock = clock
        self._day = day or (lambda: int(time.time() // 86400))
        self._grants: dict[bytes, _Grant] = {}
        self._by_agent: dict[str, bytes] = {}
        self.counts: dict[str, AgentCounts] = {}
        self._spent: dict[str, tuple[int, float]] = {}  # agent id -> (UTC day, USD that day)
        self.refused_unknown = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""
        self.port = 0
        # The same server on a Unix socket: an agent in a network namespace of its own reaches
        # it through the relay bound to this (supervisor/process/network.py); None if the path
        # is too long for a socket.
        self.socket: Path | None = None
        # allowlist mode's way to other hosts, for agents with a live token (guard/egress.py)
        self.proxy = EgressProxy(settings, self.agent_of, on_refused)

    @property
    def active(self) -> bool:
        return self.upstream is not None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self.upstream is None or self._runner is not None:
            return
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.socket = await unix_site(runner, self.settings.run_dir / "gateway.sock")
        proxy_path = self.settings.run_dir / "egress.sock"
        if self.settings.egress == "allowlist":
            if len(os.fsencode(proxy_path)) <= MAX_SOCKET_PATH:
                await self.proxy.start(proxy_path)
            else:  # agents then reach the model alone, as in model-only
                logger.warning("egress proxy not started: socket path too long: %s", proxy_path)
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            connector=aiohttp.TCPConnector(limit=0), auto_decompress=True)
        logger.info("model gateway listening url=%s upstream=%s", self.url, self.upstream.url)

    async def close(self) -> None:
        self.revoke_all()
        runner, self._runner = self._runner, None
        session, self._session = self._session, None
        await self.proxy.close()
        if runner is not None:
            await runner.cleanup()
        if session is not None:
            await session.close()
        if self.socket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket)

    # -- tokens ----------------------------------------------------------------------------

    def issue(self, agent_id: str, name: str) -> dict[str, str]:
        """A fresh token for an agent's new process (its last one revoked) and the variables
        that send its CLI here with it. Empty when the gateway is off."""
        if self.upstream is None or not self.url:
            return {}
        self.revoke(agent_id)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        digest = _digest(token)
        self._grants[digest] = _Grant(agent_id, name)
        self._by_agent[agent_id] = digest
        self.counts.setdefault(agent_id, AgentCounts(name))
        return {"ANTHROPIC_BASE_URL": self.url, self.upstream.var: token}

    def revoke(self, agent_id: str, token: str | None = None) -> int:
        """The agent's token (only if it is still `token`, when given) stops working now; a
        response in flight ends with an error event (within the time the stream takes to
        notice a closed upstream: milliseconds)."""
        digest = self._by_agent.get(agent_id)
        if digest is None or (token is not None and digest != _digest(token)):
            return 0
        del self._by_agent[agent_id]
        grant = self._grants.pop(digest, None)
        if grant is None:
            return 0
        grant.live = False
        for flight in list(grant.flights):
            if flight.response is not None:
                flight.response.close()
            elif flight.task is not None:
                flight.task.cancel()
        return 1

    def agent_of(self, token: str) -> tuple[str, str] | None:
        """(agent id, name) a live token was issued to (the egress proxy's credential)."""
        grant = self._grants.get(_digest(token)) if token.startswith(TOKEN_PREFIX) else None
        return (grant.agent_id, grant.name) if grant is not None and grant.live else None

    def revoke_all(self) -> int:
        return sum(self.revoke(a) for a in list(self._by_agent))

    async def revoke_everything(self) -> int:
        """The kill switch's revoker (layer 3): every agent's token."""
        return self.revoke_all()

    def view(self) -> GatewayView:
        if self.upstream is None:
            why = ("off (model_gateway = false)" if not self.settings.model_gateway else
                   "off: no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN to hold (the agents use "
                   "the CLI's own login, copied into each agent's config directory)")
            return GatewayView(False, why, "", (), self.refused_unknown)
        detail = (f"on at {self.url or '(not started)'}, forwarding to {self.upstream.url}; "
                  "agents hold a token of their own, never the key")
        agents = tuple((a, c) for a, c in self.counts.items())
        return GatewayView(True, detail, self.upstream.url, agents, self.refused_unknown)

    # -- requests ----------------------------------------------------------------------------

    def _grant_of(self, request: web.Request) -> _Grant:
        raw = request.headers.get("x-api-key") or ""
        if not raw:
            auth = request.headers.get("authorization", "")
            raw = auth[7:] if auth[:7].lower() == "bearer " else ""
        grant = self._grants.get(_digest(raw)) if raw.startswith(TOKEN_PREFIX) else None
        if grant is None or not grant.live:
            self.refused_unknown += 1
            raise Refused(401, "authentication_error", "this token is not (or no longer) valid "
                          "at the model gateway: the agent was stopped or killed, or the token "
                          "was never issued", "refused_token")
        return grant

    async def _admit(self, grant: _Grant) -> None:
        if self._halted():
            raise Refused(403, "permission_error", "the kill switch is on: no model request is "
                          "forwarded until the operator lifts it", "refused_halted")
        now = self._clock()
        recent = grant.recent
        while recent and now - recent[0] >= 60.0:
            recent.popleft()
        limit = self.settings.gateway_requests_per_minute
        if limit and len(recent) >= limit:
            wait = max(1, int(60.0 - (now - recent[0])) + 1)
            raise Refused(429, "rate_limit_error", f"{grant.name} made {limit} model requests "
                          f"in the last minute (gateway_requests_per_minute); retry in {wait}s",
                          "refused_rate", retry_after_s=wait)
        recent.append(now)
        if self._budget is None:
            return
        found = await self._budget(grant.agent_id)
        if found is None:
            return
        budget, recorded = found
        spent = max(recorded, self._spent_today(grant.agent_id))
        if spent > budget:
            raise Refused(403, "permission_error", f"{grant.name} crossed its daily budget "
                          f"(${spent:.4f} of ${budget:.4f}); the operator can raise it",
                          "refused_budget")

    def _spent_today(self, agent_id: str) -> float:
        day, usd = self._spent.get(agent_id, (0, 0.0))
        return usd if day == self._day() else 0.0

    def _count(self, grant: _Grant, outcome: str) -> None:
        c = self.counts.setdefault(grant.agent_id, AgentCounts(grant.name))
        c.requests[outcome] = c.requests.get(outcome, 0) + 1

    def _account(self, grant: _Grant, usage: Usage) -> None:
        c = self.counts.setdefault(grant.agent_id, AgentCounts(grant.name))
        cost = usage.cost_usd()
        c.input_tokens += usage.input_tokens
        c.output_tokens += usage.output_tokens
        c.cache_read_tokens += usage.cache_read_tokens
        c.cache_write_tokens += usage.cache_write_tokens
        c.cost_usd += cost
        self._spent[grant.agent_id] = (self._day(), self._spent_today(grant.agent_id) + cost)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            grant = self._grant_of(request)
        except Refused as r:
            return r.response()
        try:
            await self._admit(grant)
        except Refused as r:
            self._count(grant, r.outcome)
            logger.info("model request refused agent=%s outcome=%s", grant.agent_id, r.outcome)
            return r.response()
        flight = _Flight(asyncio.current_task())
        grant.flights.add(flight)
        counts = self.counts.setdefault(grant.agent_id, AgentCounts(grant.name))
        counts.streams += 1
        try:
            return await self._forward(request, grant, flight)
        except asyncio.CancelledError:
            if grant.live:
                raise  # the agent went away: aiohttp's own cancel
            self._count(grant, "revoked")
            return Refused(401, "authentication_error", "the agent's token was revoked",
                           "revoked").response()
        finally:
            counts.streams -= 1
            grant.flights.discard(flight)

    async def _forward(self, request: web.Request, grant: _Grant,
                       flight: _Flight) -> web.StreamResponse:
        assert self.upstream is not None and self._session is not None
        up = self.upstream
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _REQUEST_DROP}
        headers["accept-encoding"] = "identity"  # the usage is read from what goes by
        headers["x-api-key" if up.header == "x-api-key" else "authorization"] = up.credential()
        try:
            resp = await self._session.request(request.method, up.url + request.rel_url.path_qs,
                                               headers=headers, data=body,
                                               allow_redirects=False)
        except aiohttp.ClientError as exc:
            self._count(grant, "upstream_error")
            return Refused(502, "api_error", f"the model gateway could not reach {up.url}: "
                           f"{exc}", "upstream_error").response()
        flight.response = resp
        try:
            if not grant.live:
                raise asyncio.CancelledError
            out_headers = {k: v for k, v in resp.headers.items()
                           if k.lower() not in _RESPONSE_DROP}
            if "text/event-stream" not in resp.headers.get("content-type", ""):
                data = await resp.read()
                if resp.status == 200 and (usage := usage_of_body(data)) is not None:
                    self._account(grant, usage)
                self._count(grant, "ok" if resp.status < 400 else f"upstream_{resp.status}")
                return web.Response(status=resp.status, body=data, headers=out_headers)
            return await self._stream(request, grant, resp, out_headers)
        finally:
            resp.release()

    async def _stream(self, request: web.Request, grant: _Grant, resp: aiohttp.ClientResponse,
                      headers: Mapping[str, str]) -> web.StreamResponse:
        out = web.StreamResponse(status=resp.status, headers=headers)
        await out.prepare(request)
        reader = StreamUsage()
        cut = False
        try:
            async for chunk in resp.content.iter_any():
                reader.feed(chunk)
                await out.write(chunk)
        except (TimeoutError, aiohttp.ClientError) as exc:
            cut = True
            if grant.live:
                logger.warning("model stream from upstream broke agent=%s: %s",
                               grant.agent_id, exc)
        if not grant.live:
            cut = True
        if reader.seen:
            self._account(grant, reader.usage)
        if cut:
            why = ("the agent's token was revoked (killed, stopped or the kill switch)"
                   if not grant.live else "the upstream stream broke off")
            self._count(grant, "revoked" if not grant.live else "upstream_error")
            with contextlib.suppress(ConnectionError, RuntimeError):
                await out.write(b"event: error\ndata: " + orjson.dumps(error_body(
                    "api_error" if grant.live else "authentication_error", why)) + b"\n\n")
        else:
            self._count(grant, "ok" if resp.status < 400 else f"upstream_{resp.status}")
        with contextlib.suppress(ConnectionError, RuntimeError):
            await out.write_eof()
        return out


async def unix_site(runner: web.AppRunner, path: Path) -> Path | None:
    """Serve `runner` on a Unix socket at `path` too, connectable by the agents' uid (it is seen
    only where it is bound into a sandbox: the data directory is hidden). None if too long."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        logger.warning("socket path too long for a Unix socket, not served: %s", path)
        return None
    os.makedirs(path.parent, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    await web.UnixSite(runner, str(path)).start()
    os.chmod(path, 0o666)
    return path


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


__all__ = ["AgentCounts", "DEFAULT_UPSTREAM", "GatewayView", "ModelGateway", "Refused",
           "Upstream", "error_body", "upstream_of"]
