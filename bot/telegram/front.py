"""The Telegram front end: python-telegram-bot embedded in Switchboard's event loop (initialize
→ start polling → start; never run_polling), updates handed to the kit as messages and taps.
Everything else (who may do what, escalations, cards, the outbox) is the front-end kit's, and
what it is given of the rest is its FrontContext. In webhook mode the updates come through
Switchboard's own HTTP listener (mounted through the context), not PTB's server."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import logging
import secrets
import ssl
from typing import Any
from urllib.parse import urlparse

import httpx
from aiohttp import web
from telegram import Bot, BotCommand, Update, User
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from bot.kit import ChatId, FrontDesk, Incoming, LinkState, MessageId, Tap, TapId
from bot.kit.context import FrontContext
from bot.telegram.adapter import (
    KILL_TEXT,
    PLATFORM,
    CallbackCodec,
    TelegramAdapter,
    incoming_files,
    sender,
)
from bot.telegram.settings import TelegramSettings
from commands.dispatcher import REGISTRY
from supervisor.clock import backoff_s
from supervisor.redact import SECRETS
from supervisor.service import Lifecycle

logger = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class BadBaseUrl(Exception):
    """TELEGRAM_API_BASE_URL cannot be right: what to change is the message."""


def api_base_problem(base: str) -> str | None:
    """Why TELEGRAM_API_BASE_URL is wrong, or None. It is the server's root: PTB appends
    /bot<token>/<method>, so a value ending in /bot asks for /bot/bot<token>/getMe, which the
    server answers 404 and PTB reports as a refused token."""
    path = urlparse(base).path.rstrip("/")
    last = path.rsplit("/", 1)[-1]
    if last == "bot" or (last.startswith("bot") and ":" in last):
        return (f"TELEGRAM_API_BASE_URL ends in /{'bot' if last == 'bot' else 'bot<token>'}: "
                "set it to the Bot API server's address alone (for example "
                "http://localhost:8081), without /bot or the token; Switchboard adds "
                "/bot<token> itself.")
    if urlparse(base).scheme not in ("http", "https"):
        return ("TELEGRAM_API_BASE_URL must start with http:// or https:// (for example "
                "http://localhost:8081).")
    return None


def api_urls(base: str | None) -> tuple[str, str] | None:
    """(base_url, base_file_url) for PTB from TELEGRAM_API_BASE_URL; None: Telegram's own.
    Raises BadBaseUrl saying what to change."""
    if not base:
        return None
    problem = api_base_problem(base)
    if problem:
        raise BadBaseUrl(problem)
    root = base.rstrip("/")
    return f"{root}/bot", f"{root}/file/bot"


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every Bot API client of the process, made as httpx makes its own
    (certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR): httpx would build one per client,
    loading the CA bundle each time, about 50 ms of CPU, two clients a front end, at every
    start."""
    return httpx.create_ssl_context()


def _request(pool: int) -> HTTPXRequest:
    """PTB's own default request (its pool size; every other setting its default) on the
    shared TLS context."""
    return HTTPXRequest(connection_pool_size=pool, httpx_kwargs={"verify": _tls()})


async def get_me(token: str, base: str | None) -> User:
    """The bot behind `token` (getMe), as `switchboard doctor` checks it. Raises
    BadBaseUrl, InvalidToken (refused) or TelegramError (unreachable)."""
    urls = api_urls(base)
    bot = (Bot(token, base_url=urls[0], base_file_url=urls[1], request=_request(1),
               get_updates_request=_request(1)) if urls
           else Bot(token, request=_request(1), get_updates_request=_request(1)))
    async with bot:  # initialize() calls getMe: a refused token raises InvalidToken
        return await bot.get_me()


