"""The front-end kit's FleetPort over today's pool and store: the one bot module that reads
them for the kit, until supervisor/api.py offers the same calls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
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
    MessageId,
    Operator,
)
from commands.agents import agent_buttons
from commands.base import Role
from store import Store
from store.operators import OperatorRow
from supervisor.escalations import EscalationEvent
from supervisor.events import AgentOutput, EventHub, StateChanged, TurnFinished
from supervisor.pool import AgentPool


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


class _HubFeed:
    def __init__(self, queue: asyncio.Queue[Any]) -> None:
        self._queue = queue

    async def next(self) -> FleetEvent:
        while True:
            event = _activity(await self._queue.get())
            if event is not None:
                return event


class PoolFleet:
    """Implements bot.kit.ports.FleetPort."""

    def __init__(self, pool: AgentPool, store: Store, hub: EventHub) -> None:
        self.pool = pool
        self.store = store
        self.hub = hub

    @staticmethod
    def _operator(row: OperatorRow) -> Operator:
        return Operator(row.platform, row.user_id, row.name, Role[row.role.upper()],
                        row.added_by)

    async def operator(self, platform: str, user_id: str, /) -> Operator | None:
        row = await self.store.operators.get(platform, user_id)
        return self._operator(row) if row is not None else None

    async def operators(self, platform: str, /) -> Sequence[Operator]:
        return [self._operator(r) for r in await self.store.operators.list(platform)]

    async def save_operator(self, op: Operator, /) -> None:
        await self.store.operators.upsert(op.platform, op.user_id, op.name, op.role.name.lower(),
                                          op.added_by)

    async def redeem_invite(self, code: str, used_by: str, /) -> Role | None:
        role = await self.store.operators.redeem_invite(code, used_by)
        return Role[role.upper()] if role is not None else None

    async def audit(self, e: AuditEntry, /) -> None:
        await self.store.audit.record(platform=e.platform, user_id=e.user_id,
                                      user_name=e.user_name, action=e.action, args=e.args,
                                      ok=e.ok, result=e.result)

    async def notify(self, title: str, body: str, /) -> None:
        await self.pool.escalations.notify(None, title, body)

    def follow_escalations(self, frontend: str, /) -> AsyncIterator[Escalation]:
        return self.pool.escalations.follow(frontend)

    async def ack_escalation(self, escalation_id: str, frontend: str, /) -> None:
        await self.pool.escalations.ack(escalation_id, frontend)

    async def escalation(self, escalation_id: str, /) -> Escalation | None:
        return await self.pool.escalations.get(escalation_id)

    async def record_copy(self, copy: ChatCopy, /) -> None:
        await self.store.operators.add_copy(copy.escalation_id, copy.platform, copy.chat,
                                            copy.message)

    async def copies(self, escalation_id: str, platform: str, /) -> Sequence[ChatCopy]:
        return [ChatCopy(escalation_id, platform, ChatId(chat), MessageId(message))
                for chat, message in await self.store.operators.copies(escalation_id, platform)]

    async def escalation_for_message(self, platform: str, chat: ChatId, message: MessageId,
                                     /) -> str | None:
        return await self.store.operators.escalation_for_message(platform, chat, message)

    async def unsettled(self, platform: str, /) -> Sequence[Escalation]:
        rows = [await self.pool.escalations.get(i)
                for i in await self.store.operators.unsettled(platform)]
        return [r for r in rows if r is not None]

    async def settle(self, escalation_id: str, platform: str, /) -> None:
        await self.store.operators.settle(escalation_id, platform)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[_HubFeed]:
        with self.hub.subscription() as queue:
            yield _HubFeed(queue)

    async def agent(self, agent_id: str, /) -> AgentView | None:
        runner = next((r for r in self.pool.runners(include_dead=True) if r.id == agent_id),
                      None)
        if runner is None:
            return None
        totals = await self.store.turns.totals_by_agent(runner.id)
        live = runner.state.live
        return AgentView(runner.id, runner.name, str(runner.state), live, runner.current_tool,
                         runner.created_at, totals[0].turns if totals else 0,
                         totals[0].cost_usd if totals else 0.0,
                         agent_buttons(runner) if live else ())
