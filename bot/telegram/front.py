"""The Telegram front end: python-telegram-bot glue and HTML rendering. The adapter turns
updates into the kit's messages and taps and the kit's calls into Bot API calls; everything
else (who may do what, escalations, cards, the outbox) is the front-end kit's. Embedded in
Switchboard's event loop (initialize → start polling → start; never run_polling). In webhook
mode the updates come through Switchboard's own HTTP listener (bot/web.py), not PTB's server."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
from collections import OrderedDict
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import urlparse

# RetryAfter.retry_after as a timedelta; the int form is deprecated and warns on every 429.
os.environ.setdefault("PTB_TIMEDELTA", "true")

from aiohttp import web  # noqa: E402
from telegram import (  # noqa: E402
    Bot,
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    KeyboardButton,
    ReplyKeyboardMarkup,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ParseMode  # noqa: E402
from telegram.error import (  # noqa: E402
    BadRequest,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.ext import (  # noqa: E402,E501
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    MessageHandler,
    filters,
)

from bot.app import Switchboard  # noqa: E402
from bot.kit import (  # noqa: E402
    ChatId,
    ChatRefused,
    ChatUnavailable,
    FrontDesk,
    Incoming,
    Layout,
    LinkState,
    MessageId,
    RateLimited,
    Sender,
    Tap,
    TapId,
    action_of,
)
from bot.kit.text import TELEGRAM_LIMIT, fit, plan_blocks, render_chunks  # noqa: E402
from commands.base import Attachment, Button, Reply  # noqa: E402
from commands.dispatcher import REGISTRY  # noqa: E402
from supervisor.clock import backoff_s  # noqa: E402
from supervisor.redact import SECRETS  # noqa: E402
from supervisor.service import Lifecycle  # noqa: E402

logger = logging.getLogger(__name__)

PLATFORM = "telegram"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
KILL_TEXT = "🛑 KILL ALL"
CALLBACK_MAX = 64
# Long buttons remembered at once (each a few hundred bytes): far more than a phone shows.
CALLBACK_TABLE_MAX = 4096
CAPTION_MAX = 1000  # Telegram's is 1,024 UTF-16 units
BUTTON_LABEL_MAX = 60
T = TypeVar("T")


class CallbackCodec:
    """Callback data must be 1–64 bytes: short actions travel as they are, longer ones as a
    token into this table. The table is bounded: the same action keeps its token, and past
    `limit` the longest unused one is forgotten (its button then answers "That button has
    expired; send the command instead")."""

    def __init__(self, limit: int = CALLBACK_TABLE_MAX) -> None:
        self.limit = limit
        self._tokens: OrderedDict[str, str] = OrderedDict()  # token -> action, oldest first
        self._by_action: dict[str, str] = {}

    def encode(self, action: str) -> str:
        if len(action.encode()) <= CALLBACK_MAX:
            return action
        token = self._by_action.get(action)
        if token is None:
            token = secrets.token_urlsafe(8)
            self._tokens[token] = action
            self._by_action[action] = token
            while len(self._tokens) > self.limit:
                _, forgotten = self._tokens.popitem(last=False)
                del self._by_action[forgotten]
        else:
            self._tokens.move_to_end(token)
        return f"t:{token}"

    def decode(self, data: str) -> str | None:
        if data.startswith("t:"):
            action = self._tokens.get(data[2:])
            if action is not None:
                self._tokens.move_to_end(data[2:])
            return action
        return data

    def __len__(self) -> int:
        return len(self._tokens)


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


async def get_me(token: str, base: str | None) -> User:
    """The bot behind `token` (getMe), as `switchboard doctor` checks it. Raises
    BadBaseUrl, InvalidToken (refused) or TelegramError (unreachable)."""
    urls = api_urls(base)
    bot = Bot(token, base_url=urls[0], base_file_url=urls[1]) if urls else Bot(token)
    async with bot:  # initialize() calls getMe: a refused token raises InvalidToken
        return await bot.get_me()


async def _call(request: Awaitable[T]) -> T | None:
    """One Bot API call, its errors in the kit's terms. An edit that changes nothing is done."""
    try:
        return await request
    except RetryAfter as exc:
        wait = exc.retry_after
        delay = wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)
        raise RateLimited(delay, str(exc)) from exc
    except BadRequest as exc:  # before NetworkError, which it subclasses
        if "not modified" in str(exc).lower():
            return None
        raise ChatRefused(str(exc)) from exc
    except Forbidden as exc:  # the user blocked the bot: nothing to retry
        raise ChatRefused(str(exc)) from exc
    except TelegramError as exc:  # timeouts, 5xx, connection refused: keep trying
        raise ChatUnavailable(str(exc)) from exc