class TelegramFrontend(Lifecycle):
    def __init__(self, context: FrontContext[TelegramSettings], *,
                 poll_timeout_s: int = 10) -> None:
        self.context = context
        self.settings = context.settings
        self.poll_timeout_s = poll_timeout_s
        self.codec = CallbackCodec()
        self.ptb: Application[Any, Any, Any, Any, Any, Any] | None = None
        self.desk: FrontDesk | None = None
        self.webhook_secret: str | None = None
        self.webhook_path: str | None = None
        self.link = context.links.link(PLATFORM)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        token = self.settings.telegram_token
        assert token is not None, "TELEGRAM_BOT_TOKEN is not set"
        # PTB's default pool sizes: 256 for the calls, 1 for getUpdates.
        builder = (ApplicationBuilder().token(token.value).concurrent_updates(True)
                   .request(_request(256)).get_updates_request(_request(1)))
        urls = api_urls(self.settings.telegram_api_base_url)
        if urls:
            builder = builder.base_url(urls[0]).base_file_url(urls[1])
        self.ptb = builder.build()
        self.ptb.add_handler(CallbackQueryHandler(self._on_callback))
        self.ptb.add_handler(MessageHandler(filters.ALL, self._on_message))
        self.ptb.add_error_handler(self._on_error)
        await self.ptb.initialize()
        self.desk = FrontDesk(
            TelegramAdapter(self.ptb.bot, self.codec), self.context.fleet, self.context.commands,
            admin_ids=self.settings.telegram_admin_ids,
            card_interval_s=self.settings.status_card_interval_s, kill_label=KILL_TEXT,
            stats=self.link.stats, digest_s=self.settings.notice_digest_s,
            web_url=self.settings.public_url or "")
        await self.ptb.bot.set_my_commands(
            [BotCommand(c.name, c.summary[:256]) for c in REGISTRY])
        await self.desk.start()  # admins are seeded before the first update is read
        assert self.ptb.updater is not None
        url = self.settings.telegram_webhook_url
        if url:
            await self._start_webhook(url)
        else:
            await self.ptb.updater.start_polling(poll_interval=0, timeout=self.poll_timeout_s)
        await self.ptb.start()
        logger.info("telegram front end started bot=%s", self.ptb.bot.username)

    async def _start_webhook(self, url: str) -> None:
        """Updates are POSTed to the URL's path on Switchboard's HTTP listener; Telegram sends
        the secret in X-Telegram-Bot-Api-Secret-Token with each, and a call without it is
        refused (403) before it is read."""
        webhooks = self.context.webhooks
        assert webhooks is not None, "webhook mode: the settings give the listener an address"
        assert self.ptb is not None
        secret = self.settings.telegram_webhook_secret
        self.webhook_secret = secret.value if secret else secrets.token_urlsafe(32)
        SECRETS.add(self.webhook_secret)  # PTB logs setWebhook's parameters at DEBUG
        self.webhook_path = urlparse(url).path or "/"
        webhooks.mount(self.webhook_path, self._on_webhook)  # before Telegram may call it
        await self.ptb.bot.set_webhook(url, secret_token=self.webhook_secret)

    async def _on_webhook(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        expected = self.webhook_secret or ""
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            return web.Response(status=403, text="wrong or missing secret token\n")
        ptb = self.ptb
        if ptb is None:
            return web.Response(status=503, text="the Telegram front end is stopping\n")
        try:
            update = Update.de_json(await request.json(), ptb.bot)
        except (ValueError, TypeError, KeyError, TelegramError):
            return web.Response(status=400, text="not a Telegram update\n")
        await ptb.update_queue.put(update)
        return web.Response(text="ok\n")

    async def stop(self, timeout_s: float = 10.0, grace_s: float = 1.0) -> None:
        """Stop following the fleet and taking updates, let running handlers finish (their
        sends still flow), drain the outbox for `grace_s`; every step bounded, so a dead API
        cannot block shutdown."""
        if self.webhook_path is not None and self.context.webhooks is not None:
            self.context.webhooks.unmount(self.webhook_path)
            self.webhook_path = None
        desk = self.desk
        if desk is not None:
            await desk.stop_following()
        ptb = self.ptb
        if ptb is not None:
            with contextlib.suppress(Exception):
                if ptb.updater and ptb.updater.running:
                    await asyncio.wait_for(ptb.updater.stop(), timeout_s)
            with contextlib.suppress(Exception):
                if ptb.running:
                    await asyncio.wait_for(ptb.stop(), timeout_s)
        if desk is not None:
            await desk.stop(grace_s)
            self.desk = None
        if ptb is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ptb.shutdown(), timeout_s)
            # An application whose initialize() failed (a refused token, the API down) does
            # nothing on shutdown(), but its bot's HTTP clients are open: close them, or their
            # connections leak (the bot's shutdown is a no-op once they are closed).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ptb.bot.shutdown(), timeout_s)
        self.ptb = None

    # -- inbound: parse, hand to the kit --------------------------------------------------------

    async def _on_message(self, update: Update, context: Any) -> None:
        msg = update.effective_message
        user = update.effective_user
        chat = update.effective_chat
        if msg is None or chat is None or user is None or self.desk is None:
            return
        text = (msg.text or msg.caption or "").strip()
        if text == KILL_TEXT:
            text = "/killall"
        above = msg.reply_to_message
        await self.desk.on_message(Incoming(
            ChatId(str(chat.id)), sender(user), text,
            MessageId(str(above.message_id)) if above is not None else None,
            incoming_files(msg.get_bot(), msg)))

    async def _on_callback(self, update: Update, context: Any) -> None:
        query = update.callback_query
        if query is None or query.message is None or self.desk is None:
            return
        await self.desk.on_tap(Tap(
            TapId(query.id), ChatId(str(query.message.chat.id)),
            MessageId(str(query.message.message_id)), sender(query.from_user),
            self.codec.decode(query.data or "")))

    async def _on_error(self, update: object, context: Any) -> None:
        logger.error("telegram handler failed", exc_info=context.error)


