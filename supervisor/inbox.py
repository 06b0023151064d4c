"""An agent's inbox: what becomes its next turn. A small protocol with two implementations: the
durable bus (supervisor/bus.py: `BusInbox`, what the pool gives every agent) and the in-memory
queue below (runners built without a bus, in tests).

A take hands out everything pending as one `Taken` (one turn); the runner acknowledges it when
the turn ends: consumed, or not (the turn failed: the bus delivers it again, up to its limit).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Taken:
    """One turn's input: its text, and the lease token that acknowledges it (None in memory)."""

    text: str
    token: str | None = None
    count: int = 1


class Inbox(Protocol):
    async def put(self, text: str) -> None:
        """An operator's message; stored (durably, for the bus) before this returns."""

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
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def put(self, text: str) -> None:
        self._queue.put_nowait(text)

    async def take(self, timeout_s: float) -> Taken | None:
        try:
            # Not asyncio.wait_for: on 3.11 a cancel racing its timeout can leave the task
            # "cancelling" forever (seen at shutdown with 50 agents). timeout() is safe.
            async with asyncio.timeout(timeout_s):
                text = await self._queue.get()
        except TimeoutError:
            return None
        return None if text is None else Taken(text)

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
