"""The PostgreSQL database: the same surface as store/db.py's SQLite `Database` (execute,
executemany, transaction, fetchall, fetchone), over a pool of psycopg 3 connections, so the
repositories run on either engine.

Why psycopg 3 (with psycopg_pool) rather than asyncpg: it has a synchronous API beside the
asynchronous one, and the batched writers (store/writer.py: the bus's, the event ingest's) run
their transactions on a connection of their own in a thread; its `%s` placeholders are one
mechanical step from SQLite's `?`; it is the project PostgreSQL itself lists, kept by a
maintainer who also keeps the pool. It is an optional dependency of the runtime (the
`postgresql` extra): a user on SQLite installs nothing of it.

One writer at a time, as on SQLite: every write transaction takes the same transaction-level
advisory lock first, on whichever connection (the store's pool, a writer thread, another
process). The repositories' read-then-write steps (a sequence read then used, a claim checked
by its row count) were written for SQLite's single writer and keep their guarantees; reads
never wait for it. Finer locking (`SKIP LOCKED` leases) belongs to the multi-host work of
issue 30, not to this layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import pq
from psycopg.sql import SQL, Identifier
from psycopg_pool import AsyncConnectionPool

from store.errors import Conflict, MigrationError, StoreUnavailable
from store.migrations import MIGRATIONS, for_postgres
from store.pg_sql import SyncConnection, configure, row_factory, translate

logger = logging.getLogger(__name__)

Params = Sequence[Any]

# Advisory lock keys (any two constants no other program on the database is likely to use).
WRITE_LOCK = 0x5B_0001  # held by every write transaction: SQLite's one writer
MIGRATE_LOCK = 0x5B_0002  # held while the schema is checked and migrated
_LOCK = "SELECT pg_advisory_xact_lock(%s)"
POOL_MAX = 8  # connections: one writer at a time, the rest for reads
CONNECT_TIMEOUT_S = 10.0


def is_postgres_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def safe_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class PgCursor:
    """What a repository reads of a cursor inside a transaction, as aiosqlite's."""

    def __init__(self, cur: psycopg.AsyncCursor[Any], lastrowid: int | None) -> None:
        self._cur = cur
        self.lastrowid = lastrowid

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    @property
    def description(self) -> Any:
        return self._cur.description

    async def fetchone(self) -> Any:
        return await self._cur.fetchone()

    async def fetchall(self) -> list[Any]:
        return await self._cur.fetchall()


class _Call:
    """`await conn.execute(...)` or `async with conn.execute(...) as cur`, as aiosqlite allows."""

    def __init__(self, raw: psycopg.AsyncConnection[Any], sql: str, params: Params) -> None:
        self._raw, self._sql, self._params = raw, sql, params

    async def _run(self) -> PgCursor:
        sql, returns_id = translate(self._sql, returning=True)
        cur = self._raw.cursor()
        await cur.execute(sql, self._params)
        lastrowid = None
        if returns_id:
            row = await cur.fetchone()
            lastrowid = int(row[0]) if row else None
        return PgCursor(cur, lastrowid)

    def __await__(self) -> Any:
        return self._run().__await__()

    async def __aenter__(self) -> PgCursor:
        return await self._run()

    async def __aexit__(self, *exc: object) -> None:
        return None


class PgConnection:
    """The connection a write transaction yields: aiosqlite's execute and executemany."""

    def __init__(self, raw: psycopg.AsyncConnection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Params = ()) -> _Call:
        return _Call(self.raw, sql, params)

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        async with self.raw.cursor() as cur:
            await cur.executemany(translate(sql)[0], list(rows))


