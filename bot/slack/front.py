"""The Slack front end: slack-bolt's AsyncApp in Switchboard's event loop, over Socket Mode (by
default) or signed HTTP requests. The adapter turns the kit's calls into Web API calls and
Block Kit; bot/slack_events.py turns Slack's events into the kit's messages and taps; App Home
and the modals are bot/slack_views.py. Who may do what, escalations and their copies, the live
cards and the outbox are the front-end kit's, as for Telegram."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncSlackResponse, AsyncWebClient

from bot.app import Switchboard
from bot.kit import (
    ChatId,
    ChatRefused,
    ChatUnavailable,
    FrontDesk,
    Layout,
    MessageId,
    Pace,
    RateLimited,
    TapId,
)
from bot.slack import render as slack_render
from commands.base import Attachment, Reply
from supervisor.clock import backoff_s
from supervisor.service import Lifecycle

logger = logging.getLogger(__name__)

PLATFORM = "slack"
# Errors no retry can mend: the token is wrong, revoked, or lacks a scope the app needs.
FATAL = frozenset({"invalid_auth", "token_revoked", "missing_scope", "not_authed",
                   "account_inactive", "not_allowed_token_type"})
BACKOFF_FIRST_S, BACKOFF_MAX_S = 2.0, 30.0
# About one message a second per channel, with short bursts: Slack's own limit, kept in code.
CHANNEL_PACE = Pace(per_s=1.0, burst=4)
SEEN_MAX = 10_000


def reconnect_s(attempt: int) -> float:
    """How long to wait before reconnecting after `attempt` failures in a row: 2 s, 4 s, 8 s...
    up to 30 s."""
    return backoff_s(attempt, BACKOFF_FIRST_S, BACKOFF_MAX_S)


# -- where a message goes: the kit's ChatId, parsed here only -----------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """`C…`: the channel; `eph:C:U[:TS]`: only U sees it (in TS's thread); `dm:U`: the app's
    DM with U (for App Home and modals, which have no channel)."""

    channel: str
    user: str | None = None
    thread: str | None = None
    ephemeral: bool = False

    @classmethod
    def of(cls, chat: ChatId) -> Route:
        kind, _, rest = chat.partition(":")
        if kind == "eph":
            channel, user, *thread = rest.split(":")
            return cls(channel, user, thread[0] if thread else None, True)
        if kind == "dm":
            return cls(rest, rest)
        return cls(chat)


def ephemeral(channel: str, user: str, thread: str | None = None) -> ChatId:
    return ChatId(f"eph:{channel}:{user}" + (f":{thread}" if thread else ""))


def dm(user: str) -> ChatId:
    return ChatId(f"dm:{user}")


def is_ts(value: str | None) -> bool:
    """A message timestamp (1700000000.000100), as thread_ts needs: not a file id."""
    head, _, tail = (value or "").partition(".")
    return head.isdigit() and tail.isdigit()


async def call(request: Awaitable[AsyncSlackResponse]) -> AsyncSlackResponse:
    """One Web API call, its errors in the kit's terms."""
    try:
        return await request
    except SlackApiError as exc:
        response = exc.response
        error = str(response.get("error") or "")
        if error == "ratelimited" or response.status_code == 429:
            retry = float(response.headers.get("Retry-After", response.headers.get(
                "retry-after", "1")))
            raise RateLimited(retry, error) from exc
        if response.status_code >= 500 or error in ("internal_error", "fatal_error",
                                                    "service_unavailable", "request_timeout"):
            raise ChatUnavailable(error or f"HTTP {response.status_code}") from exc
        raise ChatRefused(error or str(exc)) from exc
    except (aiohttp.ClientError, SlackClientError, TimeoutError, OSError) as exc:
        raise ChatUnavailable(str(exc) or type(exc).__name__) from exc


class SlackAdapter:
    """The kit's ChatAdapter over one AsyncWebClient: Replies as Block Kit, every agent's
    messages in the channel (under its card, the thread's top message), replies to one
    operator as ephemeral messages, long output as files."""

    platform = PLATFORM

    def __init__(self, client: AsyncWebClient, channel: str) -> None:
        self.client = client
        self.channel = channel
        self._taps: OrderedDict[str, ChatId] = OrderedDict()
        self._tap_ids = 0
        self._dms: dict[str, str] = {}

    def layout(self, reply: Reply, /) -> Layout:
        return slack_render.layout(reply)

    async def direct_chat(self, user_id: str, /) -> ChatId:
        return ChatId(self.channel)  # operators share the channel; each agent has a thread

    async def send(self, chat: ChatId, reply: Reply, /, *, reply_to: MessageId | None = None,
                   silent: bool = False, offer_kill: bool = False) -> MessageId:
        route = Route.of(chat)
        body = slack_render.message(reply)
        thread = route.thread or (reply_to if is_ts(reply_to) else None)
        if route.ephemeral:
            assert route.user is not None
            sent = await call(self.client.chat_postEphemeral(
                channel=route.channel, user=route.user, thread_ts=thread, **body))
            return MessageId(str(sent.get("message_ts") or ""))
        sent = await call(self.client.chat_postMessage(
            channel=route.channel, thread_ts=thread, unfurl_links=False, unfurl_media=False,
            **body))
        return MessageId(str(sent["ts"]))

    async def edit(self, chat: ChatId, message: MessageId, reply: Reply, /) -> None:
        route = Route.of(chat)
        if route.ephemeral or not is_ts(message):
            return  # an ephemeral message cannot be edited by the Web API
        await call(self.client.chat_update(channel=route.channel, ts=message,
                                           **slack_render.message(reply)))

    async def _dm_channel(self, user: str) -> str:
        if user not in self._dms:
            opened = await call(self.client.conversations_open(users=user))
            self._dms[user] = str(opened["channel"]["id"])
        return self._dms[user]

    async def send_document(self, chat: ChatId, document: Attachment, /, *, caption: str = "",
                            reply_to: MessageId | None = None) -> MessageId:
        route = Route.of(chat)
        channel = await self._dm_channel(route.user) if route.user else route.channel
        thread = None if route.user else (route.thread or (reply_to if is_ts(reply_to)
                                                            else None))
        done = await call(self.client.files_upload_v2(
            channel=channel, thread_ts=thread, content=document.content,
            filename=document.filename, title=document.filename,
            initial_comment=slack_render.escape(caption) or None))
        return MessageId(str((done.get("file") or {}).get("id") or ""))

    def tap(self, chat: ChatId) -> TapId:
        """A button press, answered (if at all) with a message only its presser sees."""
        self._tap_ids += 1
        tap = TapId(f"t{self._tap_ids}")
        self._taps[tap] = chat
        while len(self._taps) > 1000:
            self._taps.popitem(last=False)
        return tap

    async def answer_tap(self, tap: TapId, text: str = "", /, *, alert: bool = False) -> None:
        # Slack has no toast: only what the presser must read ("not allowed", "already
        # answered by …") is sent; "Done." is the card changing.
        chat = self._taps.get(tap)
        if chat is None or not alert or not text:
            return
        await self.send(chat, Reply.text(text))


class Seen:
    """Deliveries already handled, by key, the newest SEEN_MAX of them: Slack retries an
    event it thinks was not acked, and a mention arrives as `app_mention` and as `message`."""

    def __init__(self, size: int = SEEN_MAX) -> None:
        self.size = size
        self._keys: OrderedDict[str, None] = OrderedDict()

    def first(self, *keys: str | None) -> bool:
        """True the first time any of `keys` is offered; every key is remembered."""
        keys_ = [k for k in keys if k]
        fresh = not any(k in self._keys for k in keys_)
        for key in keys_:
            self._keys[key] = None
            self._keys.move_to_end(key)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)
        return fresh


