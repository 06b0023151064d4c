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

    # -- writes, inside a caller's transaction ----------------------------------------------------

    async def insert(self, conn: aiosqlite.Connection, msg: NewMessage) -> tuple[int, bool]:
        """Store a message and its deliveries. Returns (id, duplicate): a dedup key the
        sender used before returns the first message's id and stores nothing."""
        if msg.dedup_key is not None:
            found = await _all(conn, "SELECT id FROM bus_messages WHERE sender = ? AND "
                                     "dedup_key = ?", (msg.sender, msg.dedup_key))
            if found:
                return int(found[0][0]), True
        cur = await conn.execute(
            "INSERT INTO bus_messages (sender, sender_name, recipient, type, body, reply_to, "
            "dedup_key, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (msg.sender, msg.sender_name, msg.recipient, msg.type, msg.body, msg.reply_to,
             msg.dedup_key, msg.expires_at, msg.created_at))
        message_id = int(cur.lastrowid or 0)
        await cur.close()
        rows = []
        for rid in msg.recipients:
            top = await _all(conn, "SELECT COALESCE(MAX(seq), 0) FROM bus_deliveries "
                                   "WHERE recipient_id = ?", (rid,))
            rows.append((message_id, rid, int(top[0][0]) + 1, msg.priority, QUEUED))
        await conn.executemany(
            "INSERT INTO bus_deliveries (message_id, recipient_id, seq, priority, state) "
            "VALUES (?, ?, ?, ?, ?)", rows)
        return message_id, False

    async def expire_due(self, conn: aiosqlite.Connection, recipient_id: str,
                         now: float) -> list[MessageRow]:
        """Queued deliveries of `recipient_id` whose message has expired: ended as expired.
        Returns their messages (so the senders can be told)."""
        rows = await _all(
            conn, f"SELECT {', '.join('m.' + c.strip() for c in _M_COLS.split(','))} "
            "FROM bus_deliveries d JOIN bus_messages m ON m.id = d.message_id "
            "WHERE d.recipient_id = ? AND d.state = ? AND m.expires_at IS NOT NULL "
            "AND m.expires_at <= ?", (recipient_id, QUEUED, now))
        if rows:
            await conn.execute(
                "UPDATE bus_deliveries SET state = ?, reason = 'expired unread' "
                "WHERE recipient_id = ? AND state = ? AND message_id IN "
                "(SELECT id FROM bus_messages WHERE expires_at IS NOT NULL AND expires_at <= ?)",
                (EXPIRED, recipient_id, QUEUED, now))
        return [_message(r) for r in rows]

    async def lease(self, conn: aiosqlite.Connection, recipient_id: str, *, holder: str,
                    token: str, until: float, now: float, limit: int) -> list[Leased]:
        """Lease up to `limit` open deliveries of one recipient (queued ones, and leased ones
        whose lease has run out): interrupts first, then in sequence order."""
        cols = ", ".join("d." + c.strip() for c in _D_COLS.split(","))
        mcols = ", ".join("m." + c.strip() for c in _M_COLS.split(","))
        rows = await _all(
            conn, f"SELECT {cols}, {mcols} FROM bus_deliveries d "
            "JOIN bus_messages m ON m.id = d.message_id WHERE d.recipient_id = ? AND "
            "(d.state = ? OR (d.state = ? AND d.lease_expires_at <= ?)) "
            "ORDER BY d.priority DESC, d.seq LIMIT ?",
            (recipient_id, QUEUED, LEASED, now, limit))
        if not rows:
            return []
        await conn.executemany(
            "UPDATE bus_deliveries SET state = ?, attempts = attempts + 1, lease_holder = ?, "
            "lease_token = ?, lease_expires_at = ?, delivered_at = COALESCE(delivered_at, ?) "
            "WHERE recipient_id = ? AND seq = ?",
            [(LEASED, holder, token, until, now, recipient_id, r[2]) for r in rows])
        out = []
        for r in rows:
            d = _delivery(r)
            d = DeliveryRow(d.message_id, d.recipient_id, d.seq, d.priority, LEASED,
                            d.attempts + 1, holder, token, until, d.delivered_at or now, None,
                            None)
            out.append(Leased(_message(r[12:]), d))
        return out

    async def extend(self, conn: aiosqlite.Connection, token: str, until: float) -> int:
        cur = await conn.execute(
            "UPDATE bus_deliveries SET lease_expires_at = ? WHERE lease_token = ? AND state = ?",
            (until, token, LEASED))
        n = cur.rowcount
        await cur.close()
        return n

    async def ack(self, conn: aiosqlite.Connection, token: str, now: float) -> int:
        """Consumed: only while the lease is still this token's (fencing). How many."""
        cur = await conn.execute(
            "UPDATE bus_deliveries SET state = ?, consumed_at = ?, lease_expires_at = NULL "
            "WHERE lease_token = ? AND state = ?", (CONSUMED, now, token, LEASED))
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
            "ON m.id = d.message_id WHERE d.lease_token = ? AND d.state = ? AND d.attempts >= ?",
            (token, LEASED, max_attempts))
        await conn.execute(
            "UPDATE bus_deliveries SET state = ?, reason = ?, lease_expires_at = NULL "
            "WHERE lease_token = ? AND state = ? AND attempts >= ?",
            (DEAD, f"{reason} ({max_attempts} attempts)", token, LEASED, max_attempts))
        await conn.execute(
            "UPDATE bus_deliveries SET state = ?, lease_holder = NULL, lease_token = NULL, "
            "lease_expires_at = NULL, reason = ? WHERE lease_token = ? AND state = ?",
            (QUEUED, reason, token, LEASED))
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
            "ON m.id = d.message_id WHERE d.recipient_id = ? AND d.state IN (?, ?)",
            (recipient_id, *OPEN_STATES))
        await conn.execute(
            "UPDATE bus_deliveries SET state = ?, reason = ?, lease_expires_at = NULL "
            "WHERE recipient_id = ? AND state IN (?, ?)",
            (DEAD, reason, recipient_id, *OPEN_STATES))
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
            "SELECT recipient_id, COUNT(*) FROM bus_deliveries WHERE state IN (?, ?) "
            "GROUP BY recipient_id", OPEN_STATES)
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
