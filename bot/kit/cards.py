"""Live status cards: one message per agent per viewer, sent when the agent starts and then
edited with its state, current tool and latest lines of text; changes between two ticks are
coalesced into one edit, on an injected clock. `pinned`: one card per agent for its whole life,
recorded through the fleet (on Slack it is the top message of the agent's thread), so a
restart or a resumed agent edits the same card, and other messages about the agent can be
sent under it (`anchor`)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.kit.outbox import Outbox, Priority
from bot.kit.ports import (
    ActivityKind,
    AgentActivity,
    AgentView,
    ChatId,
    Clock,
    FleetPort,
    MessageId,
)
from bot.kit.text import visible
from commands.base import Reply, Text
from commands.render import money, span

logger = logging.getLogger(__name__)

ICONS = {"working": "⚙️", "waiting": "⏳", "idle": "💤", "paused": "⏸", "stalled": "🐢",
         "starting": "🚀", "stopped": "⏹", "failed": "💥", "killed": "💀", "resume_failed": "🧩"}
LINES = 4  # the agent's latest lines of text a card shows
LINE_CHARS = 160


@dataclass
class _Stream:
    """What the agent is doing right now, from its events (the view has no text)."""

    tool: str = ""
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LINES))


@dataclass
class _Shown:
    message: MessageId | None  # None: the first send is still on its way
    reply: Reply
    sent: asyncio.Future[MessageId] | None = None

ENDED_KEPT = 1000  # cards of ended agents whose replies still find their agent


class StatusCards:
    def __init__(self, fleet: FleetPort, outbox: Outbox, clock: Clock,
                 viewers: Callable[[], Awaitable[list[ChatId]]], *,
                 interval_s: float = 2.0, pinned: bool = False) -> None:
        self.fleet = fleet
        self.outbox = outbox
        self.clock = clock
        self.viewers = viewers
        self.interval_s = interval_s
        self.pinned = pinned
        self.platform = outbox.adapter.platform
        self._dirty: set[str] = set()
        self._streams: dict[str, _Stream] = {}
        self._shown: dict[tuple[str, ChatId], _Shown] = {}
        # Cards of agents that ended, by (chat, message): a reply to one still names its agent
        # (which then says it is killed or stopped), not "which agent?". The newest ENDED_KEPT.
        self._ended: dict[tuple[ChatId, MessageId], str] = {}
        self._unrecorded: list[tuple[tuple[str, ChatId], MessageId]] = []

    def note(self, activity: AgentActivity) -> None:
        """Cheap, called for every event: remember what changed, render at the next tick."""
        stream = self._streams.setdefault(activity.agent_id, _Stream())
        if activity.kind == ActivityKind.TOOL:
            stream.tool = activity.text
        elif activity.kind == ActivityKind.TEXT:
            for line in activity.text.splitlines():
                if line.strip():
                    line = visible(line.strip())
                    cut = len(line) > LINE_CHARS
                    stream.lines.append(line[:LINE_CHARS] + ("…" if cut else ""))
        self._dirty.add(activity.agent_id)

    def render(self, view: AgentView) -> Reply:
        stream = self._streams.get(view.id, _Stream())
        tool = (stream.tool or view.current_tool) if view.current_tool else None
        blocks = [Text(f"{ICONS.get(view.state, '🤖')} {view.name} {view.id} — {view.state}",
                       "title"),
                  Text(f"tool: {tool or '-'}")]
        if stream.lines:
            blocks.append(Text("\n".join(stream.lines), "code"))
        blocks.append(Text(f"turns: {view.turns} · cost: {money(view.cost_usd)} · "
                           f"elapsed: {span(self.clock.now() - view.created_at)}"))
        buttons = (view.buttons,) if view.live and view.buttons else ()
        return Reply(blocks=tuple(blocks), buttons=buttons)

    async def tick(self) -> None:
        """Run once: every card whose agent changed since the last tick, sent or edited."""
        await self._record()
        dirty, self._dirty = self._dirty, set()
        if not dirty:
            return
        chats = await self.viewers()
        for agent_id in sorted(dirty):
            try:
                view = await self.fleet.agent(agent_id)
                if view is not None:
                    if self.pinned:
                        await self._recall(view, chats)
                    self._show(view, chats)
            except Exception:  # noqa: BLE001 - one card must not stop the others
                logger.exception("status card failed agent=%s", agent_id)

    def _show(self, view: AgentView, chats: list[ChatId]) -> None:
        reply = self.render(view)
        for chat in chats:
            key = (view.id, chat)
            shown = self._shown.get(key)
            if shown is None:
                if view.live:
                    self._send(key, reply)
                continue
            if shown.message is None:
                self._dirty.add(view.id)  # its first send is not out yet: edit next tick
                continue
            if shown.reply != reply:
                shown.reply = reply
                self.outbox.edit(chat, shown.message, reply, priority=Priority.CARD)
            if not view.live and not self.pinned:
                del self._shown[key]  # its last state is shown; a new run gets a new card
                self._ended[(chat, shown.message)] = view.id
                while len(self._ended) > ENDED_KEPT:
                    del self._ended[next(iter(self._ended))]
        if not view.live and not any(k[0] == view.id for k in self._shown):
            self._streams.pop(view.id, None)

    async def _recall(self, view: AgentView, chats: list[ChatId]) -> None:
        """Pinned cards: the card recorded for this agent, if this run has not seen it yet."""
        for chat in chats:
            key = (view.id, chat)
            if key not in self._shown:
                found = await self.fleet.card(self.platform, view.id, chat)
                if found is not None:
                    self._shown[key] = _Shown(found, Reply())

    def _send(self, key: tuple[str, ChatId], reply: Reply) -> None:
        # A card is edited in place: never turned into a file when refused.
        fut = self.outbox.send(key[1], reply, priority=Priority.CARD, silent=True,
                               as_file=False)
        self._shown[key] = _Shown(None, reply, fut)
        fut.add_done_callback(functools.partial(self._sent, key))

    def _sent(self, key: tuple[str, ChatId], fut: asyncio.Future[MessageId]) -> None:
        shown = self._shown.get(key)
        if shown is None:
            return
        if fut.cancelled() or fut.exception() is not None:
            del self._shown[key]  # not shown: the next change sends it again
            return
        shown.message = fut.result()
        if self.pinned:
            self._unrecorded.append((key, shown.message))
            self._dirty.add(key[0])  # recorded at the next tick

    def agent_shown(self, chat: ChatId, message: MessageId) -> str | None:
        """The agent whose card, shown by this run, is `message` in `chat`: a reply to it
        (Slack: in its thread) reaches the agent from the moment the card is posted, before
        the next tick records it through the fleet."""
        for (agent_id, shown_in), shown in self._shown.items():
            if shown_in == chat and shown.message == message:
                return agent_id
        return self._ended.get((chat, message))

    async def _record(self) -> None:
        todo, self._unrecorded = self._unrecorded, []
        for (agent_id, chat), message in todo:
            try:
                await self.fleet.record_card(self.platform, agent_id, chat, message)
            except Exception:  # noqa: BLE001 - the card is shown; only a restart would lose it
                logger.exception("could not record a status card agent=%s", agent_id)

    async def anchor(self, agent_id: str | None, chat: ChatId) -> MessageId | None:
        """Pinned cards: the agent's card in `chat`, to send what concerns the agent under it
        (waiting for its first send if it is on its way); None when there is none."""
        if not self.pinned or agent_id is None:
            return None
        key = (agent_id, chat)
        shown = self._shown.get(key) or await self._first_card(key)
        if shown is None:
            return None
        if shown.message is None and shown.sent is not None:
            try:
                return await asyncio.shield(shown.sent)
            except Exception:  # noqa: BLE001 - not sent: what concerns the agent goes alone
                return None
        return shown.message

    async def _first_card(self, key: tuple[str, ChatId]) -> _Shown | None:
        """The agent's card in a chat this run has not shown it in: the recorded one, else one
        sent now (faster than the first tick: a turn that ends at once). Each await may let a
        tick send the card meanwhile: then that one is the card, never a second."""
        agent_id, chat = key
        found = await self.fleet.card(self.platform, agent_id, chat)
        if (shown := self._shown.get(key)) is not None:
            return shown
        if found is not None:
            self._shown[key] = shown = _Shown(found, Reply())
            self._dirty.add(agent_id)
            return shown
        view = await self.fleet.agent(agent_id)
        if (shown := self._shown.get(key)) is not None or view is None:
            return shown
        self._send(key, self.render(view))
        return self._shown[key]

    async def run(self) -> None:
        while True:
            await self.clock.sleep(self.interval_s)
            await self.tick()