class PgDatabase:
    """Owns the pool. `url` is a libpq URL (postgresql://user@host/db, or with
    ?host=/socket/dir)."""

    dialect = "postgresql"
    read_only = False  # opened for writing only: nothing reads an old PostgreSQL schema

    def __init__(self, url: str) -> None:
        self.url = url
        self._pool: AsyncConnectionPool[Any] | None = None
        self._write_lock = asyncio.Lock()
        self.write_error_listeners: list[Callable[[str], None]] = []

    @property
    def name(self) -> str:
        return safe_url(self.url)

    @property
    def writer_target(self) -> str:
        """What a batched writer (store/writer.py) connects to."""
        return self.url

    @property
    def schema_version(self) -> int:
        return len(MIGRATIONS)

    async def __aenter__(self) -> PgDatabase:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._pool is not None:
            return

        async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
            configure(conn)

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.url, open=False, min_size=1, max_size=POOL_MAX, name="switchboard-store",
            kwargs={"autocommit": True, "row_factory": row_factory,
                    "application_name": "switchboard"},
            configure=_configure, timeout=CONNECT_TIMEOUT_S)
        self._pool = pool
        try:
            # One connection first: a server that is not there says why at once (the pool
            # would retry until its timeout and then say only that it timed out).
            probe = await psycopg.AsyncConnection.connect(
                self.url, connect_timeout=int(CONNECT_TIMEOUT_S))
            await probe.close()
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            await self._migrate()
        except psycopg.Error as exc:
            await self.close()
            raise StoreUnavailable(self.name, str(exc)) from exc
        except BaseException:  # MigrationError, cancellation: never leave the pool open
            await self.close()
            raise

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def version(self) -> int:
        """The schema version the database holds."""
        row = await self.fetchone("SELECT version FROM switchboard_schema")
        return int(row[0]) if row else 0

    async def _migrate(self) -> None:
        async with self._p().connection() as raw, raw.transaction():
            await raw.execute(_LOCK, (MIGRATE_LOCK,))
            await raw.execute("CREATE TABLE IF NOT EXISTS switchboard_schema"
                              " (version BIGINT NOT NULL)")
            row = await (await raw.execute("SELECT version FROM switchboard_schema")).fetchone()
            if row is None:
                await raw.execute("INSERT INTO switchboard_schema (version) VALUES (0)")
            version = int(row[0]) if row else 0
            if version > len(MIGRATIONS):
                raise MigrationError(
                    f"{self.name} has schema version {version}, newer than this Switchboard "
                    f"({len(MIGRATIONS)}); upgrade Switchboard or use another database")
            for number in range(version + 1, len(MIGRATIONS) + 1):
                logger.info("applying migration version=%d database=%s", number, self.name)
                try:
                    async with raw.transaction():  # a savepoint: the failing one is named
                        await raw.execute(for_postgres(number).encode())
                except psycopg.Error as exc:
                    raise MigrationError(f"migration {number} failed: {exc}") from exc
            await raw.execute("UPDATE switchboard_schema SET version = %s", (len(MIGRATIONS),))

    def report_write_error(self, reason: str) -> None:
        """A write on a batched writer's connection failed for the database's sake."""
        self._write_failed(reason)

    def _write_failed(self, reason: str) -> None:
        for listener in list(self.write_error_listeners):
            try:
                listener(reason)
            except Exception:  # noqa: BLE001 - a listener never turns one failure into two
                logger.exception("write-error listener failed")

    def file_problem(self) -> str | None:
        """SQLite's check that its file is still the one opened: no file here, never one."""
        return None

    def _p(self) -> AsyncConnectionPool[Any]:
        if self._pool is None:
            raise StoreUnavailable(self.name, "closed")
        return self._pool

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one write statement in its own transaction; returns the new row's id (the
        identity key an INSERT returned), else 0."""
        async with self.transaction() as conn:
            cur = await conn.execute(sql, params)
            return cur.lastrowid or 0

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        async with self.transaction() as conn:
            await conn.executemany(sql, rows)

    @asynccontextmanager
    async def transaction(self, *, exclusive: bool = True) -> AsyncIterator[PgConnection]:
        """A write transaction, under the one-writer lock. `exclusive=False`: without it, for
        a write whose correctness rests on its own conditional statements and row locks (the
        lease renewal), which must not queue behind the fleet's other writes."""
        pool = self._p()
        async with self._write_lock if exclusive else contextlib.nullcontext():
            try:
                async with pool.connection() as raw, raw.transaction():
                    if exclusive:
                        await raw.execute(_LOCK, (WRITE_LOCK,))
                    yield PgConnection(raw)
            except psycopg.IntegrityError as exc:
                raise Conflict(str(exc)) from exc
            except psycopg.Error as exc:
                self._write_failed(str(exc))
                raise StoreUnavailable(self.name, str(exc)) from exc

    async def fetchall(self, sql: str, params: Params = ()) -> list[Any]:
        try:
            async with self._p().connection() as raw, raw.cursor() as cur:
                await cur.execute(translate(sql)[0], params)
                rows: list[Any] = await cur.fetchall()
                return rows
        except psycopg.Error as exc:
            raise StoreUnavailable(self.name, str(exc)) from exc

    async def fetchone(self, sql: str, params: Params = ()) -> Any:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    @asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[AsyncIterator[str]]:
        """A connection of its own LISTENing on `channel` (listening once this is entered):
        the payload of every NOTIFY on it, until the caller leaves or the connection fails
        (StoreUnavailable). A notification is a hint: one sent while nothing listens is lost,
        so the caller also polls."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S),
                application_name="switchboard-listen")
        except psycopg.Error as exc:
            raise StoreUnavailable(self.name, str(exc)) from exc

        async def payloads() -> AsyncIterator[str]:
            try:
                async for note in conn.notifies():
                    yield note.payload
            except psycopg.Error as exc:
                raise StoreUnavailable(self.name, str(exc)) from exc

        try:
            try:
                await conn.execute(SQL("LISTEN {}").format(Identifier(channel)))
            except psycopg.Error as exc:
                raise StoreUnavailable(self.name, str(exc)) from exc
            yield payloads()
        finally:
            await conn.close()


class PgLink:
    """How a batched writer (store/writer.py ThreadWriter) talks to PostgreSQL: its own
    connection, its transactions under the store's write lock."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = safe_url(url)

    def connect(self) -> SyncConnection:
        raw = psycopg.connect(self.url, autocommit=True, application_name="switchboard-writer",
                              connect_timeout=int(CONNECT_TIMEOUT_S))
        configure(raw)
        return SyncConnection(raw)

    def begin(self, conn: SyncConnection) -> None:
        conn.raw.execute("BEGIN")
        conn.raw.execute(_LOCK, (WRITE_LOCK,))

    def commit(self, conn: SyncConnection) -> None:
        conn.raw.execute("COMMIT")

    def rollback(self, conn: SyncConnection) -> None:
        if conn.raw.info.transaction_status != pq.TransactionStatus.IDLE:
            conn.raw.execute("ROLLBACK")

    def error(self, exc: BaseException) -> Exception | None:
        """The store's error for what the database raised (None: not the database's)."""
        if isinstance(exc, psycopg.IntegrityError):
            return Conflict(str(exc))
        if isinstance(exc, psycopg.Error):
            return StoreUnavailable(self.name, str(exc))
        return None
