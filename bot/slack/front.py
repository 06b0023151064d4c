"""The Slack front end: slack-bolt's AsyncApp in Switchboard's event loop, over Socket Mode (by
default) or signed HTTP requests, kept up. The adapter (adapter.py) turns the kit's calls into
Web API calls and Block Kit; events.py turns Slack's events into the kit's messages and taps;
App Home and the modals are views.py. Who may do what, escalations and their copies, the live
cards and the outbox are the front-end kit's, as for Telegram, and what it is given of the rest
is its FrontContext."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.kit import FleetPort, FrontDesk, Pace
from bot.kit.context import FrontContext
from bot.kit.links import LinkState
from bot.slack import events, views
from bot.slack.adapter import SlackAdapter
from bot.slack.events import Seen
from bot.slack.settings import SlackSettings
from supervisor.clock import backoff_s
from supervisor.redact import SECRETS
from supervisor.service import Lifecycle

logger = logging.getLogger(__name__)

PLATFORM = "slack"

# Errors no retry can mend: the token is wrong, revoked, or lacks a scope the app needs.
FATAL = frozenset({"invalid_auth", "token_revoked", "missing_scope", "not_authed",
                   "account_inactive", "not_allowed_token_type"})
BACKOFF_FIRST_S, BACKOFF_MAX_S = 2.0, 30.0
# About one message a second per channel, with short bursts: Slack's own limit, kept in code.
CHANNEL_PACE = Pace(per_s=1.0, burst=4)


def reconnect_s(attempt: int) -> float:
    """How long to wait before reconnecting after `attempt` failures in a row: 2 s, 4 s, 8 s...
    up to 30 s."""
    return backoff_s(attempt, BACKOFF_FIRST_S, BACKOFF_MAX_S)


class SlackError(Exception):
    """Slack refused our tokens for good (FATAL): the front end stops, Switchboard goes on."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class SlackFrontend(Lifecycle):
    def __init__(self, context: FrontContext[SlackSettings], *, ping_interval_s: float = 10.0,
                 pace: Pace = CHANNEL_PACE) -> None:
        self.context = context
        self.fleet: FleetPort = context.fleet
        self.pace = pace
        self.settings = context.settings
        self.ping_interval_s = ping_interval_s
        self.seen = Seen()
        self.client: AsyncWebClient | None = None
        self.bolt: AsyncApp | None = None
        self.adapter: SlackAdapter | None = None
        self.desk: FrontDesk | None = None
        self.socket: AsyncSocketModeHandler | None = None
        self.home: views.Home | None = None
        self.bot_user_id = ""
        self.team_id = ""
        self._http: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.http_port: int | None = None
        self.link = context.links.link(PLATFORM)  # what /readyz and /metrics read

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        assert s.slack_bot_token is not None, "SLACK_BOT_TOKEN is not set"
        assert s.slack_channel, "SLACK_CHANNEL is not set"
        base = s.slack_api_url.rstrip("/") + "/" if s.slack_api_url else None
        kwargs: dict[str, Any] = {"base_url": base} if base else {}
        self.client = AsyncWebClient(token=s.slack_bot_token.value, **kwargs)
        try:
            who = await self.client.auth_test()
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error in FATAL:
                raise SlackError(error) from exc
            raise
        self.bot_user_id, self.team_id = str(who.get("user_id") or ""), str(who.get("team_id")
                                                                              or "")
        http = s.slack_mode == "http"
        secret = s.slack_signing_secret.value if s.slack_signing_secret else None
        # Named: without a name bolt takes its caller's file name from inspect.stack(), which
        # reads the source of every frame on the stack (tens of ms at each start).
        self.bolt = AsyncApp(name="switchboard", client=self.client, signing_secret=secret,
                             request_verification_enabled=http, process_before_response=False,
                             logger=logging.getLogger("slack_bolt.switchboard"))
        self.adapter = SlackAdapter(self.client, s.slack_channel)
        self.desk = FrontDesk(self.adapter, self.fleet, self.context.commands,
                              admin_ids=s.slack_admin_ids, card_interval_s=s.slack_card_interval_s,
                              threads=True, pace=self.pace, stats=self.link.stats,
                              web_url=s.public_url or "")
        self.home = views.Home(self)
        events.register(self.bolt, self)
        await self.desk.start()
        self._tasks = [asyncio.create_task(self.home.run(), name="slack-home")]
        if http:
            await self._serve_http()
        logger.info("slack front end started mode=%s team=%s", s.slack_mode, self.team_id)

    async def _serve_http(self) -> None:
        assert self.bolt is not None
        bolt = self.bolt

        async def endpoint(request: web.Request) -> web.Response:
            return await to_aiohttp_response(await bolt.async_dispatch(
                await to_bolt_request(request)))

        web_app = web.Application()
        web_app.router.add_post("/slack/events", endpoint)
        self._http = web.AppRunner(web_app, access_log=None)
        await self._http.setup()
        site = web.TCPSite(self._http, self.settings.slack_http_listen,
                           self.settings.slack_http_port)
        await site.start()
        bound = self._http.addresses  # the port actually bound (0 in tests: any free port)
        self.http_port = bound[0][1] if bound else self.settings.slack_http_port

    async def connect(self) -> None:
        """Socket Mode: a WebSocket URL from apps.connections.open (our own call, so a refused
        app token is seen here), then the SDK's client on it; HTTP mode: nothing to do."""
        if self.settings.slack_mode == "http":
            return
        assert self.client is not None and self.bolt is not None
        token = self.settings.slack_app_token
        if token is None:
            raise SlackError("SLACK_APP_TOKEN is not set (Socket Mode needs it)")
        try:
            opened = await self.client.apps_connections_open(app_token=token.value)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error in FATAL:
                raise SlackError(error) from exc
            raise
        if self.socket is None:
            self.socket = AsyncSocketModeHandler(self.bolt, token.value,
                                                 ping_interval=self.ping_interval_s)
        self.socket.client.wss_uri = str(opened["url"])
        await asyncio.wait_for(self.socket.connect_async(), 15)

    async def connected(self) -> bool:
        return self.socket is not None and await self.socket.client.is_connected()

    async def stop(self, grace_s: float = 1.0) -> None:
        desk = self.desk
        if desk is not None:
            await desk.stop_following()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.socket is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.socket.close_async(), 5)
            self.socket = None
        if self._http is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._http.cleanup(), 5)
            self._http = None
        if desk is not None:
            await desk.stop(grace_s)
            self.desk = None
        if self.client is not None and self.client.session is not None:
            with contextlib.suppress(Exception):
                await self.client.session.close()


