"""The bus's batched writer: one task that hands every write waiting when it wakes (sends,
leases, acks) to the bus's writer thread as one transaction, the sends of a batch in two
statements (store/bus.py BusWriter), and gives each caller its result."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, TypeVar

from store import Store
from store.bus import Lease, NewMessage
from store.errors import StoreError
from store.writer import SyncConn
from supervisor.errors import ShuttingDown

T = TypeVar("T")


Write = Callable[[SyncConn], Any]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _fail(futures: list[asyncio.Future[Any]], exc: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(exc)


class BatchWriter:
    """One task; every write waiting when it wakes goes to the bus's writer thread as one
    transaction (all its sends in two statements; store/bus.py BusWriter).

    Sends and other writes wait in two queues of plain (what, future) pairs: no object per
    write beyond its future, and no sorting of a batch (the sends go first: a lease in the
    same batch sees them)."""

    def __init__(self, store: Store, max_batch: int = 1000) -> None:
        self.store = store
        self.conn = store.bus.writer()
        self.max_batch = max_batch
        self._sends: collections.deque[tuple[NewMessage, asyncio.Future[Any]]] = \
            collections.deque()
        self._writes: collections.deque[tuple[Write, asyncio.Future[Any]]] = \
            collections.deque()
        self._acks: collections.deque[tuple[tuple[Lease, float], asyncio.Future[Any]]] = \
            collections.deque()
        self._waiting = asyncio.Event()
        self.batches = 0
        # Called at commit with the messages stored (not the duplicates), before any caller
        # resumes: inbox counts never lag their rows.
        self.on_stored: Callable[[list[NewMessage]], None] = lambda _msgs: None

    def submit(self, fn: Callable[[SyncConn], T]) -> asyncio.Future[T]:
        """Queue a write; await the future for its value (not a coroutine, as `insert`)."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._writes.append((fn, future))
        self._waiting.set()
        return future

    def insert(self, msg: NewMessage) -> asyncio.Future[tuple[int, bool]]:
        """Queue a send; await the future for its (id, duplicate). Not a coroutine: one is
        not worth its frame for each message of a storm."""
        future: asyncio.Future[tuple[int, bool]] = asyncio.get_running_loop().create_future()
        self._sends.append((msg, future))
        self._waiting.set()
        return future

    def ack(self, lease: Lease, now: float) -> asyncio.Future[int]:
        """Queue an acknowledgement (consumed); the batch's are one statement (`ack_many`)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._acks.append(((lease, now), future))
        self._waiting.set()
        return future

    async def run(self) -> None:
        sends, writes, acks = self._sends, self._writes, self._acks
        while True:
            if not sends and not writes and not acks:
                self._waiting.clear()
                await self._waiting.wait()
            room = self.max_batch
            batch_sends = [sends.popleft() for _ in range(min(len(sends), room))]
            room -= len(batch_sends)
            batch_acks = [acks.popleft() for _ in range(min(len(acks), room))]
            room -= len(batch_acks)
            batch_writes = [writes.popleft() for _ in range(min(len(writes), room))]
            await self._apply(batch_sends, batch_writes, batch_acks)

    async def _apply(self, sends: list[tuple[NewMessage, asyncio.Future[Any]]],
                     writes: list[tuple[Write, asyncio.Future[Any]]],
                     acks: list[tuple[tuple[Lease, float], asyncio.Future[Any]]]) -> None:
        repo = self.store.bus
        fns = [fn for fn, _ in writes]
        if acks:  # one write for all of them: their leases' deliveries are disjoint
            leases = [lease for lease, _ in acks]
            fns.insert(0, lambda conn: repo.ack_many(conn, leases))
        if sends:
            msgs = [msg for msg, _ in sends]
            fns.insert(0, lambda conn: repo.insert_many(conn, msgs))
        futures = [f for _, f in sends] + [f for _, f in acks] + [f for _, f in writes]
        try:
            results = await self.conn.batch(fns)
        except (StoreError, OSError) as exc:
            _fail(futures, exc)
            return
        except asyncio.CancelledError:
            # The bus is closing mid-batch: its callers must not wait for an answer forever
            # (a runner's last ack would hold up shutdown). Whatever the thread commits stays.
            _fail(futures, ShuttingDown())
            raise
        self.batches += 1
        if sends:  # the sends' one write: its value is one (id, duplicate) per send
            self._stored(sends, *results[0])
            results = results[1:]
        if acks:  # the acknowledgements' one write
            ok, value = results[0]
            results = results[1:]
            for _, future in acks:
                _settle(future, ok, None if ok else value)
        for (_, future), (ok, value) in zip(writes, results, strict=True):
            _settle(future, ok, value)

    def _stored(self, sends: list[tuple[NewMessage, asyncio.Future[Any]]], ok: bool,
                value: Any) -> None:
        if not ok:
            _fail([f for _, f in sends], value)
            return
        stored_msgs = []
        for (msg, future), stored in zip(sends, value, strict=True):
            if not stored[1]:
                stored_msgs.append(msg)
            if not future.done():  # resumes its caller only after this batch is done
                future.set_result(stored)
        self.on_stored(stored_msgs)

    def fail_waiting(self) -> None:
        for queue in (self._sends, self._writes, self._acks):
            while queue:
                _, future = queue.popleft()
                if not future.done():
                    future.set_exception(ShuttingDown())
