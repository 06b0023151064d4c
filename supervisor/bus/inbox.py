"""An agent's inbox: what becomes its next turn. A small protocol with two implementations: the
durable bus (supervisor/bus/core.py: `BusInbox`, what the pool gives every agent) and the in-memory
queue below (runners built without a bus, in tests).

A take hands out everything pending as one `Taken` (one turn); the runner acknowledges it when
the turn ends: consumed, or not (the turn failed: the bus delivers it again, up to its limit).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Origin(StrEnum):
    """Who asked for a turn. Recorded with every turn (turns.origin), as data carried from
    the messages it holds, never read back out of the rendered prompt."""

    OPERATOR = "operator"  # /ask, /spawn, "run it again"
    PEER = "peer"  # another agent: a bus message, or the first prompt of a child it spawned
    SCHEDULE = "schedule"  # a schedule's run: a wake, or the first prompt of a run's agent
    CHARTER = "charter"  # a standing agent's question its charter decided, sent back to it
    RESTART = "restart"  # the supervisor's note after a restart (a request left unanswered)
    REVIEW = "review"  # a request offered to a reviewer agent (supervisor/guard/reviews.py)
    SYSTEM = "system"  # Switchboard's own notices (a sibling's commits, a message expired)


@dataclass(frozen=True, slots=True)
class Taken:
    """One turn's input: its text, the lease token that acknowledges it (None in memory), and
    as data who it came from: each message's origin, and the bus ids."""

    text: str
    token: str | None = None
    count: int = 1
    origins: tuple[Origin, ...] = (Origin.OPERATOR,)
    message_ids: tuple[int, ...] = ()

    @property
    def origin(self) -> str:
        """The turn's origin: one word, or several joined by commas (each once, in order)."""
        return ",".join(dict.fromkeys(self.origins))


# A scheduled run whose schedule wants news only when something is wrong carries this note;
# a turn of nothing but such runs that went well is no news (supervisor/schedule/scheduler.py).
NOTIFY_MARK = "NOTIFY:"
QUIET_NOTE = (f"\n\n[Switchboard] This is a scheduled run. If all is well, end with one short "
              f"line; to tell the operator something (findings, or because this task asks you "
              f"to report), put it on a line that starts with {NOTIFY_MARK}")


def quiet_turn(taken: Taken) -> bool:
    """Whether a turn is only scheduled runs whose schedules want no news when all is well:
    every message in it is the scheduler's (its origin, carried as data) and carries the note
    that says how to report findings; or only review requests to a reviewer agent (its
    decisions reach the operator as notices of their own)."""
    if taken.message_ids and all(o == Origin.REVIEW for o in taken.origins):
        return True
    return bool(taken.message_ids) and all(o == Origin.SCHEDULE for o in taken.origins) and \
        taken.text.count(QUIET_NOTE) == len(taken.message_ids)


class Inbox(Protocol):
    async def put(self, text: str, origin: Origin = Origin.OPERATOR) -> None:
        """A message from the operator (or, with `origin`, on behalf of a schedule, a parent
        agent or a restart); stored (durably, for the bus) before this returns."""

    async def take(self, timeout_s: float) -> Taken | None:
        """Everything pending, as one turn, or None after `timeout_s` (or when woken)."""

    async def ack(self, taken: Taken, *, consumed: bool = True) -> None:
        """The turn of `taken` ended: consumed, or failed (deliver it again)."""

    async def drop_all(self, reason: str) -> int:
        """Give up everything queued (the agent is over budget or killed); how many."""

    def wake(self) -> None:
        """Make a waiting take() return None now (the agent is being killed)."""

    def __len__(self) -> int: ...


class MemoryInbox:
    """The in-process inbox: a FIFO queue, one message a turn. Nothing survives a restart."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[str, Origin] | None] = asyncio.Queue()

    async def put(self, text: str, origin: Origin = Origin.OPERATOR) -> None:
        self._queue.put_nowait((text, origin))

    async def take(self, timeout_s: float) -> Taken | None:
        try:
            # Not asyncio.wait_for: on 3.11 a cancel racing its timeout can leave the task
            # "cancelling" forever (seen at shutdown with 50 agents). timeout() is safe.
            async with asyncio.timeout(timeout_s):
                item = await self._queue.get()
        except TimeoutError:
            return None
        return None if item is None else Taken(item[0], origins=(item[1],))

    async def ack(self, taken: Taken, *, consumed: bool = True) -> None:
        return None

    async def drop_all(self, reason: str) -> int:
        dropped = 0
        while not self._queue.empty():
            if self._queue.get_nowait() is not None:
                dropped += 1
        return dropped

    def wake(self) -> None:
        self._queue.put_nowait(None)

    def __len__(self) -> int:
        return self._queue.qsize()
