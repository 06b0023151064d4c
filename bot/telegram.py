"""The Telegram front end: python-telegram-bot glue and HTML rendering. The adapter turns
updates into the kit's messages and taps and the kit's calls into Bot API calls; everything
else (who may do what, escalations, cards, the outbox) is the front-end kit's. Embedded in
Switchboard's event loop (initialize → start polling → start; never run_polling)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import urlparse

# RetryAfter.retry_after as a timedelta; the int form is deprecated and warns on every 429.
os.environ.setdefault("PTB_TIMEDELTA", "true")

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
    MessageId,
    RateLimited,
    Sender,
    Tap,
    TapId,
    action_of,
)
from bot.render import TELEGRAM_LIMIT, plan_blocks, render_chunks  # noqa: E402
from commands.base import Attachment, Button, Reply  # noqa: E402
from commands.dispatcher import REGISTRY  # noqa: E402
from supervisor.redact import SECRETS  # noqa: E402
from supervisor.service import Lifecycle  # noqa: E402

logger = logging.getLogger(__name__)

PLATFORM = "telegram"
KILL_TEXT = "🛑 KILL ALL"
CALLBACK_MAX = 64
BUTTON_LABEL_MAX = 60
T = TypeVar("T")


class CallbackCodec:
    """Callback data must be 1–64 bytes: short actions travel as they are, longer ones as a
    token into this table."""

    def __init__(self) -> None:
        self._tokens: dict[str, str] = {}

    def encode(self, action: str) -> str:
        if len(action.encode()) <= CALLBACK_MAX:
            return action
        token = secrets.token_urlsafe(8)
        self._tokens[token] = action
        return f"t:{token}"

    def decode(self, data: str) -> str | None:
        if data.startswith("t:"):
            return self._tokens.get(data[2:])
        return data


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
            caption=caption[:1000] or None, reply_parameters=above))
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

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        token = self.settings.telegram_token
        assert token is not None, "TELEGRAM_BOT_TOKEN is not set"
        assert self.app.fleet is not None, "start the Switchboard first"
        builder = ApplicationBuilder().token(token.value).concurrent_updates(True)
        base = self.settings.telegram_api_base_url
        if base:
            builder = builder.base_url(f"{base.rstrip('/')}/bot").base_file_url(
                f"{base.rstrip('/')}/file/bot")
        self.ptb = builder.build()
        self.ptb.add_handler(CallbackQueryHandler(self._on_callback))
        self.ptb.add_handler(MessageHandler(filters.ALL, self._on_message))
        self.ptb.add_error_handler(self._on_error)
        await self.ptb.initialize()
        self.desk = FrontDesk(
            TelegramAdapter(self.ptb.bot, self.codec), self.app.fleet, self.app.run_command,
            admin_ids=self.settings.telegram_admin_ids,
            card_interval_s=self.settings.status_card_interval_s, kill_label=KILL_TEXT)
        await self.ptb.bot.set_my_commands(
            [BotCommand(c.name, c.summary[:256]) for c in REGISTRY])
        await self.desk.start()  # admins are seeded before the first update is read
        assert self.ptb.updater is not None
        url = self.settings.telegram_webhook_url
        if url:
            # Telegram sends the secret in X-Telegram-Bot-Api-Secret-Token with every update;
            # PTB's webhook server refuses calls without it (403).
            secret = self.settings.telegram_webhook_secret
            self.webhook_secret = secret.value if secret else secrets.token_urlsafe(32)
            SECRETS.add(self.webhook_secret)  # PTB logs setWebhook's parameters at DEBUG
            await self.ptb.updater.start_webhook(
                listen=self.settings.telegram_webhook_listen,
                port=self.settings.telegram_webhook_port,
                url_path=urlparse(url).path.lstrip("/"), webhook_url=url,
                secret_token=self.webhook_secret)
        else:
            await self.ptb.updater.start_polling(poll_interval=0, timeout=self.poll_timeout_s)
        await self.ptb.start()
        logger.info("telegram front end started bot=%s", self.ptb.bot.username)

    async def stop(self, timeout_s: float = 10.0, grace_s: float = 1.0) -> None:
        """Stop following the fleet and taking updates, let running handlers finish (their
        sends still flow), drain the outbox for `grace_s`; every step bounded, so a dead API
        cannot block shutdown."""
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
    delay = 5.0
    while True:
        front = TelegramFrontend(app)
        try:
            await front.start()
        except InvalidToken:
            await front.stop()
            logger.error("telegram: the bot token was refused; running without Telegram. "
                         "Check TELEGRAM_BOT_TOKEN (from @BotFather).")
            return
        except (TelegramError, OSError) as exc:
            await front.stop()
            logger.warning("telegram: cannot reach the Bot API (%s); retrying in %.0fs", exc,
                           delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, retry_max_s)
            continue
        try:
            await asyncio.Event().wait()  # until cancelled at shutdown
        finally:
            await front.stop()


__all__ = ["TelegramFrontend", "KILL_TEXT", "run_telegram"]
