"""The event ingest: every agent's stream-json events, batched, written off the event loop.

A runner's record path only appends a row to a list (`add`, no await, no I/O). One writer task
wakes on the first row, waits up to `window_s` for more (or until `max_batch` rows are waiting,
or someone asks for a flush), and hands the whole batch to a writer thread with its own SQLite
connection (store/writer.py) as one transaction. Each row's JSON is made as it is queued
(orjson, well under a microsecond), so that a waiting row is plain strings and numbers.

The guarantee: what is acknowledged to a front end or counted in a cost is durable. Turn ends,
costs, escalations, bus messages and state changes are written by the store directly (each
committed before it is reported); the runner `flush`es the ingest before each of them, so the
events that led up to one are committed first. A crash (SIGKILL, power) loses at most the open
batch of raw events: rows added in the last `window_s`, at most `max_batch` of them (and the
batch being written, if the writer is busy). When the fleet streams faster than the writer
commits, `behind` holds the record path back (an agent's next message waits for `room`), so the
rows waiting never grow past a batch and one more event per agent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from store import Store
from store.errors import StoreError
from store.events import STATEMENT_ROWS, EventRepo, RawEvent, encode
from store.writer import ThreadWriter
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.errors import ShuttingDown

logger = logging.getLogger(__name__)

WINDOW_S = 0.02
MAX_BATCH = 2000


class EventIngest:
    def __init__(self, store: Store, *, window_s: float = WINDOW_S, max_batch: int = MAX_BATCH,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.window_s = window_s
        self.max_batch = max_batch
        self.clock = clock
        self.writer = ThreadWriter(store.db.writer_target, name="event-ingest")
        self._rows: list[RawEvent] = []
        self._flushers: list[asyncio.Future[None]] = []
        self._wake = asyncio.Event()
        self._full = asyncio.Event()
        self._room = asyncio.Event()  # clear while a whole batch waits (see `behind`)
        self._room.set()
        self._task: asyncio.Task[None] | None = None
        self._writing = False
        self.stored = 0  # rows committed
        self.batches = 0  # transactions committed
        self.lost = 0  # rows a failed write dropped (storage trouble)

    @property
    def pending(self) -> int:
        return len(self._rows)

    @property
    def behind(self) -> bool:
        """A whole batch waits behind the one being written: the fleet streams faster than
        the writer commits. The record path then waits for `room` before it takes the next
        message, so that what is not yet committed stays the batch being written and the one
        gathering, never a backlog that grows."""
        return len(self._rows) >= self.max_batch and self._task is not None

    async def room(self) -> None:
        """Return once the waiting rows are less than a batch (the writer took them)."""
        await self._room.wait()

    async def start(self) -> None:
        if self._task is not None:
            return
        await self.writer.open()
        self._task = asyncio.create_task(self.run(), name="event-ingest")

    def add(self, agent_id: str, turn_id: int | None, kind: str, summary: str,
            data: dict[str, Any] | str, at: float | None = None) -> bool:
        """Queue one event (the hot path: no await). `data` is its JSON (the record path makes
        it: supervisor/agents/records.py data_json), or a dict made JSON here; either way the queued
        row holds no object the GC tracks. `at` is when it happened (the clock's now if not
        given). Returns `behind`, read once here rather than asked again for every event."""
        rows = self._rows
        rows.append((agent_id, turn_id, kind, summary,
                     data if data.__class__ is str or isinstance(data, str) else encode(data),
                     self.clock.now() if at is None else at))
        n = len(rows)
        if n == 1:
            self._wake.set()
        if n < self.max_batch:
            return False
        self._full.set()
        if n == self.max_batch:
            self._room.clear()
        return self._task is not None

    async def flush(self) -> None:
        """Return once every event added before this call is committed. Raises StoreError if
        the batch that held them could not be written."""
        if self._task is None:
            if self._rows:  # not started (or closed): written here and now
                rows, self._rows = self._rows, []
                await self._store_now(rows)
            return
        if not self._rows and not self._writing and not self._flushers:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flushers.append(future)
        self._wake.set()
        self._full.set()
        await future

    async def run(self) -> None:
        while True:
            if not self._rows and not self._flushers:
                self._wake.clear()
                await self._wake.wait()
            if len(self._rows) < self.max_batch and not self._flushers:
                self._full.clear()
                try:
                    async with asyncio.timeout(self.window_s):
                        await self._full.wait()
                except TimeoutError:
                    pass
            rows = self._rows
            if len(rows) > self.max_batch:  # bounded: the rest is the next batch, at once
                rows, self._rows = rows[:self.max_batch], rows[self.max_batch:]
                waiters: list[asyncio.Future[None]] = []  # theirs may be among the rest
            else:
                self._rows = []
                waiters, self._flushers = self._flushers, []
            if len(self._rows) < self.max_batch:
                self._room.set()
            await self._write(rows, waiters)

    async def _write(self, rows: list[RawEvent], waiters: list[asyncio.Future[None]]) -> None:
        self._writing = True
        error: BaseException | None = None
        try:
            if rows:
                await self._store_now(rows)
        except StoreError as exc:
            error = exc
        except Exception:  # noqa: BLE001 - a row that cannot be written never stops the ingest
            self.lost += len(rows)
            logger.exception("events not stored count=%d", len(rows))
        except asyncio.CancelledError:
            _settle(waiters, ShuttingDown())
            raise
        finally:
            self._writing = False
        _settle(waiters, error)

    async def _store_now(self, rows: list[RawEvent]) -> None:
        try:
            if self.writer.is_open and len(rows) <= STATEMENT_ROWS:  # one statement
                await self.writer.statement(lambda conn: EventRepo.insert_rows(conn, rows))
            elif self.writer.is_open:
                await self.writer.transaction([lambda conn: EventRepo.insert_rows(conn, rows)])
            else:  # not started, or closed: through the store's own connection
                await self.store.events.append_many(rows)
        except StoreError as exc:
            self.lost += len(rows)
            logger.warning("events not stored count=%d: %s", len(rows), exc)
            self.store.db.report_write_error(str(exc))
            raise
        self.stored += len(rows)
        self.batches += 1

    async def close(self) -> None:
        """Write what is waiting, then stop the task and the thread."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._rows:
            rows, self._rows = self._rows, []
            try:
                await self._store_now(rows)
            except StoreError:
                pass  # reported above; the store is gone
        _settle(self._flushers, None if not self._rows else ShuttingDown())
        self._flushers = []
        self._room.set()
        await self.writer.close()


def _settle(waiters: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for future in waiters:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
