"""The kill path's private connections: one short connection of its own per write or read, to
the SQLite file or to the PostgreSQL database, usable from any thread or process (the kill
switch's watcher threads, `switchboard kill`) whether or not the event loop or the store's pool
works. A target is what `db.writer_target` names: the SQLite file's path, or a postgresql://
URL.

Every call is bounded: SQLite's busy timeout; on PostgreSQL the connection's `connect_timeout`
(libpq counts whole seconds, at least 2) and `statement_timeout`/`lock_timeout` on the server.
A caller that must not wait even that long (the kill switch) runs the call in a thread and
joins it with a bound of its own: the bound here only keeps such threads from living forever.
The PostgreSQL writes take no advisory write lock (store/pg.py): each is one statement,
atomic by itself, and must not queue behind a long write transaction of the supervisor's.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Target = Path | str
TIMEOUT_S = 5.0
LISTEN_TICK_S = 0.5  # how often a listener looks up from its socket to see if it must stop


def is_postgres(target: Target) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def _pg_connect(url: str, timeout_s: float, name: str = "switchboard-private") -> Any:
    import psycopg  # the `postgresql` extra: only a store on PostgreSQL gets here

    ms = max(1, int(timeout_s * 1000))
    return psycopg.connect(url, autocommit=True, application_name=name,
                           connect_timeout=max(2, math.ceil(timeout_s)),
                           options=f"-c statement_timeout={ms} -c lock_timeout={ms}")


def write(target: Target, sql: str, params: tuple[Any, ...],
          timeout_s: float = TIMEOUT_S, *, notify: tuple[str, str] | None = None) -> None:
    """Run one write statement (SQLite's dialect, `?` placeholders) in its own transaction.
    `notify`: (channel, payload) of a NOTIFY sent once the write is committed (PostgreSQL; on
    SQLite one process is the only writer, so nobody listens)."""
    if is_postgres(target):
        from store.pg_sql import translate

        with _pg_connect(str(target), timeout_s) as conn:
            conn.execute(translate(sql)[0], params)
            if notify is not None:  # autocommit: the write is visible to whoever is woken
                conn.execute("SELECT pg_notify(%s, %s)", notify)
        return
    conn = sqlite3.connect(target, timeout=timeout_s, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def read_one(target: Target, sql: str, params: tuple[Any, ...],
             timeout_s: float = TIMEOUT_S) -> tuple[Any, ...] | None:
    """The first row of one query, or None; SQLite's file is opened read-only."""
    if is_postgres(target):
        from store.pg_sql import translate

        with _pg_connect(str(target), timeout_s) as conn:
            row = conn.execute(translate(sql)[0], params).fetchone()
            return tuple(row) if row is not None else None
    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, timeout=timeout_s)
    try:
        found = conn.execute(sql, params).fetchone()
        return tuple(found) if found is not None else None
    finally:
        conn.close()


def listen(target: Target, channel: str, stop: threading.Event,
           timeout_s: float = TIMEOUT_S) -> Iterator[str]:
    """The payload of every NOTIFY on `channel` (PostgreSQL), on a connection of its own that
    listens from the first step of the iteration, until `stop` is set (then it ends) or the
    connection fails (psycopg's error). For a thread; a hint only: a notification sent while
    nothing listens is lost. On SQLite it ends at once: nothing is ever sent."""
    if not is_postgres(target):
        return
    from psycopg.sql import SQL, Identifier

    with _pg_connect(str(target), timeout_s, "switchboard-listen") as conn:
        conn.execute(SQL("LISTEN {}").format(Identifier(channel)))
        while not stop.is_set():
            for note in conn.notifies(timeout=LISTEN_TICK_S):
                yield note.payload
