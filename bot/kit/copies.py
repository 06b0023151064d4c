"""Escalations to chat: fan-out to every operator allowed to answer, the record of each copy,
and every copy edited once it is answered, expires or is cancelled, including what closed
while no front end was listening (expired at start-up, answered during an outage)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.kit import escalation as render
from bot.kit.access import Access
from bot.kit.digest import Gatherer, digest
from bot.kit.outbox import Outbox, Priority
from bot.kit.ports import (
    ChatCopy,
    ChatError,
    ChatId,
    Clock,
    Escalation,
    FleetPort,
    MessageId,
    SystemClock,
)
from commands.base import Role
from supervisor.api import SENT_FILE, Kind

logger = logging.getLogger(__name__)


Anchor = Callable[[str | None, ChatId], Awaitable[MessageId | None]]


async def _no_anchor(_agent_id: str | None, _chat: ChatId) -> MessageId | None:
    return None


class Copies:
    """`anchor`: the message under which what concerns an agent goes in a chat (on Slack,
    the top of the agent's thread); by default none. `digest_s`: routine notices within this
    many seconds of the last one sent are gathered into one message (bot/kit/digest.py); 0:
    each on its own."""

    def __init__(self, fleet: FleetPort, outbox: Outbox, access: Access, *,
                 anchor: Anchor = _no_anchor, digest_s: float = 0.0,
                 clock: Clock | None = None, web_url: str = "") -> None:
        self.fleet = fleet
        self.web_url = web_url.rstrip("/")
        self.outbox = outbox
        self.access = access
        self.anchor = anchor
        self.clock: Clock = clock or SystemClock()
        self.gatherer = Gatherer(digest_s)
        self.platform = access.platform
        self.closed: asyncio.Queue[Escalation] = asyncio.Queue()
        # Rows some chat refused in every form: not acknowledged (the next start sends them
        # again), and not pushed again in this run, whose other chats already have them.
        self.undeliverable: set[str] = set()

    # -- fan-out --------------------------------------------------------------------------------

    async def deliver(self) -> None:
        """Follow the escalation outbox for this platform: push each row, then acknowledge
        it, but only once every chat has it. Routine notices held for a digest are pushed
        when their window closes, and acknowledged then (a stop before that leaves them
        unacknowledged: the next start sends them)."""
        rows = aiter(self.fleet.follow_escalations(self.platform))
        upcoming: asyncio.Future[Escalation] | None = None
        try:
            while True:
                if upcoming is None:
                    upcoming = asyncio.ensure_future(anext(rows))
                at = self.gatherer.next_due()
                if at is None:
                    await asyncio.wait((upcoming,))
                else:
                    timer = asyncio.ensure_future(
                        self.clock.sleep(at - self.clock.monotonic()))
                    try:
                        await asyncio.wait((upcoming, timer),
                                           return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        timer.cancel()
                if upcoming.done():
                    row, upcoming = upcoming.result(), None
                    if row.id not in self.undeliverable and \
                            self.gatherer.offer(row, self.clock.monotonic()):
                        await self._deliver_one(row)
                held = self.gatherer.due(self.clock.monotonic())
                if held:
                    await self._deliver_digest(held)
        finally:
            if upcoming is not None:  # the outbox's follower, closed before this returns
                upcoming.cancel()
                await asyncio.wait((upcoming,), timeout=1.0)

    async def _deliver_one(self, row: Escalation) -> None:
        try:
            refused = await self.push(row)
        except Exception as exc:  # noqa: BLE001 - one bad row must not stop delivery
            logger.exception("could not deliver escalation platform=%s id=%s",
                             self.platform, row.id)
            refused = {ChatId("*"): exc}
        if refused:
            self.undeliverable.add(row.id)
            await self._report(row, refused)
            return
        await self.fleet.ack_escalation(row.id, self.platform)

    async def _deliver_digest(self, rows: list[Escalation]) -> None:
        """Several routine notices as one silent message to every chat that sees notices; a
        single one as its own card."""
        if len(rows) == 1:
            await self._deliver_one(rows[0])
            return
        sent = [self.outbox.send(chat, digest(rows), priority=Priority.URGENT, silent=True)
                for chat in await self.access.chats(Role.VIEWER)]
        refused = False
        for fut in sent:
            try:
                await fut
            except ChatError:
                refused = True
        if refused:  # in every form: each one on its own, as without a digest
            logger.warning("digest refused platform=%s: its %d notices go one by one",
                           self.platform, len(rows))
            for row in rows:
                await self._deliver_one(row)
            return
        for row in rows:
            await self.fleet.ack_escalation(row.id, self.platform)

    async def _report(self, row: Escalation, refused: dict[ChatId, BaseException]) -> None:
        """A row some chat would not take: in the log, and, when it asks for an answer or
        settles one, as a notice to every front end (a notice about a notice is not sent: it
        could be refused the same way, again and again)."""
        chats = ", ".join(f"{chat} ({exc})" for chat, exc in refused.items())
        logger.error("escalation not delivered platform=%s id=%s kind=%s chats=%s; it stays "
                     "unacknowledged", self.platform, row.id, row.kind, chats)
        if row.kind == Kind.NOTICE:
            return
        await self.fleet.notify(
            f"Could not show {row.id} on {self.platform}",
            f"{self.platform.capitalize()} refused \"{row.title}\" for chat {chats}. It is "
            "not marked delivered there (the next start sends it again). See it and answer "
            f"it here: /pending, or /approve {row.id}, /deny {row.id}, /answer {row.id} ….")

    async def _push_long_notice(self, row: Escalation, anchors: dict[ChatId, MessageId | None]
                                ) -> dict[ChatId, BaseException]:
        """A notice too long for one card: as replies (split), under each chat's anchor."""
        refused: dict[ChatId, BaseException] = {}
        replies = {chat: self.outbox.reply(chat, render.long_notice(row),
                                           priority=Priority.URGENT, reply_to=above,
                                           silent=render.quiet(row))
                   for chat, above in anchors.items()}
        for chat, futures in replies.items():
            for fut in futures:
                try:
                    await fut
                except ChatError as exc:
                    refused[chat] = exc
        return refused

    async def push(self, row: Escalation) -> dict[ChatId, BaseException]:
        """Send the row to every chat allowed to see it; returns the chats that refused its
        card in every form, with why."""
        chats = await self.access.chats(Role.OPERATOR if render.needs_answer(row)
                                        else Role.VIEWER)
        anchors = {chat: await self.anchor(row.agent_id, chat) for chat in chats}
        if render.is_long_notice(row):
            return await self._push_long_notice(row, anchors)
        refused: dict[ChatId, BaseException] = {}
        card = render.card(row, self.web_url)
        reply = card.reply if row.status == "open" or row.kind == Kind.NOTICE else \
            render.settled(row)  # closed before it was ever shown: show how
        # The files go first and the card replies to them, so by the time its buttons show,
        # the whole text is already in the chat, right above them.
        caption = f"The whole text of {row.id} · {row.title}"[:1000]
        attached = list(card.files)
        if row.kind == Kind.NOTICE and row.tool_name == SENT_FILE and row.ref_id:
            # A file an agent sent (send_file): the file itself, its notice under it.
            out = await self.fleet.outgoing_file(row.ref_id)
            if out is not None:
                attached.insert(0, out)
                caption = row.title[:1000]
        files = {chat: [self.outbox.document(chat, f, caption=caption, priority=Priority.URGENT,
                                             reply_to=anchors[chat])
                        for f in attached] for chat in chats}
        sent: dict[ChatId, asyncio.Future[MessageId]] = {}
        for chat in chats:
            above: MessageId | None = anchors[chat]
            for fut in files[chat]:
                try:
                    shown = await fut
                except ChatError:
                    logger.warning("could not send the whole text id=%s chat=%s", row.id, chat)
                    continue
                if anchors[chat] is None:  # under the file; with an anchor, both go under it
                    above = shown
            sent[chat] = self.outbox.send(chat, reply, priority=Priority.URGENT, reply_to=above,
                                          silent=render.quiet(row))
        for chat, fut in sent.items():
            try:
                message = await fut
            except ChatError as exc:
                refused[chat] = exc
                continue
            if row.kind != Kind.NOTICE:
                await self.fleet.record_copy(ChatCopy(row.id, self.platform, chat, message))
        if row.kind == Kind.NOTICE:
            return refused
        latest = await self.fleet.escalation(row.id)
        if latest is not None and latest.status != "open":
            # Answered while its copies went out: the edit may have missed the new ones.
            self.closed.put_nowait(latest)
        return refused

    # -- editing the copies ---------------------------------------------------------------------

    async def settle_all(self) -> None:
        """First what closed while nobody edited its copies (the supervisor expired it at
        start, before any front end listened), then each escalation as it closes."""
        for row in await self.fleet.unsettled(self.platform):
            await self._settle_logged(row)
        while True:
            row = await self.closed.get()
            await self._settle_logged(row)

    async def _settle_logged(self, row: Escalation) -> None:
        try:
            await self.settle(row)
        except Exception:  # noqa: BLE001 - keep editing the others
            logger.exception("could not edit the copies of id=%s platform=%s", row.id,
                             self.platform)

    async def settle(self, row: Escalation) -> None:
        """Edit every copy to show the outcome and drop its buttons; recorded as done only
        once the edits went out, so an interrupted run does them again at the next start."""
        reply = render.settled(row)
        edits = [self.outbox.edit(c.chat, c.message, reply, priority=Priority.URGENT)
                 for c in await self.fleet.copies(row.id, self.platform)]
        for fut in edits:
            try:
                await fut
            except ChatError:
                pass  # refused for good (the message was deleted): nothing left to edit
        await self.fleet.settle(row.id, self.platform)
