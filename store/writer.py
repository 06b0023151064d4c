"""A write connection of its own, on one thread of its own: a whole batch of writes is one call
into that thread and one transaction, and the event loop never waits on the database.

Kept here once for every batched writer: the bus's (store/bus.py BusWriter, a subclass) and the
event ingest's (supervisor/agents/ingest.py). On SQLite, its lock (busy_timeout) serialises it
with the store's own writer connection; on PostgreSQL (a `postgresql://` target, store/pg.py's
PgLink), the store's write lock, an advisory lock, does. The steps a batch runs see one
connection with sqlite3's `execute` and `executemany` (`SyncConn`) on either engine."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, TypeVar

from store.errors import Conflict, StoreUnavailable

T = TypeVar("T")


class SyncCursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class SyncConn(Protocol):
    """The connection a writer's steps are handed: sqlite3's, or store/pg_sql.py's."""

    def execute(self, sql: str, parameters: Any = ..., /) -> SyncCursor: ...
    def executemany(self, sql: str, parameters: Iterable[Any], /) -> SyncCursor: ...


Write = Callable[[SyncConn], Any]

# Rows one multi-row INSERT takes at most (`insert_rows`): 2048 rows of up to 15 columns stay
# under SQLite's 32,766 parameters.
STATEMENT_ROWS = 2048
_MAX_PARAMS = 32_766


@functools.lru_cache(maxsize=64)
def _rows_sql(head: str, columns: int, n: int) -> str:
    row = "(" + ",".join("?" * columns) + ")"
    return f"{head} SELECT * FROM (VALUES {','.join([row] * n)}) WHERE column1 IS NOT NULL"


def insert_rows(conn: SyncConn, head: str, rows: Sequence[Sequence[Any]]) -> None:
    """`conn.executemany(head + " VALUES (?, ...)", rows)`, in as few statements as can be.

    `head` is "INSERT INTO table (columns)"; every row has one value for each column, the
    first never NULL. On SQLite, one multi-row INSERT per STATEMENT_ROWS rows rather than one
    step per row: sqlite3 lets go of the GIL around every step and takes it back after, and
    on a busy event loop each time it takes it back can cost the writer the loop's switch
    interval (5 ms); one statement binds its rows at once and steps once, while the loop runs.
    The statement is of one of a few sizes (a power of two: the rows past the batch are NULLs
    its WHERE leaves out), so that it stays prepared in the connection's cache. PostgreSQL:
    executemany (psycopg sends its rows in one pipeline, one round trip)."""
    if not rows:
        return
    columns = len(rows[0])
    if not isinstance(conn, sqlite3.Connection):
        conn.executemany(f"{head} VALUES ({', '.join('?' * columns)})", rows)
        return
    most = min(STATEMENT_ROWS, _MAX_PARAMS // columns)
    for i in range(0, len(rows), most):
        chunk = rows[i:i + most]
        size = 1 << (len(chunk) - 1).bit_length()
        params = list(chain.from_iterable(chunk))
        if size > len(chunk):
            params.extend([None] * (columns * (size - len(chunk))))
        conn.execute(_rows_sql(head, columns, size), params)


class _SqliteLink:
    """SQLite's side of a writer: its connection and transactions."""

    def __init__(self, path: Path, pragmas: Sequence[str]) -> None:
        self.path = path
        self.name = str(path)
        self.pragmas = pragmas

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        for pragma in self.pragmas:
            conn.execute(f"PRAGMA {pragma}")
        return conn

    def begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def commit(self, conn: sqlite3.Connection) -> None:
        conn.execute("COMMIT")

    def rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def error(self, exc: BaseException) -> Exception | None:
        if isinstance(exc, sqlite3.IntegrityError):
            return Conflict(str(exc))
        if isinstance(exc, sqlite3.Error):
            return StoreUnavailable(self.name, str(exc))
        return None


class ThreadWriter:
    """`batch(writes)`: every write in one transaction, in the writer's thread. `on_rollback`
    is called (in that thread) when a transaction is rolled back, for caches of what it wrote."""

    def __init__(self, target: Path | str, *, name: str = "writer",
                 on_rollback: Callable[[], None] = lambda: None,
                 pragmas: Sequence[str] = ()) -> None:
        """`target`: the SQLite file, or a PostgreSQL URL (the store's `writer_target`).
        `pragmas`: "name=value" for a SQLite connection, after the common ones."""
        self.name = name
        self.on_rollback = on_rollback
        self._link: Any
        if isinstance(target, str) and target.startswith(("postgresql://", "postgres://")):
            from store.pg import PgLink  # psycopg: imported only by a store on PostgreSQL

            self._link = PgLink(target)
        else:
            self._link = _SqliteLink(Path(target), tuple(pragmas))
        self.target = self._link.name  # for messages: a file, or the URL without a password
        self._pool: ThreadPoolExecutor | None = None
        self._conn: Any = None

    def _connect(self) -> None:
        self._conn = self._link.connect()

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(self) -> None:
        if self._pool is not None:
            return
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=self.name)
        try:
            await self.call(self._connect)
        except Exception as exc:
            await self.close()
            mapped = self._link.error(exc)
            if mapped is None:
                raise
            raise StoreUnavailable(self.target, str(exc)) from exc

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
            raise StoreUnavailable(self.target, f"the {self.name} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def batch(self, writes: Sequence[Write]) -> list[tuple[bool, Any]]:
        """Every write in one transaction: [(True, value)...]. If that fails, each is tried
        again alone, so that one bad write fails alone: (False, its exception)."""
        return await self.call(lambda: self.run_batch(writes))

    async def transaction(self, writes: Sequence[Write]) -> list[Any]:
        """Every write in one transaction, or none (the exception, as a StoreError)."""
        return await self.call(lambda: self.run_transaction(writes))

    async def statement(self, write: Write) -> Any:
        """`transaction([write])` for a write that is one statement: on SQLite it runs in
        autocommit, that statement its own transaction (as atomic and as durable), without a
        BEGIN and a COMMIT of their own. sqlite3 lets go of the GIL around every statement's
        step, and the writer's thread, to take it back from a busy event loop, may wait the
        loop's switch interval (5 ms): three statements a batch made the writer's wall time
        lag the fleet's record path (bench/ingest.py), one is a third of the waits. On
        PostgreSQL, a transaction as usual (its BEGIN takes the store's write lock)."""
        return await self.call(lambda: self.run_statement(write))

    def run_statement(self, write: Write) -> Any:
        conn, link = self._conn, self._link
        if not isinstance(link, _SqliteLink):
            return self.run_transaction([write])[0]
        if conn is None:
            raise StoreUnavailable(self.target, f"the {self.name} is closed")
        try:
            return write(conn)
        except BaseException as exc:
            mapped = self._rolled_back(conn, link, exc)
            if mapped is None:
                raise
            raise mapped from exc

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
        """In the writer's thread: BEGIN (IMMEDIATE, on SQLite), every write, COMMIT."""
        conn, link = self._conn, self._link
        if conn is None:
            raise StoreUnavailable(self.target, f"the {self.name} is closed")
        try:
            link.begin(conn)
            values = [write(conn) for write in writes]
            link.commit(conn)
            return values
        except BaseException as exc:
            mapped = self._rolled_back(conn, link, exc)
            if mapped is None:
                raise
            raise mapped from exc

    def _rolled_back(self, conn: Any, link: Any, exc: BaseException) -> Exception | None:
        """A failed write rolled back; the store's error for it (None: raise it as it is)."""
        self.on_rollback()
        link.rollback(conn)
        return link.error(exc)  # type: ignore[no-any-return]
