"""Repository for the append-only log of each agent's stream-json events."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson

from store.clock import Now, system_now
from store.db import AnyDatabase
from store.writer import SyncConn

# One raw event as the ingest queues it: (agent_id, turn_id, kind, summary, data as JSON, at).
# The JSON is made when the row is queued (`encode`, a fraction of a microsecond): a queued row is
# then a tuple of strings and numbers, which the cyclic GC stops tracking, instead of a tree of
# dicts that lives through two collections while its batch waits and is carried into the oldest
# generation, whose collections scan the whole heap.
RawEvent = tuple[str, int | None, str, str, str, float]
def json_encoder(default: Callable[[Any], Any], option: int = 0) -> Callable[[Any], str]:
    """An encoder of rows' JSON: orjson (an eighth of the standard encoder's time) with
    `default` for what it cannot write, and non-string keys written as strings; for what orjson
    refuses (a lone surrogate, an integer past 64 bits), the standard encoder with the same
    `default`, made once (json.dumps makes one per call)."""
    standard = json.JSONEncoder(default=default).encode
    option |= orjson.OPT_NON_STR_KEYS

    def encode(data: Any) -> str:
        try:
            return orjson.dumps(data, default=default, option=option).decode()
        except TypeError:  # orjson.JSONEncodeError is one
            return standard(data)

    return encode


encode = json_encoder(str)  # a row's JSON, as json.dumps(default=str) would give its content


_INSERT = ("INSERT INTO agent_events (agent_id, turn_id, kind, summary, data, at)"
           " VALUES (?,?,?,?,?,?)")


@dataclass(frozen=True, slots=True)
class EventRow:
    id: int
    agent_id: str
    turn_id: int | None
    kind: str
    summary: str
    data: dict[str, Any]
    at: float


# Rows one INSERT takes: up to 2048 (12,288 parameters, under SQLite's 32,766), so that a batch
# of the ingest (2000 at most) is one statement, of one of 12 sizes (a power of two, the rows
# past the batch's NULLs its WHERE leaves out) that stay prepared in the connection's cache.
STATEMENT_ROWS = 2048
_COLUMNS = 6


@functools.lru_cache(maxsize=16)
def _insert_sql(n: int) -> str:
    return ("INSERT INTO agent_events (agent_id, turn_id, kind, summary, data, at)"
            " SELECT * FROM (VALUES " + ",".join(["(?,?,?,?,?,?)"] * n) + ")"
            " WHERE column1 IS NOT NULL")


def _insert(conn: SyncConn, rows: Sequence[RawEvent]) -> None:
    if not isinstance(conn, sqlite3.Connection):
        # PostgreSQL: psycopg sends an executemany's rows in one pipeline, one round trip
        # for the batch; a lone surrogate fails there as it would here (repaired alike).
        try:
            conn.executemany(_INSERT, rows)
        except UnicodeEncodeError:
            conn.executemany(_INSERT, [tuple(_safe(v) if isinstance(v, str) else v for v in r)
                                       for r in rows])
        return
    for i in range(0, len(rows), STATEMENT_ROWS):
        chunk = rows[i:i + STATEMENT_ROWS]
        size = 1 << (len(chunk) - 1).bit_length()
        params = list(chain.from_iterable(chunk))
        params.extend([None] * (_COLUMNS * (size - len(chunk))))
        try:
            conn.execute(_insert_sql(size), params)
        except UnicodeEncodeError:  # a lone surrogate in a text: that row's text repaired
            # Raised while binding, before the statement ran: nothing of it to undo.
            conn.execute(_insert_sql(size), [_safe(v) if isinstance(v, str) else v
                                             for v in params])


def _safe(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call an agent's model made, as its assistant message was recorded."""

    agent: str  # the agent's name
    cwd: str
    tool: str
    input: dict[str, Any]
    at: float


def tool_calls_of(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, input) of each tool_use block in a recorded assistant message's data."""
    content = data.get("content") if isinstance(data, dict) else None
    return [(b["name"], b["input"]) for b in content or ()
            if isinstance(b, dict) and isinstance(b.get("name"), str) and "id" in b
            and isinstance(b.get("input"), dict)]


class EventRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    async def append(self, agent_id: str, turn_id: int | None, kind: str, summary: str,
                     data: dict[str, Any] | str) -> int:
        """One event, its own transaction; `data` a dict or its JSON already made."""
        return await self.db.execute(
            "INSERT INTO agent_events (agent_id, turn_id, kind, summary, data, at)"
            " VALUES (?,?,?,?,?,?)",
            (agent_id, turn_id, kind, summary,
             data if isinstance(data, str) else json.dumps(data, default=str), self._now()),
        )

    @staticmethod
    def insert_rows(conn: SyncConn, rows: Sequence[RawEvent]) -> int:
        """In a writer's thread, inside its transaction: up to STATEMENT_ROWS rows a statement.

        One multi-row INSERT rather than `executemany`, and as few statements as can be:
        sqlite3 lets go of the GIL around every step (and every prepare), and on a busy event
        loop each time the writer takes it back it may wait for the loop's switch interval
        (5 ms); one statement binds all its rows at once and steps once."""
        _insert(conn, rows)
        return len(rows)

    async def append_many(self, rows: Sequence[RawEvent]) -> None:
        """The rows of `insert_rows`, through the store's own writer connection."""
        await self.db.executemany(_INSERT, rows)

    async def tail(self, agent_id: str, n: int) -> list[EventRow]:
        rows = await self.db.fetchall(
            "SELECT * FROM (SELECT * FROM agent_events WHERE agent_id = ? ORDER BY id DESC LIMIT ?)"
            " AS newest ORDER BY id",
            (agent_id, n),
        )
        return [
            EventRow(**{**dict(r), "data": json.loads(r["data"])}) for r in rows
        ]

    async def tool_calls(self, since: float, limit: int = 20_000) -> list[ToolCall]:
        """Every tool call recorded from `since` on (at most `limit` assistant messages, the
        newest), oldest first, with the agent's name and working directory."""
        rows = await self.db.fetchall(
            "SELECT e.at, e.data, a.name, a.cwd FROM agent_events e JOIN agents a"
            " ON a.id = e.agent_id WHERE e.kind = 'assistant' AND e.at >= ?"
            " ORDER BY e.id DESC LIMIT ?", (since, limit))
        calls: list[ToolCall] = []
        for at, raw, name, cwd in reversed(rows):
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            calls += [ToolCall(name, cwd, tool, inp, at) for tool, inp in tool_calls_of(data)]
        return calls

    async def count(self, agent_id: str) -> int:
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS n FROM agent_events WHERE agent_id = ?", (agent_id,)
        )
        return int(row["n"]) if row else 0

    # -- retention: in a writer's thread, one bounded transaction per call ---------------------

    @staticmethod
    def first_kept(conn: SyncConn, cutoff: float) -> int | None:
        """The lowest id whose event is not older than `cutoff`, None if every event is:
        a binary search over ids (which grow with `at`), a few primary-key lookups, no
        index on `at` for every insert to keep up."""
        lo_id, hi_id = conn.execute("SELECT MIN(id), MAX(id) FROM agent_events").fetchone()
        if lo_id is None:
            return None
        lo, hi = int(lo_id), int(hi_id)
        hi += 1
        while lo < hi:
            mid = (lo + hi) // 2
            row = conn.execute("SELECT id, at FROM agent_events WHERE id >= ? ORDER BY id"
                               " LIMIT 1", (mid,)).fetchone()
            if row is None or row[1] >= cutoff:
                hi = mid
            else:
                lo = int(row[0]) + 1
        return lo

    @staticmethod
    def delete_before(conn: SyncConn, first_kept: int, limit: int) -> int:
        """Delete up to `limit` of the oldest events with an id below `first_kept`."""
        cur = conn.execute(
            "DELETE FROM agent_events WHERE id IN (SELECT id FROM agent_events WHERE id < ?"
            " ORDER BY id LIMIT ?)", (first_kept, limit))
        return cur.rowcount

    @staticmethod
    def delete_beyond(conn: SyncConn, agent_id: str, keep: int, limit: int) -> int:
        """Delete up to `limit` of the oldest events of `agent_id` beyond its newest `keep`
        (the agent index: no scan of other agents' rows)."""
        row = conn.execute("SELECT id FROM agent_events WHERE agent_id = ? ORDER BY id DESC"
                           " LIMIT 1 OFFSET ?", (agent_id, keep)).fetchone()
        if row is None:
            return 0
        cur = conn.execute(
            "DELETE FROM agent_events WHERE id IN (SELECT id FROM agent_events WHERE"
            " agent_id = ? AND id <= ? ORDER BY id LIMIT ?)", (agent_id, row[0], limit))
        return cur.rowcount

    @staticmethod
    def agents_over(conn: SyncConn, keep: int) -> list[str]:
        """Agents with more than `keep` events: one probe of the agent index per agent."""
        ids = [r[0] for r in conn.execute("SELECT id FROM agents")]
        return [a for a in ids if conn.execute(
            "SELECT 1 FROM agent_events WHERE agent_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
            (a, keep)).fetchone() is not None]
