"""Escalations: questions and permission requests to the operator, kept as outbox rows.

An escalation is a row first and a future second: the row survives a restart, the future only
lets a waiting agent continue the moment the first answer lands. Front ends read the outbox with
`follow(frontend)` and acknowledge what they delivered; ids make redelivery harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from store import Store
from store.escalations import EscalationRow
from supervisor.errors import AlreadyAnswered, SupervisorError, UnknownEscalation

logger = logging.getLogger(__name__)

ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


class Kind(StrEnum):
    PERMISSION = "permission"
    QUESTION = "question"
    PLAN = "plan"
    NOTICE = "notice"


class Decision(StrEnum):
    ALLOW = "allow"
    ALLOW_SESSION = "allow_session"
    DENY = "deny"
    ANSWER = "answer"


@dataclass(frozen=True, slots=True)
class Answer:
    decision: Decision
    text: str = ""
    by: str = ""
    via: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"decision": str(self.decision), "text": self.text}


@dataclass(frozen=True, slots=True)
class EscalationEvent:
    """Published on the hub: an escalation or notice was created, reminded or answered."""

    what: str  # created | answered | reminder
    escalation: EscalationRow
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Timeouts:
    reminder_s: float = 300.0
    timeout_s: float = 900.0
    on_timeout: str = "deny"  # deny | pause


class Escalations:
    def __init__(self, store: Store, hub: Any, timeouts: Timeouts) -> None:
        self.store = store
        self.hub = hub
        self.timeouts = timeouts
        self._waiters: dict[str, asyncio.Future[Answer]] = {}

    async def _new_id(self) -> str:
        for length in (4, 4, 4, 5, 6, 8):
            esc_id = "".join(secrets.choice(ID_ALPHABET) for _ in range(length))
            if not await self.store.escalations.id_taken(esc_id):
                return esc_id
        raise SupervisorError("could not allocate an escalation id")

    async def open(
        self, *, agent_id: str | None, kind: Kind, title: str, body: str,
        tool_name: str | None = None, tool_input: dict[str, Any] | None = None,
        options: tuple[str, ...] = (), free_text: bool = False, detail: str | None = None,
        detail_name: str | None = None,
    ) -> EscalationRow:
        """`body` is short (what kind of call, why asked); `detail` is the complete thing
        being asked about, which every front end must be able to show whole."""
        row = await self.store.escalations.create(
            id=await self._new_id(), agent_id=agent_id, kind=kind, title=title, body=body,
            tool_name=tool_name, tool_input=tool_input, options=options, free_text=free_text,
            detail=detail, detail_name=detail_name,
        )
        self._waiters[row.id] = asyncio.get_running_loop().create_future()
        self.hub.publish(EscalationEvent("created", row))
        logger.info("escalation opened id=%s agent=%s kind=%s", row.id, agent_id, kind)
        return row

    async def notify(self, agent_id: str | None, title: str, body: str = "",
                     ref_id: str | None = None, *, detail: str | None = None,
                     detail_name: str | None = None) -> EscalationRow:
        """A notice: pushed to the operator like an escalation, needs no answer."""
        row = await self.store.escalations.create(
            id=await self._new_id(), agent_id=agent_id, kind=Kind.NOTICE, title=title, body=body,
            ref_id=ref_id, status="info", detail=detail, detail_name=detail_name,
        )
        self.hub.publish(EscalationEvent("created", row))
        return row

    async def wait(self, row: EscalationRow, *, on_pause: Any = None,
                   on_resume: Any = None, timeouts: Timeouts | None = None) -> Answer:
        """Wait for the first answer; remind, then apply the timeout default."""
        fut = self._waiters.get(row.id)
        if fut is None:
            raise UnknownEscalation(row.id)
        t = timeouts or self.timeouts
        try:
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(fut), t.reminder_s)
            await self.notify(row.agent_id, f"Reminder: {row.title}",
                              f"Still waiting for an answer to {row.id}.", ref_id=row.id)
            remaining = max(0.0, t.timeout_s - t.reminder_s)
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(fut), remaining)
            if t.on_timeout == "pause" and on_pause is not None:
                await on_pause()
                await self.notify(row.agent_id, f"No answer to {row.id}: agent paused",
                                  "The question stays open; answering it resumes the agent.",
                                  ref_id=row.id)
                answer = await asyncio.shield(fut)
                if on_resume is not None:
                    await on_resume()
                return answer
            answer = Answer(Decision.DENY, "no answer from the operator in time", "timeout",
                            "switchboard")
            if await self._close(row.id, "expired", answer) is not None:
                await self.notify(row.agent_id, f"No answer to {row.id}: denied",
                                  row.title, ref_id=row.id)
                return answer
            return await asyncio.shield(fut)  # an answer won the race with the timeout
        finally:
            self._waiters.pop(row.id, None)

    async def _close(self, esc_id: str, status: str, answer: Answer) -> EscalationRow | None:
        """Close an open row, hand the answer to whoever waits, tell the front ends. Returns
        the closed row, or None if it was no longer open (an earlier answer won)."""
        if not await self.store.escalations.close(esc_id, status=status,
                                                  answer=answer.as_json(), by=answer.by,
                                                  via=answer.via):
            return None
        fut = self._waiters.get(esc_id)
        if fut is not None and not fut.done():
            fut.set_result(answer)
        closed = await self.store.escalations.get(esc_id)
        if closed is not None:
            self.hub.publish(EscalationEvent("answered", closed))
        return closed

    async def answer(self, esc_id: str, answer: Answer) -> EscalationRow:
        """Record the first answer; later ones raise AlreadyAnswered naming the winner."""
        row = await self.store.escalations.get(esc_id)
        if row is None:
            raise UnknownEscalation(esc_id)
        if row.kind == Kind.NOTICE:
            raise SupervisorError(f"{esc_id} is a notice; it needs no answer")
        closed = await self._close(esc_id, "answered", answer)
        if closed is None:
            latest = await self.store.escalations.get(esc_id)
            assert latest is not None
            raise AlreadyAnswered(latest)
        return closed

    async def cancel_one(self, esc_id: str, reason: str) -> bool:
        """Close one open escalation as cancelled, denying whoever waits on it."""
        answer = Answer(Decision.DENY, reason, "switchboard", "switchboard")
        return await self._close(esc_id, "cancelled", answer) is not None

    async def cancel_all(self, reason: str) -> int:
        rows = await self.store.escalations.open_rows()
        return sum([await self.cancel_one(row.id, reason) for row in rows])

    async def cancel_for_agent(self, agent_id: str, reason: str) -> int:
        """Close an agent's open escalations (it was stopped or killed): deny what waits."""
        rows = await self.store.escalations.open_rows(agent_id)
        return sum([await self.cancel_one(row.id, reason) for row in rows])

    async def expire_orphans(self, reason: str) -> list[EscalationRow]:
        """After a restart: open rows whose waiting process is gone are closed as expired."""
        expired = []
        for row in await self.store.escalations.open_rows():
            if row.id in self._waiters:
                continue
            answer = Answer(Decision.DENY, reason, "switchboard", "restart")
            if await self._close(row.id, "expired", answer) is not None:
                expired.append(row)
                await self.notify(row.agent_id, f"Expired: {row.title}",
                                  f"{row.id} was not answered before {reason}.", ref_id=row.id)
        return expired

    async def pending(self, agent_id: str | None = None) -> list[EscalationRow]:
        return await self.store.escalations.open_rows(agent_id)

    async def get(self, esc_id: str) -> EscalationRow | None:
        return await self.store.escalations.get(esc_id)

    async def follow(self, frontend: str) -> AsyncIterator[EscalationRow]:
        """Every escalation and notice this front end has not acknowledged, oldest first, then
        new ones as they arrive. Call `ack` after delivering; unacknowledged rows come again."""
        with self.hub.subscription() as queue:
            while True:
                for row in await self.store.escalations.undelivered(frontend):
                    yield row
                while True:
                    event = await queue.get()
                    if isinstance(event, EscalationEvent) and event.what == "created":
                        break

    async def ack(self, esc_id: str, frontend: str) -> None:
        await self.store.escalations.ack(esc_id, frontend)
