"""Repository for the bus: messages, one delivery per recipient (its sequence, state, lease and
how it ended) and topic subscriptions.

The write methods run in the bus's own writer thread, on its own connection (`BusWriter`), inside
the transaction of a whole batch of sends, leases and acks: one call into that thread per batch,
not one per statement. Every method that stamps a time takes `now`: the caller's clock decides.

Delivery states: queued -> leased -> consumed, or back to queued (lease released or expired,
attempts counted), or one of the ends expired | dead (dead-lettered, with a reason).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from store.db import AnyDatabase
from store.errors import StoreUnavailable
from store.text_search import contains_all
from store.writer import SyncConn, ThreadWriter, Write, insert_rows

# A delivery is open (queued or leased) while its ended_at is NULL: the open-deliveries index is
# keyed on that (migration 16), so a lease or a release, which change the state but not whether
# the delivery is open, leave the index alone. A query that wants that index names its term,
# `ended_at IS NULL`, as a literal: SQLite uses a partial index only for a query whose WHERE has
# the index's own term. Every write that ends a delivery sets ended_at with its state.
_OPEN = "ended_at IS NULL"
QUEUED, LEASED, CONSUMED, EXPIRED, DEAD = "queued", "leased", "consumed", "expired", "dead"
# Deliveries of the operator's own messages, and of the scheduler's (a run is recorded
# failed or interrupted, never replayed): never redelivered after a failed or cut turn.
_SCHEDULED = ("message_id IN (SELECT id FROM bus_messages WHERE sender = 'switchboard'"
              " AND sender_name = 'scheduler')")
_OPERATORS = "message_id IN (SELECT id FROM bus_messages WHERE sender = 'operator')"
_FROM_OPERATOR = f"({_OPERATORS} OR {_SCHEDULED})"
# The reason a restart gives the operator's deliveries it takes (supervisor/agents/recovery.py reads
# it to find the messages "Run it again" sends again).
RESTART_REASON = "interrupted by a restart: reported to the operator"
OPEN_STATES = (QUEUED, LEASED)
RECENT_MESSAGES = 20_000  # messages the writer keeps after storing them, for their leases
# The bus writer's connection checkpoints the WAL when it has grown to this many pages (SQLite's
# default is 1,000, 4 MB), not at every 1,000: a checkpoint syncs the WAL and the database file,
# and under a storm (about 160 pages a batch: the senders' and recipients' index pages) one every
# six batches left the writer waiting on the disk, up to 130 ms a sync on a busy machine, for more
# time than all its statements took (bench/bus_throughput.py). Fewer, larger checkpoints copy
# each hot page once instead of six times. Durability is the same: every transaction is in the
# WAL when its commit returns, whenever the WAL is copied back.
WAL_CHECKPOINT_PAGES = 10_000


# The rows are named tuples, not dataclasses: one is built per message in the send and lease
# paths (thousands a second under a storm), and a tuple costs a fraction of a frozen dataclass.
class MessageRow(NamedTuple):
    id: int
    sender: str  # an agent id, or "operator"
    sender_name: str
    recipient: str  # as addressed: an agent name, "role:x", "topic:x", "*", "operator"
    type: str
    body: str
    reply_to: int | None
    dedup_key: str | None
    expires_at: float | None
    created_at: float
    origin: str | None = None  # where its sender does not say it (supervisor/bus/inbox.py Origin)


class DeliveryRow(NamedTuple):
    message_id: int
    recipient_id: str
    seq: int
    lane: int
    state: str
    attempts: int
    lease_holder: str | None
    lease_token: str | None
    lease_expires_at: float | None
    delivered_at: float | None
    consumed_at: float | None
    reason: str | None


def redelivered_after_restart(message: MessageRow) -> bool:
    """Whether a restart hands `message` to a recipient again when the turn holding it was cut
    (`reclaim`'s rule, as data): another agent's message or Switchboard's own is, the
    operator's and the scheduler's are not (the cut turn is reported to the operator)."""
    return not (message.sender == "operator"
                or (message.sender == "switchboard" and message.sender_name == "scheduler"))


class Leased(NamedTuple):
    """One delivery handed to a turn, with its message."""

    message: MessageRow
    delivery: DeliveryRow


class Taking(NamedTuple):
    """What the bus's own lease path needs of one leased delivery (`BusRepo.take`)."""

    message: MessageRow
    seq: int
    attempts: int  # this delivery's attempts, this one included


@dataclass(frozen=True, slots=True)
class Lease:
    """Which deliveries a lease holds: found by the primary key, fenced by the token."""

    token: str
    recipient_id: str
    seqs: tuple[int, ...]

    def where(self, alias: str = "") -> tuple[str, tuple[Any, ...]]:
        """The deliveries of this lease: those of its recipient between its first and last
        sequence that still hold its token (a token is one lease's alone), so the statement
        is the same text for every lease, whatever its size."""
        return (_WHERE.get(alias) or _where(alias),
                (self.recipient_id, min(self.seqs, default=0), max(self.seqs, default=-1),
                 self.token))


_WHERE: dict[str, str] = {}


def _where(alias: str) -> str:
    text = _WHERE[alias] = (f"{alias}recipient_id = ? AND {alias}seq BETWEEN ? AND ? AND "
                            f"{alias}lease_token = ? AND {alias}state = 'leased'")
    return text


class NewMessage(NamedTuple):
    sender: str
    sender_name: str
    recipient: str
    type: str
    body: str
    recipients: tuple[str, ...]  # agent ids: one delivery each
    created_at: float
    reply_to: int | None = None
    dedup_key: str | None = None
    expires_at: float | None = None
    lane: int = 1  # 0: interrupts, delivered before everything else (lane 1)
    origin: str | None = None  # where the sender does not say it (supervisor/bus/inbox.py Origin)


_M_COLS = ("id, sender, sender_name, recipient, type, body, reply_to, dedup_key, expires_at, "
           "created_at, origin")
_D_COLS = ("message_id, recipient_id, seq, lane, state, attempts, lease_holder, lease_token, "
           "lease_expires_at, delivered_at, consumed_at, reason")


def _message(row: Sequence[Any]) -> MessageRow:
    return MessageRow._make(row[:11])


def _delivery(row: Sequence[Any]) -> DeliveryRow:
    return DeliveryRow._make(row[:12])


# A named tuple made from a tuple without its generated __new__ (a Python frame per row): for
# the rows the writer makes per message. Same object as MessageRow(...) would make.
_row: Any = tuple.__new__
_MARKS: dict[int, str] = {}


def _marks(n: int) -> str:
    """"?, ?, ..." for n parameters (made once per n)."""
    text = _MARKS.get(n)
    if text is None:
        text = _MARKS[n] = ", ".join("?" * n)
    return text


_INSERT_MESSAGES = ("INSERT INTO bus_messages (id, sender, sender_name, recipient, type, body, "
                    "reply_to, dedup_key, expires_at, created_at, origin)")
_INSERT_DELIVERIES = "INSERT INTO bus_deliveries (message_id, recipient_id, seq, lane, state)"
_ACK = ("UPDATE bus_deliveries SET state = 'consumed', consumed_at = ?, ended_at = ?, "
        f"lease_expires_at = NULL WHERE {_where('')}")
_TAKABLE = "(state = 'queued' OR lease_expires_at <= ?)"  # open, and not held by a live lease
_LEASE = ("UPDATE bus_deliveries SET state = 'leased', attempts = attempts + 1, lease_holder = ?, "
          "lease_token = ?, lease_expires_at = ?, delivered_at = COALESCE(delivered_at, ?) "
          "WHERE recipient_id = ? AND ")
_LEASE_RANGE = _LEASE + f"seq BETWEEN ? AND ? AND lane = ? AND {_OPEN} AND {_TAKABLE}"
_TAKE = ("SELECT message_id, seq, state, attempts, lane FROM bus_deliveries WHERE "
         f"recipient_id = ? AND {_OPEN} AND {_TAKABLE} ORDER BY lane, seq LIMIT ?")


# The last message id ever given (ids are never used again, even after retention deleted
# them): SQLite's AUTOINCREMENT counter, PostgreSQL's identity sequence.
_TOP_ID = {
    "sqlite": "SELECT seq FROM sqlite_sequence WHERE name = 'bus_messages'",
    "postgresql": "SELECT last_value FROM pg_sequences WHERE schemaname = current_schema()"
                  " AND sequencename = 'bus_messages_id_seq'",
}
_KEEP_ID = "SELECT setval(pg_get_serial_sequence('bus_messages', 'id'), ?)"


def _all(conn: SyncConn, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    return conn.execute(sql, params).fetchall()


class BusRepo:
    def __init__(self, db: AnyDatabase) -> None:
        self.db = db
        self._next_seq: dict[str, int] = {}  # recipient -> its next sequence (writer only)
        self._last_id: int | None = None  # the last message id stored (writer only)
        self._recent: dict[int, MessageRow] = {}  # id -> message, stored lately (writer only)

    def writer(self) -> BusWriter:
        return BusWriter(self.db.writer_target, self)

    # -- writes: in the bus writer's thread, inside its transaction (BusWriter) ----------------

    def insert(self, conn: SyncConn, msg: NewMessage) -> tuple[int, bool]:
        """Store a message and its deliveries. Returns (id, duplicate): a dedup key the
        sender used before returns the first message's id and stores nothing."""
        return (self.insert_many(conn, [msg]))[0]

    def insert_many(self, conn: SyncConn,
                          msgs: Sequence[NewMessage]) -> list[tuple[int, bool]]:
        """Many messages in two statements (messages, deliveries), ids and per-recipient
        sequences assigned here, inside the writer's transaction. Results in order given."""
        try:
            return self._insert_many(conn, msgs)
        except BaseException:
            self._next_seq.clear()  # the transaction rolls back: sequences are read again
            self._last_id = None
            raise

    def _insert_many(self, conn: SyncConn,
                           msgs: Sequence[NewMessage]) -> list[tuple[int, bool]]:
        if self.db.dialect != "sqlite":  # several workers write (under the one-writer lock)
            self._last_id = None  # so the last id and the sequences are read again each batch
            self._next_seq.clear()
        seen: dict[tuple[str, str], int] = {}
        for msg in msgs:
            if msg.dedup_key is not None and (msg.sender, msg.dedup_key) not in seen:
                found = _all(conn, "SELECT id FROM bus_messages WHERE sender = ? AND "
                                         "dedup_key = ?", (msg.sender, msg.dedup_key))
                if found:
                    seen[(msg.sender, msg.dedup_key)] = int(found[0][0])
        next_id = self._last_id
        if next_id is None:  # read once, then kept (on SQLite the bus is the only writer)
            top = _all(conn, _TOP_ID[self.db.dialect])
            next_id = int(top[0][0] or 0) if top else 0
        next_seq = self._next_seq
        missing = {rid for m in msgs for rid in m.recipients if rid not in next_seq}
        if missing:
            marks = ", ".join("?" for _ in missing)
            rows = _all(conn, "SELECT recipient_id, MAX(seq) FROM bus_deliveries WHERE "
                                    f"recipient_id IN ({marks}) GROUP BY recipient_id",
                              tuple(missing))
            next_seq.update({rid: 1 for rid in missing})
            next_seq.update({str(r[0]): int(r[1]) + 1 for r in rows})
        out: list[tuple[int, bool]] = []
        message_rows: list[MessageRow] = []
        delivery_rows: list[tuple[Any, ...]] = []
        cache = self._recent
        for (sender, sender_name, recipient, kind, body, recipients, created_at, reply_to,
             dedup_key, expires_at, lane, origin) in msgs:  # one unpacking, not twelve reads
            if dedup_key is not None:
                key = (sender, dedup_key)
                if key in seen:
                    out.append((seen[key], True))
                    continue
                seen[key] = next_id + 1
            next_id += 1
            out.append((next_id, False))
            row = cache[next_id] = _row(MessageRow, (next_id, sender, sender_name, recipient,
                                                     kind, body, reply_to, dedup_key,
                                                     expires_at, created_at, origin))
            message_rows.append(row)
            for rid in recipients:
                seq = next_seq[rid]
                next_seq[rid] = seq + 1
                delivery_rows.append((next_id, rid, seq, lane, QUEUED))
        # A batch's messages in one statement, its deliveries in another (store/writer.py).
        insert_rows(conn, _INSERT_MESSAGES, message_rows)
        insert_rows(conn, _INSERT_DELIVERIES, delivery_rows)
        if self.db.dialect == "postgresql" and message_rows:
            # The ids are given, not drawn: keep the identity's sequence past them (SQLite's
            # AUTOINCREMENT keeps sqlite_sequence so by itself), so they are never used again.
            conn.execute(_KEEP_ID, (next_id,))
        self._last_id = next_id
        self._trim_recent()
        return out

    def forget_sequences(self) -> None:
        """A transaction that assigned sequences rolled back: read them again next time (and
        forget the messages it stored)."""
        self._next_seq.clear()
        self._last_id = None
        self._recent.clear()

    def lease(self, conn: SyncConn, recipient_id: str, *, holder: str,
                    token: str, until: float, now: float, limit: int) -> list[Leased]:
        """Lease up to `limit` open deliveries of one recipient (queued ones, and leased ones
        whose lease has run out): interrupts first, then in sequence order."""
        taken = self.take(conn, recipient_id, holder=holder, token=token, until=until,
                          now=now, limit=limit)[1]
        if not taken:
            return []
        marks = ", ".join("?" for _ in taken)
        rows = _all(conn, f"SELECT {_D_COLS} FROM bus_deliveries WHERE recipient_id = ? AND "
                          f"seq IN ({marks})", (recipient_id, *(t.seq for t in taken)))
        by_seq = {int(r[2]): _delivery(r) for r in rows}
        return [Leased(t.message, by_seq[t.seq]) for t in taken]

    def take(self, conn: SyncConn, recipient_id: str, *, holder: str,
             token: str, until: float, now: float,
             limit: int) -> tuple[list[MessageRow], list[Taking]]:
        """`lease`, for the bus's own path: the queued messages found expired on the way are
        ended as expired (returned first, so their senders can be told), and each leased one
        comes back as its message, sequence and attempts (no row objects it does not use). The
        messages come from what this writer stored recently, else from one query."""
        rows = conn.execute(_TAKE, (recipient_id, now, limit)).fetchall()
        if not rows:
            return [], []
        cache = self._recent
        messages = cache if all(r[0] in cache for r in rows) else \
            self._messages(conn, [r[0] for r in rows])
        expired: list[MessageRow] = []
        expired_seqs: list[tuple[float, str, int]] = []
        live: list[Taking] = []
        for message_id, seq, state, attempts, _lane in rows:  # no row objects but these
            m = messages[message_id]
            if state == QUEUED and m.expires_at is not None and m.expires_at <= now:
                expired.append(m)
                expired_seqs.append((now, recipient_id, seq))
            else:
                live.append(_row(Taking, (m, seq, attempts + 1)))
        if expired_seqs:
            conn.executemany(
                "UPDATE bus_deliveries SET state = 'expired', reason = 'expired unread', "
                "ended_at = ? WHERE recipient_id = ? AND seq = ?", expired_seqs)
        if not live:
            return expired, live
        lane = rows[0][4]
        if not expired_seqs and rows[-1][4] == lane:
            # The common case: every row taken is of one lane and none expired. They are then
            # exactly the takable rows of that lane between the first and the last sequence
            # (the query took the first ones in order), so one range of the primary key
            # finds them, whatever their number: the same statement text for every lease.
            conn.execute(_LEASE_RANGE, (holder, token, until, now, recipient_id, rows[0][1],
                                        rows[-1][1], lane, now))
        else:
            conn.execute(_LEASE + f"seq IN ({_marks(len(live))})",
                         (holder, token, until, now, recipient_id, *[t.seq for t in live]))
        return expired, live

    def _messages(self, conn: SyncConn, ids: list[int]) -> dict[int, MessageRow]:
        cache = self._recent
        found: dict[int, MessageRow] = {}
        missing: list[int] = []
        for i in ids:
            m = cache.get(i)
            if m is None:
                missing.append(i)
            else:
                found[i] = m
        if missing:
            marks = ", ".join("?" for _ in missing)
            for r in _all(conn, f"SELECT {_M_COLS} FROM bus_messages WHERE id IN ({marks})",
                          missing):
                found[int(r[0])] = MessageRow._make(r)
        return found

    def _trim_recent(self) -> None:
        """The messages stored lately are kept for the leases that follow (`_recent`, filled
        as they are stored), bounded: the oldest go."""
        cache = self._recent
        if len(cache) > RECENT_MESSAGES:
            for old in list(itertools.islice(cache, len(cache) - RECENT_MESSAGES // 2)):
                del cache[old]

    def expire_queued(self, conn: SyncConn,
                      now: float) -> list[tuple[MessageRow, str]]:
        """Every queued delivery whose message has expired ends as expired, whether or not its
        recipient is reading: (message, recipient id) of each, so its sender can be told."""
        rows = _all(
            conn, "UPDATE bus_deliveries SET state = 'expired', reason = 'expired unread', "
            f"ended_at = ? WHERE {_OPEN} AND state = 'queued' AND "
            "(SELECT expires_at FROM bus_messages m WHERE m.id = message_id) <= ? "
            "RETURNING message_id, recipient_id", (now, now))
        messages = self._messages(conn, [int(r[0]) for r in rows])
        return [(messages[int(r[0])], str(r[1])) for r in rows]

    def extend(self, conn: SyncConn, lease: Lease, until: float) -> int:
        where, params = lease.where()
        cur = conn.execute(f"UPDATE bus_deliveries SET lease_expires_at = ? WHERE {where}",
                           (until, *params))
        return int(cur.rowcount)

    def ack(self, conn: SyncConn, lease: Lease, now: float) -> int:
        """Consumed: only while the lease is still this token's (fencing). How many."""
        return self.ack_many(conn, [(lease, now)])

    def ack_many(self, conn: SyncConn, acks: Sequence[tuple[Lease, float]]) -> int:
        """`ack` for many leases in one statement (a batch's acknowledgements). How many
        deliveries were consumed, in all."""
        cur = conn.executemany(_ACK, [(now, now, *lease.where()[1]) for lease, now in acks])
        return int(cur.rowcount)

    def release(self, conn: SyncConn, lease: Lease, *, max_attempts: int,
                reason: str, now: float) -> tuple[list[MessageRow], int]:
        """The turn holding `lease` failed: its deliveries go back to the queue, or, after
        `max_attempts`, to the dead letters. Not the operator's own messages: the failed turn
        is reported to the operator, who decides whether to send it again (it is never
        replayed unasked); they count as consumed. Returns (the dead-lettered messages, how
        many of the operator's were consumed)."""
        where, params = lease.where()
        cur = conn.execute(
            "UPDATE bus_deliveries SET state = 'consumed', consumed_at = ?, ended_at = ?, "
            f"lease_expires_at = NULL, reason = ? WHERE {where} AND {_FROM_OPERATOR}",
            (now, now, f"{reason}: reported to the operator", *params))
        dropped = int(cur.rowcount)
        where, params = lease.where("d.")
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        dead = _all(
            conn, f"SELECT {mcols} FROM bus_deliveries d JOIN bus_messages m "
            f"ON m.id = d.message_id WHERE {where} AND d.attempts >= ?",
            (*params, max_attempts))
        where, params = lease.where()
        conn.execute(
            "UPDATE bus_deliveries SET state = 'dead', reason = ?, ended_at = ?, "
            f"lease_expires_at = NULL WHERE {where} AND attempts >= ?",
            (f"{reason} ({max_attempts} attempts)", now, *params, max_attempts))
        conn.execute(
            "UPDATE bus_deliveries SET state = 'queued', lease_holder = NULL, "
            f"lease_token = NULL, lease_expires_at = NULL, reason = ? WHERE {where}",
            (reason, *params))
        return [_message(r) for r in dead], dropped

    def reclaim(self, conn: SyncConn, holder_prefix: str, now: float,
                recipient_id: str | None = None) -> int:
        """Leases held by anyone but `holder_prefix` (a previous supervisor, now dead) go back
        to the queue at once, without waiting for them to run out: an agent's message is
        delivered again (at least once). The operator's own messages are not, once a turn of
        the agent began after they were delivered: that turn either ended (its acknowledgement
        was lost with the supervisor) or was cut, and a cut turn is reported to the operator as
        interrupted, with a one-tap way to run it again (supervisor/agents/recovery.py); neither is
        replayed unasked. An operator's message leased when the supervisor died before its
        turn began is delivered again like any other: nothing of it ran, and nothing else
        would tell the operator about it. A scheduled message is never delivered again: the
        scheduler records its run as interrupted (supervisor/schedule/scheduler.py)."""
        stale = "state = ? AND (lease_holder IS NULL OR substr(lease_holder, 1, ?) != ?)"
        args: tuple[str, ...] = ()
        if recipient_id is not None:  # one agent's, adopted by a worker
            stale += " AND recipient_id = ?"
            args = (recipient_id,)
        elif self.db.dialect != "sqlite":
            # Several workers share the database: an owned agent's leases are its owner's to
            # take back (one by one, as it adopts the agent), never a starting worker's: they
            # may be held by a turn running on another worker.
            stale += " AND recipient_id NOT IN (SELECT agent_id FROM agent_leases WHERE owner" \
                     " IS NOT NULL)"
        began = ("EXISTS (SELECT 1 FROM turns t WHERE t.agent_id = bus_deliveries.recipient_id"
                 " AND t.started_at >= bus_deliveries.delivered_at)")
        conn.execute(
            "UPDATE bus_deliveries SET state = ?, lease_holder = NULL, lease_token = NULL, "
            "lease_expires_at = NULL, consumed_at = ?, ended_at = ?, reason = ? "
            f"WHERE {stale} AND ({_SCHEDULED} OR ({_OPERATORS} AND {began}))",
            (CONSUMED, now, now, RESTART_REASON, LEASED, len(holder_prefix), holder_prefix,
             *args))
        cur = conn.execute(
            "UPDATE bus_deliveries SET state = ?, lease_holder = NULL, lease_token = NULL, "
            f"lease_expires_at = NULL, reason = 'redelivered after a restart' WHERE {stale}",
            (QUEUED, LEASED, len(holder_prefix), holder_prefix, *args))
        return int(cur.rowcount)

    def dead_letter_open(self, conn: SyncConn, recipient_id: str,
                         reason: str, now: float) -> list[MessageRow]:
        """Every open delivery of `recipient_id` ends as a dead letter (killed, over budget)."""
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        rows = _all(
            conn, f"SELECT {mcols} FROM bus_deliveries d JOIN bus_messages m "
            "ON m.id = d.message_id WHERE d.recipient_id = ? AND d.ended_at IS NULL",
            (recipient_id,))
        conn.execute(
            "UPDATE bus_deliveries SET state = ?, reason = ?, ended_at = ?, "
            f"lease_expires_at = NULL WHERE recipient_id = ? AND {_OPEN}",
            (DEAD, reason, now, recipient_id))
        return [_message(r) for r in rows]

    def subscribe(self, conn: SyncConn, topic: str, agent_id: str,
                        now: float) -> None:
        conn.execute("INSERT INTO bus_subscriptions (topic, agent_id, created_at)"
                     " VALUES (?, ?, ?) ON CONFLICT DO NOTHING", (topic, agent_id, now))

    def unsubscribe(self, conn: SyncConn, topic: str, agent_id: str) -> None:
        conn.execute("DELETE FROM bus_subscriptions WHERE topic = ? AND agent_id = ?",
                           (topic, agent_id))

    # -- reads ------------------------------------------------------------------------------------

    async def open_counts(self) -> dict[str, int]:
        """Open (queued or leased) deliveries per recipient."""
        rows = await self.db.fetchall(
            f"SELECT recipient_id, COUNT(*) FROM bus_deliveries WHERE {_OPEN} "
            "GROUP BY recipient_id")
        return {str(r[0]): int(r[1]) for r in rows}

    async def message(self, message_id: int) -> MessageRow | None:
        row = await self.db.fetchone(f"SELECT {_M_COLS} FROM bus_messages WHERE id = ?",
                                     (message_id,))
        return _message(tuple(row)) if row else None

    async def deliveries(self, message_id: int) -> list[DeliveryRow]:
        rows = await self.db.fetchall(f"SELECT {_D_COLS} FROM bus_deliveries WHERE "
                                      "message_id = ? ORDER BY recipient_id", (message_id,))
        return [_delivery(tuple(r)) for r in rows]

    async def of_recipient(self, recipient_id: str, *, states: Sequence[str] = OPEN_STATES,
                           limit: int = 100) -> list[Leased]:
        cols = ", ".join("d." + c.strip() for c in _D_COLS.split(","))
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        marks = ", ".join("?" for _ in states)
        rows = await self.db.fetchall(
            f"SELECT {cols}, {mcols} FROM bus_deliveries d JOIN bus_messages m "
            f"ON m.id = d.message_id WHERE d.recipient_id = ? AND d.state IN ({marks}) "
            "ORDER BY d.lane, d.seq LIMIT ?", (recipient_id, *states, limit))
        return [Leased(_message(tuple(r)[12:]), _delivery(tuple(r))) for r in rows]

    async def recent(self, agent_id: str | None = None, limit: int = 20) -> list[MessageRow]:
        """The last messages, newest last: all of them, or those sent or received by one."""
        if agent_id is None:
            rows = await self.db.fetchall(
                f"SELECT {_M_COLS} FROM bus_messages ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = await self.db.fetchall(
                f"SELECT {_M_COLS} FROM bus_messages WHERE sender = ? OR id IN (SELECT "
                "message_id FROM bus_deliveries WHERE recipient_id = ?) ORDER BY id DESC "
                "LIMIT ?", (agent_id, agent_id, limit))
        return [_message(tuple(r)) for r in reversed(rows)]

    async def search(self, words: Sequence[str], *, since: float = 0.0,
                     limit: int = 200) -> list[MessageRow]:
        """Messages whose body holds every word, newest first."""
        where, params = contains_all(("body",), words)
        rows = await self.db.fetchall(
            f"SELECT {_M_COLS} FROM bus_messages WHERE created_at >= ? AND {where}"
            " ORDER BY id DESC LIMIT ?", (since, *params, limit))
        return [_message(tuple(r)) for r in rows]

    async def subscribers(self, topic: str) -> list[str]:
        rows = await self.db.fetchall("SELECT agent_id FROM bus_subscriptions WHERE topic = ? "
                                      "ORDER BY created_at", (topic,))
        return [str(r[0]) for r in rows]

    async def topics_of(self, agent_id: str) -> list[str]:
        rows = await self.db.fetchall("SELECT topic FROM bus_subscriptions WHERE agent_id = ? "
                                      "ORDER BY topic", (agent_id,))
        return [str(r[0]) for r in rows]

    async def roles(self) -> dict[str, tuple[str, ...]]:
        """agent id -> its roles (the subscriptions to "role:<name>")."""
        rows = await self.db.fetchall("SELECT agent_id, topic FROM bus_subscriptions WHERE "
                                      "topic LIKE 'role:%' ORDER BY created_at")
        out: dict[str, tuple[str, ...]] = {}
        for r in rows:
            out[str(r[0])] = (*out.get(str(r[0]), ()), str(r[1])[5:])
        return out

    async def state_counts(self) -> dict[str, int]:
        rows = await self.db.fetchall("SELECT state, COUNT(*) FROM bus_deliveries GROUP BY state")
        return {str(r[0]): int(r[1]) for r in rows}



class BusWriter(ThreadWriter):
    """The bus's write connection (store/writer.py: its own connection on one thread of
    its own, a whole batch of writes one call into that thread and one transaction). A rolled
    back transaction makes the repository read its sequences again; a write that failed for the
    database's sake (disk full, read-only, I/O) is noted in the thread and told to the store's
    write-error listeners (the storage guard) on the event loop once the batch is back, so the
    bus's connection is watched like the store's own."""

    def __init__(self, target: Path | str, repo: BusRepo) -> None:
        super().__init__(target, name="bus writer", on_rollback=repo.forget_sequences,
                         pragmas=(f"wal_autocheckpoint={WAL_CHECKPOINT_PAGES}",))
        self.repo = repo
        self._failures: list[str] = []

    async def batch(self, writes: Sequence[Write]) -> list[tuple[bool, Any]]:
        try:
            return await super().batch(writes)
        finally:
            failures, self._failures = self._failures, []
            for reason in dict.fromkeys(failures):  # each reason once per batch
                self.repo.db.report_write_error(reason)

    def run_transaction(self, writes: Sequence[Write]) -> list[Any]:
        try:
            return super().run_transaction(writes)
        except StoreUnavailable as exc:
            if exc.__cause__ is not None:  # the database's, not "the writer is closed"
                self._failures.append(str(exc.__cause__))
            raise
