"""The SQLite database: one writer connection, one reader connection, WAL, migrations."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import aiosqlite

from store.errors import Conflict, MigrationError, StoreUnavailable
from store.migrations import MIGRATIONS

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from store.pg import PgConnection, PgDatabase

Params = Sequence[Any] | dict[str, Any]
# What a repository is given: this SQLite database, or store/pg.py's PostgreSQL one (the same
# calls; `dialect` says which, for the few queries kept in one text per engine).
AnyDatabase: TypeAlias = "Database | PgDatabase"
AnyConnection: TypeAlias = "aiosqlite.Connection | PgConnection"  # a transaction's



def rescued_path(path: Path) -> Path:
    """Where the copy of a database whose file was deleted or replaced while open is saved."""
    return path.with_name(f"{path.name}.rescued")

class Database:
    """Owns the connections. Writes are serialised through one connection (SQLite allows one
    writer); reads use a second connection, which WAL lets run while a write is in progress."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened
        # Called with the reason of every write that failed for the database's sake (disk
        # full, read-only, I/O), not for a broken rule (Conflict): how storage trouble is
        # noticed the moment it happens.
        self.write_error_listeners: list[Callable[[str], None]] = []

    async def __aenter__(self) -> Database:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._reader is not None:
            return
        try:
            if not self.read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._writer = await aiosqlite.connect(self.path, isolation_level=None)
                await self._writer.execute("PRAGMA journal_mode=WAL")
                await self._writer.execute("PRAGMA synchronous=NORMAL")
                await self._writer.execute("PRAGMA foreign_keys=ON")
                await self._writer.execute("PRAGMA busy_timeout=5000")
                await self._migrate()
            uri = f"file:{self.path}?mode=ro" if self.read_only else f"file:{self.path}"
            self._reader = await aiosqlite.connect(uri, uri=True, isolation_level=None)
            self._reader.row_factory = aiosqlite.Row
            await self._reader.execute("PRAGMA busy_timeout=5000")
            self.identity = _identity(self.path)
        except sqlite3.Error as exc:
            await self.close()
            raise StoreUnavailable(str(self.path), str(exc)) from exc
        except BaseException:  # MigrationError, cancellation: never leave a connection open
            await self.close()
            raise

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                try:
                    await conn.close()
                except (sqlite3.Error, ValueError):  # already closed or broken: nothing left to do
                    logger.debug("closing connection failed", exc_info=True)
        self._reader = self._writer = None

    async def _migrate(self) -> None:
        assert self._writer is not None
        async with self._writer.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version > len(MIGRATIONS):
            raise MigrationError(
                f"{self.path} has schema version {version}, newer than this Switchboard "
                f"({len(MIGRATIONS)}); upgrade Switchboard or use another data directory"
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            logger.info("applying migration version=%d path=%s", number, self.path)
            try:
                await self._writer.executescript(
                    f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;"
                )
            except sqlite3.Error as exc:
                await _rollback(self._writer)
                raise MigrationError(f"migration {number} failed: {exc}") from exc
        if version < len(MIGRATIONS):
            # Until a checkpoint, the main file keeps the old pages: copies of whatever a
            # migration removed (invite codes in clear). Write the new ones back now.
            await self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def file_problem(self) -> str | None:
        """"deleted" or "replaced" if the file at `path` is no longer the one opened (SQLite
        goes on writing to the open file, which a restart would never see again), else
        None. One stat: cheap enough to call often."""
        if self.identity is None:
            return None
        try:
            now = _identity(self.path)
        except OSError:  # e.g. an unreadable directory: no evidence that the file changed
            return None
        if now is None:
            return "deleted"
        return "replaced" if now != self.identity else None

    async def rescue(self, target: Path) -> None:
        """Copy the open database, whatever happened to its file, to `target` (the SQLite
        backup API, so the copy is consistent)."""
        source = self._writer or self._r()
        tmp = target.with_name(target.name + ".tmp")
        tmp.unlink(missing_ok=True)
        try:
            dest = await aiosqlite.connect(tmp)
            try:
                await source.backup(dest)
            finally:
                await dest.close()
            tmp.replace(target)
        except (sqlite3.Error, OSError) as exc:
            tmp.unlink(missing_ok=True)
            raise StoreUnavailable(str(target), f"could not save a copy: {exc}") from exc

    def report_write_error(self, reason: str) -> None:
        """A write on another connection to this database (a batched writer's: the bus's, the
        event ingest's) failed for the database's sake: told to the same listeners as the
        store's own failed writes."""
        self._write_failed(reason)

    def _write_failed(self, reason: str) -> None:
        for listener in list(self.write_error_listeners):
            try:
                listener(reason)
            except Exception:  # noqa: BLE001 - a listener never turns one failure into two
                logger.exception("write-error listener failed")

    @property
    def schema_version(self) -> int:
        return len(MIGRATIONS)

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def writer_target(self) -> Path:
        """What a batched writer (store/writer.py) connects to."""
        return self.path

    def _w(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StoreUnavailable(str(self.path), "opened read-only or closed")
        return self._writer

    def _r(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise StoreUnavailable(str(self.path), "closed")
        return self._reader

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one write statement in its own transaction; returns lastrowid."""
        async with self.transaction() as conn:
            async with conn.execute(sql, params) as cur:
                return cur.lastrowid or 0

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        async with self.transaction() as conn:
            await conn.executemany(sql, rows)

    @asynccontextmanager
    async def transaction(self, *, exclusive: bool = True) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction (BEGIN IMMEDIATE): SQLite has one writer, so `exclusive` (see
        store/pg.py) changes nothing here."""
        del exclusive
        conn = self._w()
        async with self._write_lock:
            try:
                await conn.execute("BEGIN IMMEDIATE")
                yield conn
                await conn.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                await _rollback(conn)
                raise Conflict(str(exc)) from exc
            except sqlite3.Error as exc:
                await _rollback(conn)
                self._write_failed(str(exc))
                raise StoreUnavailable(str(self.path), str(exc)) from exc
            except BaseException:
                await _rollback(conn)
                raise

    async def fetchall(self, sql: str, params: Params = ()) -> list[aiosqlite.Row]:
        try:
            # One call into the connection's thread: execute, fetch and reset together. With a
            # separate execute and fetch, a task cancelled in between leaves the statement open,
            # and the reader keeps a stale snapshot for good.
            return list(await self._r().execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise StoreUnavailable(str(self.path), str(exc)) from exc

    async def fetchone(self, sql: str, params: Params = ()) -> aiosqlite.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    @asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[AsyncIterator[str]]:
        """PostgreSQL's LISTEN (store/pg.py): on SQLite one process is the only writer, so
        there is nobody to hear from; what it yields ends at once."""
        del channel

        async def nothing() -> AsyncIterator[str]:
            return
            yield  # an async generator that yields nothing

        yield nothing()


def _identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of `path`, None if it does not exist; other OSErrors propagate."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


async def _rollback(conn: aiosqlite.Connection) -> None:
    """End the connection's transaction, whatever state it is in.

    Unconditional: a task cancelled while its BEGIN waited in the connection's thread queue
    sees no transaction yet (`in_transaction` is False), but the BEGIN still runs after the
    cancel, and would leave the next, unrelated write failing with "cannot start a
    transaction within a transaction". The connection runs its calls in order, so a ROLLBACK
    queued now runs after that BEGIN. It is a task started before the write lock is released
    (so it is queued before any later writer's BEGIN), and shielded: a second cancel cannot
    skip it."""
    task = asyncio.ensure_future(_rollback_now(conn))
    await asyncio.shield(task)


async def _rollback_now(conn: aiosqlite.Connection) -> None:
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "no transaction is active" not in str(exc):
            logger.warning("rollback failed", exc_info=True)
    except (sqlite3.Error, ValueError):  # ValueError: the connection is closed
        logger.warning("rollback failed", exc_info=True)