class TelegramAdapter:
    """The kit's ChatAdapter over one PTB Bot: Replies rendered as HTML, buttons as inline
    keyboards with callback data under 64 bytes, a persistent KILL ALL reply keyboard."""

    platform = PLATFORM

    def __init__(self, bot: Bot, codec: CallbackCodec) -> None:
        self.bot = bot
        self.codec = codec

    def layout(self, reply: Reply, /) -> Layout:
        groups, files = plan_blocks(reply)
        messages = [Reply(blocks=g) for g in groups]
        if messages and reply.buttons:
            messages[-1] = Reply(blocks=messages[-1].blocks, buttons=reply.buttons)
        return Layout(tuple(messages), tuple(files))

    async def direct_chat(self, user_id: str, /) -> ChatId:
        return ChatId(user_id)  # a private chat's id is the user's

    def keyboard(self, rows: tuple[tuple[Button, ...], ...]) -> InlineKeyboardMarkup | None:
        buttons = [[InlineKeyboardButton(b.label[:BUTTON_LABEL_MAX],
                                         callback_data=self.codec.encode(action_of(b)))
                    for b in row] for row in rows if row]
        return InlineKeyboardMarkup(buttons) if buttons else None

    @staticmethod
    def html(reply: Reply) -> str:
        return "\n\n".join(c.html for c in render_chunks(reply.blocks, TELEGRAM_LIMIT))

    async def send(self, chat: ChatId, reply: Reply, /, *, reply_to: MessageId | None = None,
                   silent: bool = False, offer_kill: bool = False) -> MessageId:
        markup: Any = self.keyboard(reply.buttons)
        if markup is None and offer_kill:
            markup = ReplyKeyboardMarkup([[KeyboardButton(KILL_TEXT)]], resize_keyboard=True,
                                         is_persistent=True)
        above = (ReplyParameters(int(reply_to), allow_sending_without_reply=True)
                 if reply_to is not None else None)
        message = await _call(self.bot.send_message(
            int(chat), self.html(reply), parse_mode=ParseMode.HTML, reply_markup=markup,
            reply_parameters=above, disable_notification=silent or None))
        assert message is not None
        return MessageId(str(message.message_id))

    async def edit(self, chat: ChatId, message: MessageId, reply: Reply, /) -> None:
        await _call(self.bot.edit_message_text(
            self.html(reply), chat_id=int(chat), message_id=int(message),
            parse_mode=ParseMode.HTML, reply_markup=self.keyboard(reply.buttons)))

    async def send_document(self, chat: ChatId, document: Attachment, /, *, caption: str = "",
                            reply_to: MessageId | None = None) -> MessageId:
        above = (ReplyParameters(int(reply_to), allow_sending_without_reply=True)
                 if reply_to is not None else None)
        message = await _call(self.bot.send_document(
            int(chat), document=document.content, filename=document.filename,
            caption=caption[:fit(caption, CAPTION_MAX)] or None, reply_parameters=above))
        assert message is not None
        return MessageId(str(message.message_id))

    async def answer_tap(self, tap: TapId, text: str = "", /, *, alert: bool = False) -> None:
        await _call(self.bot.answer_callback_query(tap, text or None, show_alert=alert))


