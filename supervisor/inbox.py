"""An agent's inbox: what becomes its next turn. A small protocol so the durable bus can take
the in-memory queue's place (put, take, ack, drop all)."""

from __future__ import annotations

import asyncio
from typing import Protocol


class Inbox(Protocol):
    def put(self, text: str) -> None: ...

    async def take(self, timeout_s: float) -> str | None:
        """The next message, or None after `timeout_s` (or when woken with nothing)."""

    def ack(self) -> None:
        """The message last taken has been handled (its turn ended)."""

    def drop_all(self) -> int:
        """Forget everything queued; how many were dropped."""

    def wake(self) -> None:
        """Make a waiting take() return None now (the agent is being killed)."""

    def __len__(self) -> int: ...


class MemoryInbox:
    """The in-process inbox: a FIFO queue. Nothing survives a restart; ack has nothing to do."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()

    def put(self, text: str) -> None:
        self._queue.put_nowait(text)

    async def take(self, timeout_s: float) -> str | None:
        try:
            # Not asyncio.wait_for: on 3.11 a cancel racing its timeout can leave the task
            # "cancelling" forever (seen at shutdown with 50 agents). timeout() is safe.
            async with asyncio.timeout(timeout_s):
                return await self._queue.get()
        except TimeoutError:
            return None

    def ack(self) -> None:
        return None

    def drop_all(self) -> int:
        dropped = 0
        while not self._queue.empty():
            if self._queue.get_nowait() is not None:
                dropped += 1
        return dropped

    def wake(self) -> None:
        self._queue.put_nowait(None)

    def __len__(self) -> int:
        return self._queue.qsize()
