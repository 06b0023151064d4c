"""A fake chat platform behind the kit's ChatAdapter protocol (messages, edits, documents, tap
answers, with injectable 429s, outages and refusals), and a clock tests move by hand."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from bot.kit.actions import action_of
from bot.kit.ports import (
    ChatError,
    ChatId,
    ChatRefused,
    ChatUnavailable,
    Layout,
    MessageId,
    RateLimited,
    TapId,
)
from commands.base import Attachment, Reply


class FakeClock:
    """now/monotonic under the test's control. `auto`: every sleep returns at once and moves
    time on by its length; otherwise sleepers wait until `advance` passes their deadline."""

    def __init__(self, start: float = 1_700_000_000.0, *, auto: bool = False) -> None:
        self._wall = start
        self._mono = 1000.0
        self.auto = auto
        self.sleeps: list[float] = []
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float, /) -> Awaitable[None]:
        """The deadline counts from the call, as a real sleep's does (near enough): a sleep
        wrapped in a task whose first step runs after an `advance` does not start late."""
        self.sleeps.append(seconds)
        if self.auto:
            self._wall += seconds
            self._mono += seconds
            return asyncio.sleep(0)
        fut = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._mono + seconds, fut))
        return fut

    async def advance(self, seconds: float) -> None:
        """Move time on, wake whoever is due, and let them run."""
        self._wall += seconds
        self._mono += seconds
        due = [(t, f) for t, f in self._sleepers if t <= self._mono]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._mono]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)


@dataclass
class Shown:
    """One message as the chat shows it now."""

    chat: ChatId
    id: MessageId
    text: str
    buttons: list[list[tuple[str, str]]]  # rows of (label, action)
    reply_to: MessageId | None = None
    silent: bool = False
    offer_kill: bool = False
    document: Attachment | None = None
    edits: int = 0
    history: list[str] = field(default_factory=list)


def plain(reply: Reply) -> str:
    return "\n\n".join(b.text for b in reply.blocks)


class FakeChat:
    """The kit's ChatAdapter, in memory. A message is at most `limit` characters."""

    def __init__(self, platform: str = "fake", *, limit: int = 4000) -> None:
        self._platform = platform
        self.limit = limit
        self.messages: dict[tuple[ChatId, MessageId], Shown] = {}
        self.calls: list[tuple[str, ChatId | None]] = []  # every attempt, failed ones too
        self.tap_answers: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._faults: list[ChatError] = []
        self.down = False
        self.gate = asyncio.Event()
        self.gate.set()

    @property
    def platform(self) -> str:
        return self._platform

    # -- injecting trouble ----------------------------------------------------------------------

    def flood(self, times: int, retry_after_s: float) -> None:
        self._faults += [RateLimited(retry_after_s) for _ in range(times)]

    def refuse_next(self, description: str = "Bad Request: chat not found") -> None:
        self._faults.append(ChatRefused(description))

    def fail_next(self, times: int = 1) -> None:
        self._faults += [ChatUnavailable("502 Bad Gateway") for _ in range(times)]

    async def _enter(self, method: str, chat: ChatId | None) -> None:
        await self.gate.wait()
        self.calls.append((method, chat))
        if self.down:
            raise ChatUnavailable("connection refused")
        if self._faults:
            raise self._faults.pop(0)

    # -- ChatAdapter ----------------------------------------------------------------------------

    def layout(self, reply: Reply, /) -> Layout:
        messages: list[Reply] = []
        blocks: list[Any] = []
        size = 0
        for block in reply.blocks:
            need = len(block.text) + (2 if blocks else 0)  # the blank line between blocks
            if blocks and size + need > self.limit:
                messages.append(Reply(blocks=tuple(blocks)))
                blocks, size, need = [], 0, len(block.text)
            blocks.append(block)
            size += need
        messages.append(Reply(blocks=tuple(blocks), buttons=reply.buttons))
        return Layout(tuple(messages), reply.attachments)

    async def direct_chat(self, user_id: str, /) -> ChatId:
        return ChatId(f"dm-{user_id}")

    async def send(self, chat: ChatId, reply: Reply, /, *, reply_to: MessageId | None = None,
                   silent: bool = False, offer_kill: bool = False) -> MessageId:
        await self._enter("send", chat)
        text = plain(reply)
        if not text.strip():
            raise ChatRefused("Bad Request: message text is empty")
        if len(text) > self.limit:
            raise ChatRefused("Bad Request: message is too long")
        mid = MessageId(str(next(self._ids)))
        self.messages[(chat, mid)] = Shown(chat, mid, text, self._buttons(reply), reply_to,
                                           silent, offer_kill)
        return mid

    async def edit(self, chat: ChatId, message: MessageId, reply: Reply, /) -> None:
        await self._enter("edit", chat)
        shown = self.messages.get((chat, message))
        if shown is None:
            raise ChatRefused("Bad Request: message to edit not found")
        text, buttons = plain(reply), self._buttons(reply)
        if (text, buttons) == (shown.text, shown.buttons):
            return  # "not modified": done
        shown.history.append(shown.text)
        shown.text, shown.buttons = text, buttons
        shown.edits += 1

    async def send_document(self, chat: ChatId, document: Attachment, /, *, caption: str = "",
                            reply_to: MessageId | None = None) -> MessageId:
        await self._enter("document", chat)
        mid = MessageId(str(next(self._ids)))
        self.messages[(chat, mid)] = Shown(chat, mid, caption, [], reply_to=reply_to,
                                           document=document)
        return mid

    async def answer_tap(self, tap: TapId, text: str = "", /, *, alert: bool = False) -> None:
        await self._enter("answer_tap", None)
        self.tap_answers.append({"tap": tap, "text": text, "alert": alert})

    @staticmethod
    def _buttons(reply: Reply) -> list[list[tuple[str, str]]]:
        return [[(b.label, action_of(b)) for b in row] for row in reply.buttons if row]

    # -- looking -------------------------------------------------------------------------------

    def sent(self, chat: ChatId) -> list[Shown]:
        return [m for (c, _), m in self.messages.items() if c == chat]

    def texts(self, chat: ChatId) -> list[str]:
        return [m.text for m in self.sent(chat) if m.document is None]

    def find(self, chat: ChatId, needle: str) -> Shown | None:
        hits = [m for m in self.sent(chat) if needle in m.text and m.document is None]
        return hits[-1] if hits else None

    @staticmethod
    def action(message: Shown, label_part: str) -> str:
        for row in message.buttons:
            for label, action in row:
                if label_part in label:
                    return action
        raise AssertionError(f"no button {label_part!r} in {message.buttons}")
