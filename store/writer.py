"""A write connection of its own, on one thread of its own: a whole batch of writes is one call
into that thread and one transaction, and the event loop never waits on SQLite.

Kept here once for every batched writer: the bus's (store/bus.py BusWriter, a subclass) and the
event ingest's (supervisor/agents/ingest.py). SQLite's lock (busy_timeout)
serialises it with the store's own writer connection."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from store.errors import Conflict, StoreUnavailable

T = TypeVar("T")
Write = Callable[[sqlite3.Connection], Any]


class ThreadWriter:
    """`batch(writes)`: every write in one transaction, in the writer's thread. `on_rollback`
    is called (in that thread) when a transaction is rolled back, for caches of what it wrote."""

    def __init__(self, path: Path, *, name: str = "writer",
                 on_rollback: Callable[[], None] = lambda: None,
                 pragmas: Sequence[str] = ()) -> None:
        self.path = Path(path)
        self.name = name
        self.on_rollback = on_rollback
        self.pragmas = tuple(pragmas)  # "name=value" for this connection, after the common ones
        self._pool: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        for pragma in self.pragmas:
            conn.execute(f"PRAGMA {pragma}")
        self._conn = conn

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(self) -> None:
        if self._pool is not None:
            return
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=self.name)
        try:
            await self.call(self._connect)
        except sqlite3.Error as exc:
            await self.close()
            raise StoreUnavailable(str(self.path), str(exc)) from exc

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.get_running_loop().run_in_executor(pool, conn.close)
        pool.shutdown(wait=False)

    async def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` in the writer's thread (no transaction of its own)."""
        if self._pool is None:
            raise StoreUnavailable(str(self.path), f"the {self.name} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def batch(self, writes: Sequence[Write]) -> list[tuple[bool, Any]]:
        """Every write in one transaction: [(True, value)...]. If that fails, each is tried
        again alone, so that one bad write fails alone: (False, its exception)."""
        return await self.call(lambda: self.run_batch(writes))

    async def transaction(self, writes: Sequence[Write]) -> list[Any]:
        """Every write in one transaction, or none (the exception, as a StoreError)."""
        return await self.call(lambda: self.run_transaction(writes))

    def run_batch(self, writes: Sequence[Write]) -> list[tuple[bool, Any]]:
        try:
            return [(True, v) for v in self.run_transaction(writes)]
        except Exception as exc:  # noqa: BLE001 - handed to the callers
            if len(writes) == 1:
                return [(False, exc)]
        out: list[tuple[bool, Any]] = []
        for write in writes:
            try:
                out.append((True, self.run_transaction([write])[0]))
            except Exception as exc:  # noqa: BLE001 - handed to that write's caller
                out.append((False, exc))
        return out

    def run_transaction(self, writes: Sequence[Write]) -> list[Any]:
        """In the writer's thread: BEGIN IMMEDIATE, every write, COMMIT."""
        conn = self._conn
        if conn is None:
            raise StoreUnavailable(str(self.path), f"the {self.name} is closed")
        try:
            conn.execute("BEGIN IMMEDIATE")
            values = [write(conn) for write in writes]
            conn.execute("COMMIT")
            return values
        except BaseException as exc:
            self.on_rollback()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError):
                raise Conflict(str(exc)) from exc
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(str(self.path), str(exc)) from exc
            raise
