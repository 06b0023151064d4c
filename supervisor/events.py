"""Typed in-process events and the hub that front ends subscribe to (never importing bot)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

logger = logging.getLogger(__name__)


class AgentState(StrEnum):
    STARTING = "starting"
    WORKING = "working"
    IDLE = "idle"
    WAITING = "waiting"
    STALLED = "stalled"
    PAUSED = "paused"
    STOPPED = "stopped"
    FAILED = "failed"
    KILLED = "killed"
    # Its session could not be resumed after a restart: it waits for the operator's choice
    # (start fresh with a summary), and nothing retries it by itself.
    RESUME_FAILED = "resume_failed"

    @property
    def live(self) -> bool:
        return self not in (AgentState.STOPPED, AgentState.FAILED, AgentState.KILLED,
                            AgentState.RESUME_FAILED)


@dataclass(frozen=True, slots=True)
class StateChanged:
    agent_id: str
    name: str
    old: AgentState | None
    new: AgentState
    reason: str
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """Something the agent said or did: `kind` is text, tool_use, tool_result, system or result."""

    agent_id: str
    name: str
    kind: str
    text: str
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class TurnFinished:
    agent_id: str
    name: str
    turn_id: int
    ok: bool
    result_text: str
    cost_usd: float
    at: float = field(default_factory=time.time)


Event = StateChanged | AgentOutput | TurnFinished


class EventHub:
    """Fan-out of events to subscribers. Publishing never blocks: a subscriber that falls more
    than `maxsize` events behind loses the oldest ones (it can re-read the store)."""

    def __init__(self, maxsize: int = 10_000) -> None:
        self._subs: set[asyncio.Queue[Event]] = set()
        self._maxsize = maxsize

    def publish(self, event: Event) -> None:
        # Once per agent output (thousands a second with a fleet): the put is tried first, not
        # preceded by full(), which costs as much again.
        for queue in self._subs:
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
                logger.warning("event subscriber lagging, dropped oldest event")
                queue.put_nowait(event)

    @contextlib.contextmanager
    def subscription(self) -> Iterator[asyncio.Queue[Event]]:
        queue: asyncio.Queue[Event] = asyncio.Queue(self._maxsize)
        self._subs.add(queue)
        try:
            yield queue
        finally:
            self._subs.discard(queue)

    async def stream(self) -> AsyncIterator[Event]:
        with self.subscription() as queue:
            while True:
                yield await queue.get()

