"""The front-end kit's FleetPort over supervisor/api/__init__.py: the kit's view of the fleet, built
from the API's calls and read models (bot never reaches past the API)."""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bot.kit.ports import (
    ActivityKind,
    AgentActivity,
    AgentView,
    AuditEntry,
    ChatCopy,
    ChatId,
    Escalation,
    EscalationClosed,
    FleetEvent,
    IncomingFile,
    MessageId,
    Operator,
    Sender,
)
from commands.agents import agent_buttons
from commands.base import Attachment, Reply, Role
from supervisor.api import (
    AgentDetail,
    AgentOutput,
    AuditView,
    EscalationEvent,
    Event,
    HaltView,
    OperatorView,
    StateChanged,
    SupervisorAPI,
    SupervisorError,
    TurnFinished,
    UnknownAgent,
)
from supervisor.api import AgentView as FleetAgent


def _activity(event: object) -> FleetEvent | None:
    if isinstance(event, EscalationEvent):
        return EscalationClosed(event.escalation) if event.what == "answered" else None
    if isinstance(event, StateChanged):
        return AgentActivity(event.agent_id, ActivityKind.STATE, str(event.new))
    if isinstance(event, TurnFinished):
        return AgentActivity(event.agent_id, ActivityKind.TURN)
    if isinstance(event, AgentOutput) and event.kind in ("tool_use", "text"):
        kind = ActivityKind.TOOL if event.kind == "tool_use" else ActivityKind.TEXT
        return AgentActivity(event.agent_id, kind, event.text)
    return None


class _Feed:
    def __init__(self, queue: asyncio.Queue[Any]) -> None:
        self._queue = queue

    async def next(self) -> FleetEvent:
        while True:
            event = _activity(await self._queue.get())
            if event is not None:
                return event


@dataclass(frozen=True, slots=True)
class _Who:
    """Who an audit row is about, as the API's Actor."""

    id: str
    name: str
    platform: str


class ApiFleet:
    """Implements bot.kit.ports.FleetPort over the supervisor API."""

    def __init__(self, api: SupervisorAPI) -> None:
        self.api = api

    @staticmethod
    def _operator(row: OperatorView) -> Operator:
        return Operator(row.platform, row.user_id, row.name, Role[row.role.upper()],
                        row.added_by)

    async def operator(self, platform: str, user_id: str, /) -> Operator | None:
        row = await self.api.operator(platform, user_id)
        return self._operator(row) if row is not None else None

    async def operators(self, platform: str, /) -> Sequence[Operator]:
        return [self._operator(r) for r in await self.api.operators(platform)]

    async def save_operator(self, op: Operator, /) -> None:
        await self.api.add_operator(op.platform, op.user_id, op.name, op.role.name.lower(),
                                    added_by=op.added_by)

    async def redeem_invite(self, code: str, used_by: str, /) -> Role | None:
        platform, _, user_id = used_by.partition(":")
        row = await self.api.redeem_invite(code, platform, user_id, user_id)
        return Role[row.role.upper()] if row is not None else None

    async def audit(self, e: AuditEntry, /) -> None:
        await self.api.audit(_Who(e.user_id, e.user_name, e.platform), e.action, e.args,
                             ok=e.ok, result=e.result)

    async def notify(self, title: str, body: str, /) -> None:
        await self.api.notify(title, body)

    def follow_escalations(self, frontend: str, /) -> AsyncIterator[Escalation]:
        return self.api.follow_escalations(frontend)

    async def ack_escalation(self, escalation_id: str, frontend: str, /) -> None:
        await self.api.ack_escalation(escalation_id, frontend)

    async def escalation(self, escalation_id: str, /) -> Escalation | None:
        return await self.api.escalation(escalation_id)

    async def record_copy(self, copy: ChatCopy, /) -> None:
        await self.api.chats.record_copy(copy.escalation_id, copy.platform, copy.chat, copy.message)

    async def copies(self, escalation_id: str, platform: str, /) -> Sequence[ChatCopy]:
        return [ChatCopy(escalation_id, platform, ChatId(chat), MessageId(message))
                for chat, message in await self.api.chats.copies(escalation_id, platform)]

    async def escalation_for_message(self, platform: str, chat: ChatId, message: MessageId,
                                     /) -> str | None:
        return await self.api.chats.escalation_for_message(platform, chat, message)

    async def unsettled(self, platform: str, /) -> Sequence[Escalation]:
        return list(await self.api.chats.unsettled_copies(platform))

    async def settle(self, escalation_id: str, platform: str, /) -> None:
        await self.api.chats.settle_copies(escalation_id, platform)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[_Feed]:
        with self.api.subscription() as queue:
            yield _Feed(queue)

    async def agent(self, agent_id: str, /) -> AgentView | None:
        try:
            a = await self.api.agent(agent_id)
        except UnknownAgent:
            return None
        return AgentView(a.id, a.name, str(a.state), a.live, a.current_tool, a.created_at,
                         a.turns, a.cost_usd, agent_buttons(a) if a.live else ())

    async def card(self, platform: str, agent_id: str, chat: ChatId, /) -> MessageId | None:
        found = await self.api.chats.card(platform, agent_id, chat)
        return MessageId(found) if found is not None else None

    async def record_card(self, platform: str, agent_id: str, chat: ChatId,
                          message: MessageId, /) -> None:
        await self.api.chats.record_card(platform, agent_id, chat, message)

    async def agent_for_card(self, platform: str, chat: ChatId, message: MessageId,
                             /) -> str | None:
        return await self.api.chats.agent_for_card(platform, chat, message)

    async def pending(self, agent_id: str | None = None, /) -> Sequence[Escalation]:
        try:
            return await self.api.pending(agent_id)
        except UnknownAgent:  # a card or thread outlives its agent: nothing of it is open
            return ()

    def agents(self, *, include_ended: bool = False) -> Sequence[FleetAgent]:
        return self.api.agents(include_ended=include_ended)

    async def agent_detail(self, agent_id: str, /) -> AgentDetail | None:
        try:
            return await self.api.agent(agent_id)
        except UnknownAgent:
            return None

    async def recent_actions(self, n: int, /) -> Sequence[AuditView]:
        return await self.api.recent_actions(n)

    def halt_state(self) -> HaltView | None:
        return self.api.halt_state()

    def events(self) -> AsyncIterator[Event | EscalationEvent]:
        return self.api.events()

    async def outgoing_file(self, file_id: str, /) -> Attachment | None:
        found = await self.api.files.outgoing(file_id)
        if found is None:
            return None
        name, content = found
        return Attachment(name, content, mimetypes.guess_type(name)[0] or
                          "application/octet-stream")

    def attachment_limit(self) -> int:
        return self.api.files.attachment_max_bytes

    async def attach(self, agent_id: str, sent: IncomingFile, data: bytes, caption: str,
                     by: Sender, platform: str, /) -> Reply:
        try:
            done = await self.api.files.attach(
                agent_id, sent.name, data, by=_Who(f"{platform}:{by.user_id}", by.name, platform),
                kind=sent.kind, mime=sent.mime, caption=caption)
        except SupervisorError as exc:
            return Reply.error(exc.what, exc.fix)
        queued = f" ({done.ahead} ahead of it)" if done.ahead else ""
        return Reply.text(f"📎 Saved for {done.agent.name} as {done.path}; its next turn tells "
                          f"it so{queued}.")
