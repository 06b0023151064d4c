"""The API's part for the chat front ends' own bookkeeping (SupervisorAPI.chats): where each
copy of an escalation was posted on each platform, so that an answer edits every copy, and where
each agent's status card (on Slack: its thread) is."""

from __future__ import annotations

from store import Store
from supervisor.api.errors import store_errors
from supervisor.api.views import EscalationView
from supervisor.guard.escalations import Escalations


class ChatCopiesAPI:
    def __init__(self, store: Store, escalations: Escalations) -> None:
        self._store = store
        self._escalations = escalations

    @store_errors
    async def record_copy(self, esc_id: str, platform: str, chat_id: str,
                          message_id: str) -> None:
        await self._store.operators.add_copy(esc_id, platform, chat_id, message_id)

    @store_errors
    async def copies(self, esc_id: str, platform: str) -> tuple[tuple[str, str], ...]:
        """(chat_id, message_id) of every copy of an escalation on `platform`."""
        return tuple(await self._store.operators.copies(esc_id, platform))

    @store_errors
    async def escalation_for_message(self, platform: str, chat_id: str,
                                     message_id: str) -> str | None:
        return await self._store.operators.escalation_for_message(platform, chat_id, message_id)

    @store_errors
    async def unsettled_copies(self, platform: str) -> tuple[EscalationView, ...]:
        """Closed escalations whose copies on `platform` still show the question (and its
        buttons): a restart, or a front end that was down when they were answered."""
        rows = [await self._escalations.get(i)
                for i in await self._store.operators.unsettled(platform)]
        return tuple(r for r in rows if r is not None)

    @store_errors
    async def settle_copies(self, esc_id: str, platform: str) -> None:
        """Every copy of `esc_id` on `platform` now shows its outcome."""
        await self._store.operators.settle(esc_id, platform)

    @store_errors
    async def record_card(self, platform: str, agent_id: str, chat_id: str,
                          message_id: str) -> None:
        """Where an agent's status card is in a chat, for the agent's whole life."""
        await self._store.operators.set_card(platform, agent_id, chat_id, message_id)

    @store_errors
    async def card(self, platform: str, agent_id: str, chat_id: str) -> str | None:
        return await self._store.operators.card(platform, agent_id, chat_id)

    @store_errors
    async def agent_for_card(self, platform: str, chat_id: str, message_id: str) -> str | None:
        """The agent whose status card (on Slack: whose thread) `message_id` is."""
        return await self._store.operators.agent_for_card(platform, chat_id, message_id)
