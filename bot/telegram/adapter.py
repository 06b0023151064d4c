"""Telegram as the kit's ChatAdapter: a Reply as HTML messages with inline keyboards, button
actions as callback data under 64 bytes, Bot API errors in the kit's terms, and who sent an
update as the kit's Sender."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable
from typing import Any, TypeVar

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    KeyboardButton,
    Message,
    ReplyKeyboardMarkup,
    ReplyParameters,
    User,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

from bot.kit import (
    ChatId,
    ChatRefused,
    ChatUnavailable,
    FileFetch,
    FileTooBig,
    IncomingFile,
    Layout,
    MessageId,
    RateLimited,
    Sender,
    TapId,
    action_of,
)
from bot.kit.text import fit, plan_blocks
from bot.telegram.render import TELEGRAM_LIMIT, render_chunks
from commands.base import Attachment, Button, Reply

PLATFORM = "telegram"
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


async def call(request: Awaitable[T]) -> T | None:
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
        message = await call(self.bot.send_message(
            int(chat), self.html(reply), parse_mode=ParseMode.HTML, reply_markup=markup,
            reply_parameters=above, disable_notification=silent or None))
        assert message is not None
        return MessageId(str(message.message_id))

    async def edit(self, chat: ChatId, message: MessageId, reply: Reply, /) -> None:
        await call(self.bot.edit_message_text(
            self.html(reply), chat_id=int(chat), message_id=int(message),
            parse_mode=ParseMode.HTML, reply_markup=self.keyboard(reply.buttons)))

    async def send_document(self, chat: ChatId, document: Attachment, /, *, caption: str = "",
                            reply_to: MessageId | None = None) -> MessageId:
        above = (ReplyParameters(int(reply_to), allow_sending_without_reply=True)
                 if reply_to is not None else None)
        message = await call(self.bot.send_document(
            int(chat), document=document.content, filename=document.filename,
            caption=caption[:fit(caption, CAPTION_MAX)] or None, reply_parameters=above))
        assert message is not None
        return MessageId(str(message.message_id))

    async def answer_tap(self, tap: TapId, text: str = "", /, *, alert: bool = False) -> None:
        await call(self.bot.answer_callback_query(tap, text or None, show_alert=alert))


def incoming_files(bot: Bot, msg: Message) -> tuple[IncomingFile, ...]:
    """The photo (its largest size) or document of a message, to be downloaded on demand."""
    if msg.photo:
        best = msg.photo[-1]
        return (IncomingFile(f"photo-{best.file_unique_id}.jpg", "photo", best.file_size,
                             "image/jpeg", _fetcher(bot, best.file_id, best.file_size)),)
    doc = msg.document
    if doc is not None:
        return (IncomingFile(doc.file_name or "", "document", doc.file_size, doc.mime_type,
                             _fetcher(bot, doc.file_id, doc.file_size)),)
    return ()


def _fetcher(bot: Bot, file_id: str, declared: int | None) -> FileFetch:
    async def fetch(limit: int, /) -> bytes:
        if declared is not None and declared > limit:
            raise FileTooBig(declared)
        found = await call(bot.get_file(file_id))  # Telegram refuses one over 20 MB itself
        assert found is not None
        if found.file_size is not None and found.file_size > limit:
            raise FileTooBig(found.file_size)
        data = await call(found.download_as_bytearray())
        assert data is not None
        return bytes(data)
    return fetch


def sender(user: User) -> Sender:
    return Sender(str(user.id), user.username or user.first_name or str(user.id))