async def _refused(fleet: FleetPort, error: str) -> None:
    logger.error("slack: Slack refused the app's token (%s); running without Slack. Check "
                 "SLACK_BOT_TOKEN and SLACK_APP_TOKEN, and that the app has the scopes of "
                 "deploy/slack-manifest.yaml (reinstall it after changing them).", error)
    with contextlib.suppress(Exception):
        await fleet.notify("Slack front end stopped",
                           f"Slack refused the app's token ({error}). Switchboard runs on "
                           "without Slack until the tokens are fixed and it is restarted.")


async def run_slack(context: FrontContext[SlackSettings], *, check_s: float = 1.0) -> None:
    """Keep the Slack front end up for as long as this task runs. Slack unreachable, or the
    socket lost, is retried with backoff (2 s doubling to 30 s); a token Slack refuses stops
    the front end with a log line and a notice on the other front ends."""
    attempt = 0
    front = SlackFrontend(context)
    link = context.links.link(PLATFORM)
    try:
        while True:
            try:
                if front.desk is None:
                    await front.start()
                await front.connect()
            except SlackError as exc:
                link.set(LinkState.DOWN, f"Slack refused the app's token ({exc.error})")
                await _refused(context.fleet, exc.error)
                return
            except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError,
                    OSError) as exc:
                if front.desk is not None and front.socket is None:
                    await front.stop()  # a start cut short: begin again from nothing
                    front = SlackFrontend(context)
                delay = reconnect_s(attempt)
                attempt += 1
                link.set(LinkState.RETRYING, f"cannot reach Slack: {SECRETS(str(exc))}")
                logger.warning("slack: cannot reach Slack (%s); retrying in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            attempt = 0
            link.set(LinkState.CONNECTED, outbox=front.desk.outbox if front.desk else None)
            if context.settings.slack_mode == "http":
                await asyncio.Event().wait()  # until cancelled at shutdown
            lost = 0
            while lost < 3:  # the SDK reconnects by itself; we step in when it has not
                await asyncio.sleep(check_s)
                lost = 0 if await front.connected() else lost + 1
            logger.warning("slack: the Socket Mode connection is lost; reconnecting")
            link.set(LinkState.RETRYING, "the Socket Mode connection is lost; reconnecting")
    finally:
        if link.state != LinkState.DOWN:  # a refused token stays down: it is why we stopped
            link.set(LinkState.STARTING, "stopped")
        await front.stop()


__all__ = ["SlackError", "SlackFrontend", "reconnect_s", "run_slack"]
