"""The front desk: the one platform-neutral service behind every chat front end. It takes
what an adapter parsed (a message, a button tap), decides who may do what, runs commands, and
keeps the chat current (escalations fanned out and settled, status cards) through the outbox."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from enum import StrEnum

from bot.kit import escalation as render
from bot.kit import files
from bot.kit.access import BAD_INVITE, NOT_AN_OPERATOR, Access
from bot.kit.actions import CANCEL, clean_action, parse_action
from bot.kit.cards import StatusCards
from bot.kit.copies import Copies
from bot.kit.outbox import ChatStats, Outbox, Pace, Priority, Slot
from bot.kit.ports import (
    AgentActivity,
    ChatAdapter,
    ChatError,
    ChatId,
    Clock,
    EscalationClosed,
    EventFeed,
    FleetPort,
    Incoming,
    MessageId,
    Sender,
    SystemClock,
    Tap,
    TapId,
)
from bot.kit.replies import reply_line
from bot.kit.text import fit
from commands.base import Button, Caller, Reply, Role, Text
from commands.dispatcher import split_command
from commands.operators import redact_codes
from supervisor.sanitize import CleanText, clean, piece
from supervisor.service import Lifecycle

logger = logging.getLogger(__name__)

CommandRunner = Callable[[Caller, CleanText], Awaitable[Reply]]
TOAST_CHARS = 190  # a tap's answer is at most 200 characters on Telegram
AUDIT_CHARS = 200  # of what the operator sent, in an audit row about it


class DeskState(StrEnum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class FrontDesk(Lifecycle):
    """One per chat platform. `start()` seeds the admins, edits what closed while nobody
    listened, and starts following the fleet; `stop()` ends that and drains the outbox."""

    def __init__(self, adapter: ChatAdapter, fleet: FleetPort, commands: CommandRunner, *,
                 clock: Clock | None = None, admin_ids: Iterable[str] = (),
                 card_interval_s: float = 2.0, kill_label: str | None = None,
                 stats: ChatStats | None = None,
                 threads: bool = False, pace: Pace | None = None,
                 digest_s: float = 0.0, web_url: str = "") -> None:
        """`threads`: each agent has one card for its whole life and what concerns the agent
        goes under it (Slack's thread per agent). `pace`: the platform's per-chat rate.
        `digest_s`: routine notices within this many seconds are sent as one message.
        `web_url`: the web console's public address; each escalation links to its page."""
        self.adapter = adapter
        self.fleet = fleet
        self.commands = commands
        self.clock = clock or SystemClock()
        self.admin_ids = tuple(admin_ids)
        self.kill_label = kill_label
        self.platform = adapter.platform
        self.outbox = Outbox(adapter, self.clock, stats=stats, pace=pace)
        self.access = Access(adapter, fleet)
        self.cards = StatusCards(fleet, self.outbox, self.clock,
                                 lambda: self.access.chats(Role.VIEWER),
                                 interval_s=card_interval_s, pinned=threads)
        self.copies = Copies(fleet, self.outbox, self.access, anchor=self.cards.anchor,
                             digest_s=digest_s, clock=self.clock, web_url=web_url)
        self.state = DeskState.NEW
        self._tasks: list[asyncio.Task[None]] = []
        self._feed: contextlib.ExitStack | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.state != DeskState.NEW:
            return
        await self.access.seed_admins(self.admin_ids)
        # Subscribed before the sweep of unsettled copies, so nothing closes unseen between.
        self._feed = contextlib.ExitStack()
        feed = self._feed.enter_context(self.fleet.subscribe())
        self.state = DeskState.RUNNING
        name = self.platform
        self._tasks = [
            asyncio.create_task(self._follow(feed), name=f"{name}-events"),
            asyncio.create_task(self.copies.settle_all(), name=f"{name}-settle"),
            asyncio.create_task(self.copies.deliver(), name=f"{name}-escalations"),
            asyncio.create_task(self.cards.run(), name=f"{name}-cards"),
        ]

    async def stop_following(self) -> None:
        """Phase one of stopping: no more escalations, edits or cards; replies still go out."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._feed is not None:
            self._feed.close()
            self._feed = None

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop following the fleet, then let the outbox drain for up to `grace_s`."""
        if self.state == DeskState.STOPPED:
            return
        self.state = DeskState.STOPPED
        await self.stop_following()
        await self.outbox.aclose(grace_s)

    async def _follow(self, feed: EventFeed) -> None:
        while True:
            event = await feed.next()
            if isinstance(event, EscalationClosed):
                self.copies.closed.put_nowait(event.escalation)
            elif isinstance(event, AgentActivity):
                self.cards.note(event)

    # -- inbound --------------------------------------------------------------------------------

    def reply(self, chat: ChatId, reply: Reply) -> list[asyncio.Future[object]]:
        return self.outbox.reply(chat, reply)

    async def on_message(self, msg: Incoming) -> None:
        """One message, answered whatever happens: a failure inside is a clear error reply
        and an audit row, never silence."""
        try:
            await self._on_message(msg)
        except Exception as exc:  # noqa: BLE001 - the operator must hear of it
            await self._failed(msg.chat, msg.sender, "message", msg.text, exc)

    async def _on_message(self, msg: Incoming) -> None:
        cleaned = clean(msg.text)  # the one cleaning and size bound of what was typed
        caller = await self.access.caller(msg.sender)
        text = cleaned.text.strip()
        if caller is None:
            await self._stranger(msg, text or f"({len(msg.text):,} characters)")
            return
        if cleaned.problem:
            await self._bad_input(msg.chat, msg.sender, f"{len(msg.text):,} characters",
                                  Reply.error("That message is too long.", cleaned.problem))
            return
        if msg.files:
            await self.on_files(msg, caller, text, agent_id=msg.agent_id)
            return
        if text.startswith("/") and split_command(text)[0] == "start":
            self.welcome(msg.chat, caller)
            return
        if msg.reply_to is not None and text and not text.startswith("/"):
            line = await self.reply_line(msg.chat, msg.reply_to, text)
            if line is None:
                await self._bad_input(msg.chat, msg.sender, redact_codes(text), Reply.error(
                    "That message is not a question I asked.",
                    "Reply to a question's message to answer it, or send a command (/help)."))
                return
            text = line
        elif not text:
            await self._bad_input(msg.chat, msg.sender, "", Reply.error(
                "I only understand text.", "Send /help for the commands."))
            return
        await self.command(msg.chat, caller, text, note=cleaned.note)

    async def on_files(self, msg: Incoming, caller: Caller, caption: str, *,
                       agent_id: str | None = None) -> None:
        """Files sent to an agent (bot/kit/files.py), each answered and audited. `agent_id`:
        the agent the front end knows them to be for (Slack: the thread's)."""
        agent = agent_id or await files.agent_of(
            self.fleet, self.platform, msg.chat, msg.reply_to,
            self.cards.agent_shown(msg.chat, msg.reply_to) if msg.reply_to else None)
        for sent in msg.files:
            slot = self.outbox.reserve(msg.chat)
            try:
                reply = await files.receive(self.fleet, self.platform, caller, msg.sender, agent,
                                            sent, caption)
                slot.fill(reply)
            finally:
                slot.release()
            await self.access.audit(msg.sender, "file", f"{agent or '-'} {sent.name}"[
                :AUDIT_CHARS], reply.ok, reply.plain()[:AUDIT_CHARS])

    async def command(self, chat: ChatId, caller: Caller, text: CleanText, *,
                      note: str | None = None) -> Reply:
        """Run a command and send its reply (`note` added), unless every front end is told
        the same as a notice. The reply's place in the chat's order is taken before the
        command runs: nothing it causes (the agent's card, notices, its final answer) reaches
        the chat before the reply, however the priorities fall or 429s hold the queue."""
        slot = self.outbox.reserve(chat)
        try:
            reply = await self.commands(caller, text)
            if note:
                reply = dataclasses.replace(reply, blocks=(*reply.blocks, Text(note)))
            self._reply_to_command(slot, reply)
            return reply
        finally:
            slot.release()  # a command that failed: what waits behind its place goes on

    async def reply_line(self, chat: ChatId, message: MessageId,
                         text: CleanText) -> CleanText | None:
        """A reply to one of our messages (an escalation's copy, an agent's card or thread) as
        the command it stands for: the kit's one rule (bot/kit/replies.py), which Slack's
        threads call too. None: the message is not one a reply means anything to."""
        return await reply_line(self.fleet, self.platform, chat, message, text,
                                card_of=self.cards.agent_shown(chat, message))

    @staticmethod
    def _reply_to_command(slot: Slot, reply: Reply) -> None:
        """A command's reply in its place, unless every front end is told the same as a
        notice."""
        if reply.announced:
            slot.release()
        else:
            slot.fill(reply)

    async def _bad_input(self, chat: ChatId, sender: Sender, args: str, reply: Reply) -> None:
        """Input that reached no command: the reply says why, the audit table has it (`args`:
        what was sent, fit for the audit table)."""
        self.reply(chat, reply)
        await self.access.audit(sender, "input", args[:AUDIT_CHARS], False,
                                reply.plain()[:AUDIT_CHARS])

    async def _failed(self, chat: ChatId, sender: Sender, what: str, text: str,
                      exc: BaseException) -> None:
        """`what`: message or tap, the audit row's action."""
        ref = secrets.token_hex(3)
        logger.error("front-end handler failed platform=%s what=%s ref=%s", self.platform, what,
                     ref, exc_info=exc)
        said = "button press" if what == "tap" else what
        reply = Reply.error(f"Something went wrong handling your {said} (ref {ref}); it was "
                            "not done.", "Try again in a moment; if it keeps failing, an admin "
                            "can look the ref up in the log or run `switchboard doctor`.")
        self.reply(chat, reply)
        try:
            await self.access.audit(sender, what, redact_codes(clean(text).text)[:AUDIT_CHARS],
                                    False, f"failed ref {ref}")
        except Exception:  # noqa: BLE001 - the store may be what failed; the log has it
            logger.exception("could not audit a failed handler platform=%s ref=%s",
                             self.platform, ref)

    async def _stranger(self, msg: Incoming, text: str) -> None:
        command, code = split_command(text) if text.startswith("/") else ("", "")
        if command == "start" and code and len(code.split()) == 1:
            caller = await self.access.redeem(msg.sender, code)
            if caller is None:
                self.reply(msg.chat, BAD_INVITE)
            else:
                self.welcome(msg.chat, caller)
            return
        refusal = await self.access.refuse(msg.sender, text)
        if refusal is not None:
            self.reply(msg.chat, refusal)

    def welcome(self, chat: ChatId, caller: Caller) -> None:
        text = (f"Hello {caller.name}: you are {caller.role.name.lower()} of this Switchboard. "
                "Send /help for the commands; /agents lists the fleet.")
        offer_kill = caller.role >= Role.ADMIN and self.kill_label is not None
        if offer_kill:
            text += f"\nThe {self.kill_label} button below stops every agent (it asks first)."
        self.outbox.send(chat, Reply.text(text), offer_kill=offer_kill)

    async def on_tap(self, tap: Tap) -> None:
        try:
            await self._on_tap(tap)
        except Exception as exc:  # noqa: BLE001 - the operator must hear of it
            await self._answer(tap.tap, "That did not work; see the message below.",
                               alert=True)
            await self._failed(tap.chat, tap.sender, "tap", tap.action or "", exc)

    async def _on_tap(self, tap: Tap) -> None:
        caller = await self.access.caller(tap.sender)
        action_text = clean_action(tap.action) if tap.action is not None else None
        if caller is None:
            await self.access.audit(tap.sender, "refused",
                                    redact_codes(clean(tap.action or "").text)[:AUDIT_CHARS],
                                    False, "not an operator")
            await self._answer(tap.tap, NOT_AN_OPERATOR, alert=True)
            return
        if action_text is None:
            why = ("That button has expired; send the command instead." if tap.action is None
                   else "That button is not one of mine; send the command instead.")
            await self._answer(tap.tap, why, alert=True)
            await self.access.audit(tap.sender, "tap", clean(tap.action or "").text[:AUDIT_CHARS],
                                    False, why)
            return
        action = parse_action(action_text)
        if action.kind == "cancel":
            await self._answer(tap.tap, "Cancelled.")
        elif action.kind == "details":
            await self._answer(tap.tap)
            row = await self.fleet.escalation(action.value)
            self.reply(tap.chat, render.details(row) if row is not None
                       else Reply.error(f"No request {action.value}."))
        elif action.kind == "confirm":
            await self._answer(tap.tap)
            self.reply(tap.chat, Reply(blocks=(Text(f"Are you sure? {action.value}"),),
                                       buttons=((Button("✅ Yes", action.value),
                                                 Button("Cancel", CANCEL)),)))
        else:
            slot = self.outbox.reserve(tap.chat)  # as for a typed command: see `command`
            try:
                await self._tap_command(tap, caller, piece(action_text, action.value), slot)
            finally:
                slot.release()

    async def _tap_command(self, tap: Tap, caller: Caller, text: CleanText, slot: Slot) -> None:
        reply = await self.commands(caller, text)
        if not reply.ok:
            # The toast says why; a losing tap ("already answered by …") needs no more.
            toast = reply.plain()
            await self._answer(tap.tap, toast[:fit(toast, TOAST_CHARS)], alert=True)
            if "already" not in reply.plain():
                slot.fill(reply)
            return
        await self._answer(tap.tap, "Done.")
        self._reply_to_command(slot, reply)

    async def _answer(self, tap: TapId, text: str = "", *, alert: bool = False) -> None:
        """Straight to the platform, not queued: a tap must be answered within seconds."""
        try:
            await self.adapter.answer_tap(tap, text, alert=alert)
        except ChatError as exc:
            logger.warning("could not answer a tap platform=%s error=%s", self.platform, exc)

    # -- outbound, for the adapter's own use ----------------------------------------------------

    async def flush(self, timeout_s: float) -> bool:
        return await self.outbox.flush(timeout_s)


__all__ = ["CommandRunner", "DeskState", "FrontDesk", "Priority"]
