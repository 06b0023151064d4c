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


# The `tool_name` of the notice that ends a turn the operator asked for (/ask, /spawn): they are
# waiting for it, so a front end never holds it back for a digest (bot/kit/digest.py).
REPLY_NOTICE = "operator_reply"


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
    than `maxsize` events behind loses the oldest ones (it can re-read the store). A
    subscription names the event classes it reads (exact classes; none: every event), so an
    agent's output, thousands a second with a fleet, is put only in the queues of those that
    read it (the front ends), not in every internal watcher's that would wake to drop it."""

    def __init__(self, maxsize: int = 10_000) -> None:
        self._every: set[asyncio.Queue[Event]] = set()
        self._by_kind: dict[type, set[asyncio.Queue[Event]]] = {}
        self._maxsize = maxsize

    def publish(self, event: Event) -> None:
        for queue in self._every:
            _put(queue, event)
        for queue in self._by_kind.get(event.__class__, ()):
            _put(queue, event)

    @contextlib.contextmanager
    def subscription(self, *kinds: type) -> Iterator[asyncio.Queue[Event]]:
        """A queue of every event published from now on, or only of the classes `kinds`."""
        queue: asyncio.Queue[Event] = asyncio.Queue(self._maxsize)
        sets = [self._by_kind.setdefault(k, set()) for k in kinds] if kinds else [self._every]
        for subscribers in sets:
            subscribers.add(queue)
        try:
            yield queue
        finally:
            for subscribers in sets:
                subscribers.discard(queue)

    async def stream(self) -> AsyncIterator[Event]:
        with self.subscription() as queue:
            while True:
                yield await queue.get()


def _put(queue: asyncio.Queue[Event], event: Event) -> None:
    # Once per agent output and subscriber: the put is tried first, not preceded by full(),
    # which costs as much again.
    try:
        queue.put_nowait(event)
    except asyncio.QueueFull:
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
        logger.warning("event subscriber lagging, dropped oldest event")
        queue.put_nowait(event)
