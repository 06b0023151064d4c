"""The front desk: the one platform-neutral service behind every chat front end. It takes
what an adapter parsed (a message, a button tap), decides who may do what, runs commands, and
keeps the chat current (escalations fanned out and settled, status cards) through the outbox."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from enum import StrEnum

from bot.kit import escalation as render
from bot.kit.access import BAD_INVITE, NOT_AN_OPERATOR, Access
from bot.kit.actions import CANCEL, parse_action
from bot.kit.cards import StatusCards
from bot.kit.copies import Copies
from bot.kit.outbox import Outbox, Pace, Priority
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
    SystemClock,
    Tap,
    TapId,
)
from commands.base import Button, Caller, Reply, Role, Text
from commands.dispatcher import split_command
from supervisor.service import Lifecycle

logger = logging.getLogger(__name__)

CommandRunner = Callable[[Caller, str], Awaitable[Reply]]
TOAST_CHARS = 190  # a tap's answer is at most 200 characters on Telegram


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
                 threads: bool = False, pace: Pace | None = None) -> None:
        """`threads`: each agent has one card for its whole life and what concerns the agent
        goes under it (Slack's thread per agent). `pace`: the platform's per-chat rate."""
        self.adapter = adapter
        self.fleet = fleet
        self.commands = commands
        self.clock = clock or SystemClock()
        self.admin_ids = tuple(admin_ids)
        self.kill_label = kill_label
        self.platform = adapter.platform
        self.outbox = Outbox(adapter, self.clock, pace=pace)
        self.access = Access(adapter, fleet)
        self.cards = StatusCards(fleet, self.outbox, self.clock,
                                 lambda: self.access.chats(Role.VIEWER),
                                 interval_s=card_interval_s, pinned=threads)
        self.copies = Copies(fleet, self.outbox, self.access, anchor=self.cards.anchor)
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
        caller = await self.access.caller(msg.sender)
        text = msg.text.strip()
        if caller is None:
            await self._stranger(msg, text)
            return
        if text.startswith("/") and split_command(text)[0] == "start":
            self.welcome(msg.chat, caller)
            return
        if msg.reply_to is not None and text and not text.startswith("/"):
            esc_id = await self.fleet.escalation_for_message(self.platform, msg.chat,
                                                             msg.reply_to)
            if esc_id is None:
                self.reply(msg.chat, Reply.error(
                    "That message is not a question I asked.",
                    "Reply to a question's message to answer it, or send a command (/help)."))
                return
            text = f"/answer {esc_id} {text}"
        elif not text:
            self.reply(msg.chat, Reply.error("I only understand text.",
                                             "Send /help for the commands."))
            return
        self.reply(msg.chat, await self.commands(caller, text))

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
        caller = await self.access.caller(tap.sender)
        if caller is None:
            await self.access.audit(tap.sender, "refused", tap.action or "", False,
                                    "not an operator")
            await self._answer(tap.tap, NOT_AN_OPERATOR, alert=True)
            return
        if tap.action is None:
            await self._answer(tap.tap, "That button has expired; send the command instead.",
                               alert=True)
            return
        action = parse_action(tap.action)
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
            reply = await self.commands(caller, action.value)
            if not reply.ok:
                # The toast says why; a losing tap ("already answered by …") needs no more.
                await self._answer(tap.tap, reply.plain()[:TOAST_CHARS], alert=True)
                if "already" not in reply.plain():
                    self.reply(tap.chat, reply)
                return
            await self._answer(tap.tap, "Done.")
            self.reply(tap.chat, reply)

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