class SlackError(Exception):
    """Slack refused our tokens for good (FATAL): the front end stops, Switchboard goes on."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class SlackFrontend(Lifecycle):
    def __init__(self, app: Switchboard, *, ping_interval_s: float = 10.0,
                 pace: Pace = CHANNEL_PACE) -> None:
        self.app = app
        self.pace = pace
        self.settings = app.settings
        self.ping_interval_s = ping_interval_s
        self.seen = Seen()
        self.client: AsyncWebClient | None = None
        self.bolt: AsyncApp | None = None
        self.adapter: SlackAdapter | None = None
        self.desk: FrontDesk | None = None
        self.socket: AsyncSocketModeHandler | None = None
        self.home: Any = None  # bot.slack.views.Home
        self.bot_user_id = ""
        self.team_id = ""
        self._http: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.http_port: int | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        from bot.slack import events as slack_events
        from bot.slack import views as slack_views

        s = self.settings
        assert s.slack_bot_token is not None, "SLACK_BOT_TOKEN is not set"
        assert s.slack_channel, "SLACK_CHANNEL is not set"
        assert self.app.fleet is not None, "start the Switchboard first"
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
        self.bolt = AsyncApp(client=self.client, signing_secret=secret,
                             request_verification_enabled=http, process_before_response=False,
                             logger=logging.getLogger("slack_bolt.switchboard"))
        self.adapter = SlackAdapter(self.client, s.slack_channel)
        self.desk = FrontDesk(self.adapter, self.app.fleet, self.app.run_command,
                              admin_ids=s.slack_admin_ids, card_interval_s=s.slack_card_interval_s,
                              threads=True, pace=self.pace)
        self.home = slack_views.Home(self)
        slack_events.register(self.bolt, self)
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


async def _refused(app: Switchboard, error: str) -> None:
    logger.error("slack: Slack refused the app's token (%s); running without Slack. Check "
                 "SLACK_BOT_TOKEN and SLACK_APP_TOKEN, and that the app has the scopes of "
                 "deploy/slack-manifest.yaml (reinstall it after changing them).", error)
    if app.fleet is not None:
        with contextlib.suppress(Exception):
            await app.fleet.notify("Slack front end stopped",
                                   f"Slack refused the app's token ({error}). Switchboard runs "
                                   "on without Slack until the tokens are fixed and it is "
                                   "restarted.")


async def run_slack(app: Switchboard, *, check_s: float = 1.0) -> None:
    """Keep the Slack front end up for as long as this task runs. Slack unreachable, or the
    socket lost, is retried with backoff (2 s doubling to 30 s); a token Slack refuses stops
    the front end with a log line and a notice on the other front ends."""
    attempt = 0
    front = SlackFrontend(app)
    try:
        while True:
            try:
                if front.desk is None:
                    await front.start()
                await front.connect()
            except SlackError as exc:
                await _refused(app, exc.error)
                return
            except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError,
                    OSError) as exc:
                if front.desk is not None and front.socket is None:
                    await front.stop()  # a start cut short: begin again from nothing
                    front = SlackFrontend(app)
                delay = reconnect_s(attempt)
                attempt += 1
                logger.warning("slack: cannot reach Slack (%s); retrying in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            attempt = 0
            if app.settings.slack_mode == "http":
                await asyncio.Event().wait()  # until cancelled at shutdown
            lost = 0
            while lost < 3:  # the SDK reconnects by itself; we step in when it has not
                await asyncio.sleep(check_s)
                lost = 0 if await front.connected() else lost + 1
            logger.warning("slack: the Socket Mode connection is lost; reconnecting")
    finally:
        await front.stop()


__all__ = ["PLATFORM", "Route", "Seen", "SlackAdapter", "SlackFrontend", "reconnect_s",
           "dm", "ephemeral", "run_slack"]