async def run_telegram(context: FrontContext[TelegramSettings], *,
                       retry_max_s: float = 300.0) -> None:
    """Keep the Telegram front end up for as long as this task runs. Telegram being down at
    start is retried with backoff (the console and the supervisor run meanwhile); a token
    Telegram refuses is reported once, and Switchboard goes on without Telegram."""
    first = delay = min(5.0, retry_max_s)
    failures = 0
    link = context.links.link(PLATFORM)
    while True:
        front = TelegramFrontend(context)
        try:
            await front.start()
        except BadBaseUrl as exc:
            await front.stop()
            link.set(LinkState.DOWN, str(exc))
            logger.error("telegram: %s Running without Telegram.", exc)
            return
        except InvalidToken:
            await front.stop()
            custom = context.settings.telegram_api_base_url
            also = (f" If the token is right, check that TELEGRAM_API_BASE_URL ({custom}) is "
                    "a Bot API server's address.") if custom else ""
            link.set(LinkState.DOWN, "the bot token was refused")
            logger.error("telegram: the bot token was refused; running without Telegram. "
                         "Check TELEGRAM_BOT_TOKEN (from @BotFather).%s", also)
            return
        except (TelegramError, OSError) as exc:
            await front.stop()
            link.set(LinkState.RETRYING, f"cannot reach the Bot API: {SECRETS(str(exc))}")
            logger.warning("telegram: cannot reach the Bot API (%s); retrying in %.0fs", exc,
                           delay)
            await asyncio.sleep(delay)
            failures += 1
            delay = backoff_s(failures, first, retry_max_s)
            continue
        link.set(LinkState.CONNECTED, outbox=front.desk.outbox if front.desk else None)
        try:
            await asyncio.Event().wait()  # until cancelled at shutdown
        finally:
            link.set(LinkState.STARTING, "stopped")
            await front.stop()


__all__ = ["BadBaseUrl", "KILL_TEXT", "TelegramFrontend", "api_base_problem", "get_me",
           "run_telegram"]
