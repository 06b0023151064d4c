"""The bus's batched writer: one task that hands every write waiting when it wakes (sends,
leases, acks) to the bus's writer thread as one transaction, the sends of a batch in two
statements (store/bus.py BusWriter), and gives each caller its result."""

from __future__ import annotations

import asyncio
import collections
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from store import Store
from store.bus import NewMessage
from store.errors import StoreError
from supervisor.errors import ShuttingDown

T = TypeVar("T")


def _fail(ops: list[_Op], exc: BaseException) -> None:
    for op in ops:
        if not op.future.done():
            op.future.set_exception(exc)


@dataclass(slots=True)
class _Op:
    fn: Callable[[sqlite3.Connection], Any] | None
    future: asyncio.Future[Any]
    message: NewMessage | None = None  # a send: stored with the batch's other sends at once


class BatchWriter:
    """One task; every write waiting when it wakes goes to the bus's writer thread as one
    transaction (all its sends in two statements; store/bus.py BusWriter)."""

    def __init__(self, store: Store, max_batch: int = 1000) -> None:
        self.store = store
        self.conn = store.bus.writer()
        self.max_batch = max_batch
        self._queue: collections.deque[_Op] = collections.deque()
        self._waiting = asyncio.Event()
        self.batches = 0
        # Called at commit, before any caller resumes: inbox counts never lag their rows.
        self.on_stored: Callable[[NewMessage, int], None] = lambda _msg, _id: None

    async def submit(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append(_Op(fn, future))
        self._waiting.set()
        return await future

    async def insert(self, msg: NewMessage) -> tuple[int, bool]:
        future: asyncio.Future[tuple[int, bool]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Op(None, future, msg))
        self._waiting.set()
        return await future

    async def run(self) -> None:
        queue = self._queue
        while True:
            if not queue:
                self._waiting.clear()
                await self._waiting.wait()
            ops = [queue.popleft() for _ in range(min(len(queue), self.max_batch))]
            await self._apply(ops)

    async def _apply(self, batch: list[_Op]) -> None:
        sends = [op.message for op in batch if op.message is not None]
        ordered = [op for op in batch if op.message is not None] + \
            [op for op in batch if op.message is None]  # sends first: a lease sees them
        repo = self.store.bus
        writes: list[Callable[[sqlite3.Connection], Any]] = []
        if sends:
            writes.append(lambda conn: repo.insert_many(conn, sends))
        writes += [op.fn for op in ordered[len(sends):] if op.fn is not None]
        try:
            results = await self.conn.batch(writes)
        except (StoreError, OSError) as exc:
            _fail(ordered, exc)
            return
        except asyncio.CancelledError:
            # The bus is closing mid-batch: its callers must not wait for an answer forever
            # (a runner's last ack would hold up shutdown). Whatever the thread commits stays.
            _fail(ordered, ShuttingDown())
            raise
        self.batches += 1
        if sends:  # the sends' one write: its value is one (id, duplicate) per send
            ok, value = results[0]
            if ok:
                for msg, (message_id, duplicate) in zip(sends, value, strict=True):
                    if not duplicate:
                        self.on_stored(msg, message_id)
            results = ([(True, v) for v in value] if ok else [(False, value)] * len(sends)) \
                + results[1:]
        for op, (ok, value) in zip(ordered, results, strict=True):
            if op.future.done():
                continue
            if ok:
                op.future.set_result(value)
            else:
                op.future.set_exception(value)

    def fail_waiting(self) -> None:
        while self._queue:
            op = self._queue.popleft()
            if not op.future.done():
                op.future.set_exception(ShuttingDown())
