"""Repository for the bus: messages, one delivery per recipient (its sequence, state, lease and
how it ended) and topic subscriptions.

The write methods take the connection of an open transaction (`Database.transaction()`), so the
bus can put a whole batch of sends, leases and acks into one transaction. Every method that
stamps a time takes `now`: the caller's clock decides.

Delivery states: queued -> leased -> consumed, or back to queued (lease released or expired,
attempts counted), or one of the ends expired | dead (dead-lettered, with a reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from store.db import Database

# The states appear as literals in the queries too: SQLite uses a partial index only for a query
# whose WHERE has the index's own term, which a bound parameter cannot be.
QUEUED, LEASED, CONSUMED, EXPIRED, DEAD = "queued", "leased", "consumed", "expired", "dead"
OPEN_STATES = (QUEUED, LEASED)


@dataclass(frozen=True, slots=True)
class MessageRow:
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


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    message_id: int
    recipient_id: str
    seq: int
    priority: int
    state: str
    attempts: int
    lease_holder: str | None
    lease_token: str | None
    lease_expires_at: float | None
    delivered_at: float | None
    consumed_at: float | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class Leased:
    """One delivery handed to a turn, with its message."""

    message: MessageRow
    delivery: DeliveryRow


@dataclass(frozen=True, slots=True)
class NewMessage:
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
    priority: int = 0


_M_COLS = ("id, sender, sender_name, recipient, type, body, reply_to, dedup_key, expires_at, "
           "created_at")
_D_COLS = ("message_id, recipient_id, seq, priority, state, attempts, lease_holder, lease_token, "
           "lease_expires_at, delivered_at, consumed_at, reason")


def _message(row: Sequence[Any]) -> MessageRow:
    return MessageRow(*row[:10])


def _delivery(row: Sequence[Any]) -> DeliveryRow:
    return DeliveryRow(*row[:12])


async def _all(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    return list(await conn.execute_fetchall(sql, params))


class BusRepo:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._next_seq: dict[str, int] = {}  # recipient -> its next sequence (writer only)

    # -- writes, inside a caller's transaction ----------------------------------------------------

    async def insert(self, conn: aiosqlite.Connection, msg: NewMessage) -> tuple[int, bool]:
        """Store a message and its deliveries. Returns (id, duplicate): a dedup key the
        sender used before returns the first message's id and stores nothing."""
        return (await self.insert_many(conn, [msg]))[0]

    async def insert_many(self, conn: aiosqlite.Connection,
                          msgs: Sequence[NewMessage]) -> list[tuple[int, bool]]:
        """Many messages in two statements (messages, deliveries): ids and per-recipient
        sequences are assigned here, which is safe because the bus is the only writer of
        these tables and writes inside the transaction. Results in the order given."""
        try:
            return await self._insert_many(conn, msgs)
        except BaseException:
            self._next_seq.clear()  # the transaction rolls back: sequences are read again
            raise

    async def _insert_many(self, conn: aiosqlite.Connection,
                           msgs: Sequence[NewMessage]) -> list[tuple[int, bool]]:
        seen: dict[tuple[str, str], int] = {}
        for msg in msgs:
            if msg.dedup_key is not None and (msg.sender, msg.dedup_key) not in seen:
                found = await _all(conn, "SELECT id FROM bus_messages WHERE sender = ? AND "
                                         "dedup_key = ?", (msg.sender, msg.dedup_key))
                if found:
                    seen[(msg.sender, msg.dedup_key)] = int(found[0][0])
        top = await _all(conn, "SELECT seq FROM sqlite_sequence WHERE name = 'bus_messages'")
        next_id = int(top[0][0]) if top else 0
        missing = {rid for m in msgs for rid in m.recipients} - set(self._next_seq)
        if missing:
            marks = ", ".join("?" for _ in missing)
            rows = await _all(conn, "SELECT recipient_id, MAX(seq) FROM bus_deliveries WHERE "
                                    f"recipient_id IN ({marks}) GROUP BY recipient_id",
                              tuple(missing))
            self._next_seq.update({rid: 1 for rid in missing})
            self._next_seq.update({str(r[0]): int(r[1]) + 1 for r in rows})
        out: list[tuple[int, bool]] = []
        message_rows: list[tuple[Any, ...]] = []
        delivery_rows: list[tuple[Any, ...]] = []
        for msg in msgs:
            key = (msg.sender, msg.dedup_key or "")
            if msg.dedup_key is not None and key in seen:
                out.append((seen[key], True))
                continue
            next_id += 1
            if msg.dedup_key is not None:
                seen[key] = next_id
            out.append((next_id, False))
            message_rows.append((next_id, msg.sender, msg.sender_name, msg.recipient, msg.type,
                                 msg.body, msg.reply_to, msg.dedup_key, msg.expires_at,
                                 msg.created_at))
            for rid in msg.recipients:
                seq = self._next_seq[rid]
                self._next_seq[rid] = seq + 1
                delivery_rows.append((next_id, rid, seq, msg.priority, QUEUED))
        await conn.executemany(
            "INSERT INTO bus_messages (id, sender, sender_name, recipient, type, body, reply_to, "
            "dedup_key, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            message_rows)
        await conn.executemany(
            "INSERT INTO bus_deliveries (message_id, recipient_id, seq, priority, state) "
            "VALUES (?, ?, ?, ?, ?)", delivery_rows)
        return out

    def forget_sequences(self) -> None:
        """A transaction that assigned sequences rolled back: read them again next time."""
        self._next_seq.clear()

    async def lease(self, conn: aiosqlite.Connection, recipient_id: str, *, holder: str,
                    token: str, until: float, now: float, limit: int) -> list[Leased]:
        """Lease up to `limit` open deliveries of one recipient (queued ones, and leased ones
        whose lease has run out): interrupts first, then in sequence order."""
        return (await self.take(conn, recipient_id, holder=holder, token=token, until=until,
                                now=now, limit=limit))[1]

    async def take(self, conn: aiosqlite.Connection, recipient_id: str, *, holder: str,
                   token: str, until: float, now: float,
                   limit: int) -> tuple[list[MessageRow], list[Leased]]:
        """`lease`, and the queued messages found expired on the way ended as expired
        (returned first, so their senders can be told). One query, one update each."""
        cols = ", ".join("d." + c.strip() for c in _D_COLS.split(","))
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        rows = await _all(
            conn, f"SELECT {cols}, {mcols} FROM bus_deliveries d "
            "JOIN bus_messages m ON m.id = d.message_id WHERE d.recipient_id = ? AND "
            "d.state IN ('queued', 'leased') AND "  # the partial index's own term
            "(d.state = 'queued' OR d.lease_expires_at <= ?) "
            "ORDER BY d.priority DESC, d.seq LIMIT ?",
            (recipient_id, now, limit))
        expired = [r for r in rows if r[4] == QUEUED and r[20] is not None and r[20] <= now]
        live = [r for r in rows if not (r[4] == QUEUED and r[20] is not None and r[20] <= now)]
        if expired:
            await conn.executemany(
                "UPDATE bus_deliveries SET state = ?, reason = 'expired unread' "
                "WHERE recipient_id = ? AND seq = ?", [(EXPIRED, recipient_id, r[2])
                                                        for r in expired])
        if live:
            await conn.executemany(
                "UPDATE bus_deliveries SET state = ?, attempts = attempts + 1, "
                "lease_holder = ?, lease_token = ?, lease_expires_at = ?, "
                "delivered_at = COALESCE(delivered_at, ?) WHERE recipient_id = ? AND seq = ?",
                [(LEASED, holder, token, until, now, recipient_id, r[2]) for r in live])
        out = [Leased(MessageRow(*r[12:22]),
                      DeliveryRow(r[0], r[1], r[2], r[3], LEASED, r[5] + 1, holder, token,
                                  until, r[9] or now, None, None)) for r in live]
        return [_message(r[12:]) for r in expired], out

    async def extend(self, conn: aiosqlite.Connection, token: str, until: float) -> int:
        cur = await conn.execute(
            "UPDATE bus_deliveries SET lease_expires_at = ? WHERE lease_token = ? AND "
            "state = 'leased'", (until, token))
        n = cur.rowcount
        await cur.close()
        return n

    async def ack(self, conn: aiosqlite.Connection, token: str, now: float) -> int:
        """Consumed: only while the lease is still this token's (fencing). How many."""
        cur = await conn.execute(
            "UPDATE bus_deliveries SET state = ?, consumed_at = ?, lease_expires_at = NULL "
            "WHERE lease_token = ? AND state = 'leased'", (CONSUMED, now, token))
        n = cur.rowcount
        await cur.close()
        return n

    async def release(self, conn: aiosqlite.Connection, token: str, *, max_attempts: int,
                      reason: str) -> list[MessageRow]:
        """The turn holding `token` failed: its deliveries go back to the queue, or, after
        `max_attempts`, to the dead letters. Returns the dead-lettered messages."""
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        dead = await _all(
            conn, f"SELECT {mcols} FROM bus_deliveries d JOIN bus_messages m "
            "ON m.id = d.message_id WHERE d.lease_token = ? AND d.state = 'leased' AND "
            "d.attempts >= ?", (token, max_attempts))
        await conn.execute(
            "UPDATE bus_deliveries SET state = ?, reason = ?, lease_expires_at = NULL "
            "WHERE lease_token = ? AND state = 'leased' AND attempts >= ?",
            (DEAD, f"{reason} ({max_attempts} attempts)", token, max_attempts))
        await conn.execute(
            "UPDATE bus_deliveries SET state = ?, lease_holder = NULL, lease_token = NULL, "
            "lease_expires_at = NULL, reason = ? WHERE lease_token = ? AND state = 'leased'",
            (QUEUED, reason, token))
        return [_message(r) for r in dead]

    async def reclaim(self, conn: aiosqlite.Connection, holder_prefix: str) -> int:
        """Leases held by anyone but `holder_prefix` (a previous supervisor, now dead) go back
        to the queue at once, without waiting for them to run out."""
        cur = await conn.execute(
            "UPDATE bus_deliveries SET state = ?, lease_holder = NULL, lease_token = NULL, "
            "lease_expires_at = NULL, reason = 'redelivered after a restart' "
            "WHERE state = ? AND (lease_holder IS NULL OR substr(lease_holder, 1, ?) != ?)",
            (QUEUED, LEASED, len(holder_prefix), holder_prefix))
        n = cur.rowcount
        await cur.close()
        return n

    async def dead_letter_open(self, conn: aiosqlite.Connection, recipient_id: str,
                               reason: str) -> list[MessageRow]:
        """Every open delivery of `recipient_id` ends as a dead letter (killed, over budget)."""
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        rows = await _all(
            conn, f"SELECT {mcols} FROM bus_deliveries d JOIN bus_messages m "
            "ON m.id = d.message_id WHERE d.recipient_id = ? AND "
            "d.state IN ('queued', 'leased')", (recipient_id,))
        await conn.execute(
            "UPDATE bus_deliveries SET state = ?, reason = ?, lease_expires_at = NULL "
            "WHERE recipient_id = ? AND state IN ('queued', 'leased')",
            (DEAD, reason, recipient_id))
        return [_message(r) for r in rows]

    async def subscribe(self, conn: aiosqlite.Connection, topic: str, agent_id: str,
                        now: float) -> None:
        await conn.execute("INSERT OR IGNORE INTO bus_subscriptions (topic, agent_id, "
                           "created_at) VALUES (?, ?, ?)", (topic, agent_id, now))

    async def unsubscribe(self, conn: aiosqlite.Connection, topic: str, agent_id: str) -> None:
        await conn.execute("DELETE FROM bus_subscriptions WHERE topic = ? AND agent_id = ?",
                           (topic, agent_id))

    # -- reads ------------------------------------------------------------------------------------

    async def open_counts(self) -> dict[str, int]:
        """Open (queued or leased) deliveries per recipient."""
        rows = await self.db.fetchall(
            "SELECT recipient_id, COUNT(*) FROM bus_deliveries WHERE "
            "state IN ('queued', 'leased') GROUP BY recipient_id")
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
            "ORDER BY d.priority DESC, d.seq LIMIT ?", (recipient_id, *states, limit))
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