def _sender(user: User) -> Sender:
    return Sender(str(user.id), user.username or user.first_name or str(user.id))


class TelegramFrontend(Lifecycle):
    def __init__(self, app: Switchboard, *, poll_timeout_s: int = 10) -> None:
        self.app = app
        self.settings = app.settings
        self.poll_timeout_s = poll_timeout_s
        self.codec = CallbackCodec()
        self.ptb: Application[Any, Any, Any, Any, Any, Any] | None = None
        self.desk: FrontDesk | None = None
        self.webhook_secret: str | None = None
        self.webhook_path: str | None = None
        self.link = app.links.link(PLATFORM)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        token = self.settings.telegram_token
        assert token is not None, "TELEGRAM_BOT_TOKEN is not set"
        assert self.app.fleet is not None, "start the Switchboard first"
        builder = ApplicationBuilder().token(token.value).concurrent_updates(True)
        urls = api_urls(self.settings.telegram_api_base_url)
        if urls:
            builder = builder.base_url(urls[0]).base_file_url(urls[1])
        self.ptb = builder.build()
        self.ptb.add_handler(CallbackQueryHandler(self._on_callback))
        self.ptb.add_handler(MessageHandler(filters.ALL, self._on_message))
        self.ptb.add_error_handler(self._on_error)
        await self.ptb.initialize()
        self.desk = FrontDesk(
            TelegramAdapter(self.ptb.bot, self.codec), self.app.fleet, self.app.run_command,
            admin_ids=self.settings.telegram_admin_ids,
            card_interval_s=self.settings.status_card_interval_s, kill_label=KILL_TEXT,
            stats=self.link.stats)
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
        listener = self.app.listener
        assert listener is not None, "webhook mode: the settings give the listener an address"
        assert self.ptb is not None
        secret = self.settings.telegram_webhook_secret
        self.webhook_secret = secret.value if secret else secrets.token_urlsafe(32)
        SECRETS.add(self.webhook_secret)  # PTB logs setWebhook's parameters at DEBUG
        self.webhook_path = urlparse(url).path or "/"
        listener.mount(self.webhook_path, self._on_webhook)  # before Telegram may call it
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
        if self.webhook_path is not None and self.app.listener is not None:
            self.app.listener.unmount(self.webhook_path)
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
        text = (msg.text or "").strip()
        if text == KILL_TEXT:
            text = "/killall"
        above = msg.reply_to_message
        await self.desk.on_message(Incoming(
            ChatId(str(chat.id)), _sender(user), text,
            MessageId(str(above.message_id)) if above is not None else None))

    async def _on_callback(self, update: Update, context: Any) -> None:
        query = update.callback_query
        if query is None or query.message is None or self.desk is None:
            return
        await self.desk.on_tap(Tap(
            TapId(query.id), ChatId(str(query.message.chat.id)),
            MessageId(str(query.message.message_id)), _sender(query.from_user),
            self.codec.decode(query.data or "")))

    async def _on_error(self, update: object, context: Any) -> None:
        logger.error("telegram handler failed", exc_info=context.error)


async def run_telegram(app: Switchboard, *, retry_max_s: float = 300.0) -> None:
    """Keep the Telegram front end up for as long as this task runs. Telegram being down at
    start is retried with backoff (the console and the supervisor run meanwhile); a token
    Telegram refuses is reported once, and Switchboard goes on without Telegram."""
    first = delay = min(5.0, retry_max_s)
    failures = 0
    link = app.links.link(PLATFORM)
    while True:
        front = TelegramFrontend(app)
        try:
            await front.start()
        except BadBaseUrl as exc:
            await front.stop()
            link.set(LinkState.DOWN, str(exc))
            logger.error("telegram: %s Running without Telegram.", exc)
            return
        except InvalidToken:
            await front.stop()
            custom = app.settings.telegram_api_base_url
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
