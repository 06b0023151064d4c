"""The HTTP listener: /healthz, /readyz, /metrics, and the webhooks front ends mount (Telegram's
today), on one aiohttp server inside Switchboard's event loop. A service of the composition
root, on where `http_port` (or PORT) says, or where Telegram's webhook settings say."""

# aiohttp.web rather than starlette + uvicorn: its AppRunner/TCPSite serve on the loop that is
# already running and touch no signal handler (uvicorn's Server installs its own for SIGINT and
# SIGTERM, which are the composition root's), and slack-bolt's async mode needs aiohttp anyway.

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from bot.kit.links import Links
from bot.kit.service import CommandRunner
from bot.metrics import LinkSample, Metrics, Sample
from supervisor.api import SupervisorAPI, SupervisorError
from supervisor.errors import ConfigError
from supervisor.service import TaskGroup

logger = logging.getLogger(__name__)

Webhook = Callable[[web.Request], Awaitable[web.StreamResponse]]
RESERVED = ("/healthz", "/readyz", "/metrics")
# Routes a part of the web side adds to the listener's application before it starts (the web
# console, the HTTP API): given the application and the listener, whose `context()` they read
# per request.
Install = Callable[[web.Application, "Listener"], None]


class Observed(Protocol):
    """What the listener reads of the running system (the Switchboard)."""

    api: SupervisorAPI | None
    links: Links
    stopping: asyncio.Event

    def web_context(self) -> WebContext | None:
        """What the web console and the HTTP API run with; None until the API is up."""
        ...


@dataclass(frozen=True, slots=True)
class WebContext:
    """What the web console's pages, its event stream and the HTTP API are given (read per
    request, so the listener can answer before the supervisor is up): the supervisor's API,
    the one command runner every front end uses (roles, rate limits, audit rows), the chat
    links, and the address the operator's browser reaches this listener at."""

    api: SupervisorAPI
    commands: CommandRunner
    links: Links
    public_url: str


class LoopLag:
    """How late the event loop runs a timer: a task that sleeps `interval_s` and notes how
    much longer than that it took. A blocked loop (a sync call, a busy handler) shows here."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.lag_s = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(self.interval_s)
            self.lag_s = max(0.0, loop.time() - started - self.interval_s)


async def readiness(app: Observed) -> dict[str, Any]:
    """Ready: the store takes writes and every configured front end is connected or
    retrying. A halted Switchboard is ready (halting is the operator's choice, and the kill
    switch is turned off through a front end, so it must stay reachable)."""
    problems: list[str] = []
    api = app.api
    if api is None:
        store = "not open yet"
        problems.append("store: not open yet (starting)")
    else:
        check = await api.check_store()
        store = check.detail
        if not check.ok:
            problems.append(f"store: {check.detail}")
    fronts: dict[str, dict[str, str]] = {}
    for link in app.links:
        fronts[link.platform] = {"state": str(link.state), "detail": link.detail}
        if not link.state.ready:
            problems.append(f"{link.platform}: {link.state}"
                            + (f" ({link.detail})" if link.detail else ""))
    if app.stopping.is_set():
        problems.append("shutting down")
    return {"ready": not problems, "not_ready": problems, "store": store,
            "frontends": fronts, "halted": bool(api and api.halted)}


class Listener:
    """The one HTTP server. `start` returns once it listens (a port in use stops
    Switchboard's start with a ConfigError naming the setting); front ends `mount` webhook
    paths at any time."""

    name = "http"

    def __init__(self, app: Observed, host: str, port: int, *,
                 lag_interval_s: float = 0.5) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.lag = LoopLag(lag_interval_s)
        self.metrics = Metrics()
        self._hooks: dict[str, Webhook] = {}
        self._installs: list[Install] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def mount(self, path: str, handler: Webhook) -> None:
        """POSTs to `path` go to `handler` (a front end's webhook)."""
        if path in RESERVED:
            raise ConfigError(f"a webhook cannot use the path {path}: it is the listener's own;"
                              " give the webhook URL another path")
        self._hooks[path] = handler

    def unmount(self, path: str) -> None:
        self._hooks.pop(path, None)

    def install(self, routes: Install) -> None:
        """Routes of a part of the web side (the console, the HTTP API); before `start`."""
        if self._runner is not None:
            raise RuntimeError("install routes before the listener starts")
        self._installs.append(routes)

    def context(self) -> WebContext:
        """What a page or an API call runs with; a 503 that says why while starting."""
        ctx = self.app.web_context()
        if ctx is None or self.app.stopping.is_set():
            raise web.HTTPServiceUnavailable(
                text="Switchboard is starting or stopping; try again in a few seconds.\n",
                headers={"Retry-After": "2"})
        return ctx

    async def start(self, group: TaskGroup) -> None:
        web_app = web.Application()
        web_app.router.add_get("/healthz", self._healthz)
        web_app.router.add_get("/readyz", self._readyz)
        web_app.router.add_get("/metrics", self._metrics)
        for install in self._installs:
            install(web_app, self)
        # Last: a POST no installed route took goes to a mounted webhook, if one is there.
        web_app.router.add_post("/{path:.*}", self._webhook)
        # A bounded stop: a scrape or a webhook still in flight gets two seconds.
        runner = web.AppRunner(web_app, handle_signals=False, access_log=None,
                               shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port} for health and metrics: "
                f"{exc.strerror or exc}; set SWITCHBOARD_HTTP_PORT (or PORT) to a free port, "
                "or SWITCHBOARD_HTTP_HOST to an address of this host") from None
        self._runner = runner
        if self.port == 0:  # tests: the port the system chose
            self.port = runner.addresses[0][1]
        group.spawn("loop-lag", self.lag.run())
        logger.info("http listener started address=%s:%d", self.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # -- handlers -------------------------------------------------------------------------------

    async def _healthz(self, _request: web.Request) -> web.Response:
        # Answering at all is the check: the loop runs. The lag says how well.
        return web.json_response({"alive": True, "loop_lag_s": round(self.lag.lag_s, 4)})

    async def _readyz(self, _request: web.Request) -> web.Response:
        report = await readiness(self.app)
        return web.json_response(report, status=200 if report["ready"] else 503)

    async def _metrics(self, _request: web.Request) -> web.Response:
        api = self.app.api
        if api is None:
            return web.Response(status=503, text="starting: the supervisor is not up yet\n")
        try:
            stats = await api.stats()
        except SupervisorError:  # the store closed under a scrape at shutdown
            logger.warning("metrics unavailable", exc_info=True)
            return web.Response(status=503, text="unavailable: the state database failed\n")
        sample = Sample(stats, tuple(LinkSample.of(x) for x in self.app.links), self.lag.lag_s)
        return web.Response(body=self.metrics.render(sample),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _webhook(self, request: web.Request) -> web.StreamResponse:
        handler = self._hooks.get(request.path)
        if handler is None:
            return web.Response(status=404, text="not found\n")
        return await handler(request)


__all__ = ["Install", "Listener", "LoopLag", "Observed", "WebContext", "Webhook", "readiness"]
