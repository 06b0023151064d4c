"""Repository for operators, one-time invite codes, the chat copies of escalations and the
chat messages of status cards."""

from __future__ import annotations

import builtins
import hashlib
from dataclasses import dataclass

from store.clock import Now, system_now
from store.db import AnyDatabase


@dataclass(frozen=True, slots=True)
class OperatorRow:
    platform: str
    user_id: str
    name: str
    role: str
    added_by: str
    added_at: float


def hash_code(code: str) -> str:
    """What is stored for an invite code: its SHA-256. Plain SHA-256 rather than an HMAC: a
    code is random (50 bits), works once and for an hour, so there is no dictionary to try and
    searching the space outlasts it; and an HMAC key would have to live in this same database,
    where whoever can read the hashes can read the key (and, as our user, could just add an
    operator). The hash is there so that no copy of the database holds a working code."""
    return hashlib.sha256(b"switchboard-invite:" + code.encode()).hexdigest()


class OperatorRepo:
    # The method list() shadows the builtin in this class's body: annotations say builtins.list.
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    async def get(self, platform: str, user_id: str) -> OperatorRow | None:
        row = await self.db.fetchone(
            "SELECT * FROM operators WHERE platform=? AND user_id=?", (platform, user_id))
        return OperatorRow(**dict(row)) if row else None

    async def upsert(self, platform: str, user_id: str, name: str, role: str,
                     added_by: str) -> None:
        await self.db.execute(
            "INSERT INTO operators (platform, user_id, name, role, added_by, added_at)"
            " VALUES (?,?,?,?,?,?) ON CONFLICT(platform, user_id) DO UPDATE SET"
            " role=excluded.role, name=excluded.name",
            (platform, user_id, name, role, added_by, self._now()),
        )

    async def remove(self, platform: str, user_id: str) -> bool:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM operators WHERE platform=? AND user_id=?", (platform, user_id))
            return cur.rowcount == 1

    async def list(self, platform: str | None = None) -> builtins.list[OperatorRow]:
        where, params = ("WHERE platform=?", (platform,)) if platform else ("", ())
        rows = await self.db.fetchall(
            f"SELECT * FROM operators {where} ORDER BY platform, added_at", params)
        return [OperatorRow(**dict(r)) for r in rows]

    async def create_invite(self, code: str, role: str, created_by: str, ttl_s: float) -> float:
        """Store the code's hash (never the code); returns when it expires."""
        now = self._now()
        await self.db.execute(
            "INSERT INTO invites (code_hash, role, created_by, created_at, expires_at)"
            " VALUES (?,?,?,?,?)",
            (hash_code(code), role, created_by, now, now + ttl_s),
        )
        return now + ttl_s

    async def redeem_invite(self, code: str, used_by: str) -> str | None:
        """Atomically use a valid code; returns its role, or None if unknown/used/expired."""
        now = self._now()
        digest = hash_code(code)
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE invites SET used_by=?, used_at=? WHERE code_hash=? AND used_by IS NULL"
                " AND revoked=0 AND expires_at > ?",
                (used_by, now, digest, now),
            )
            if cur.rowcount != 1:
                return None
            async with conn.execute("SELECT role FROM invites WHERE code_hash=?",
                                    (digest,)) as c2:
                row = await c2.fetchone()
        return str(row[0]) if row else None

    async def revoke_invites(self) -> int:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE invites SET revoked=1 WHERE used_by IS NULL AND revoked=0"
                " AND expires_at > ?", (self._now(),))
            return cur.rowcount

    async def add_copy(self, escalation_id: str, platform: str, chat_id: str,
                       message_id: str) -> None:
        await self.db.execute(
            "INSERT INTO chat_copies (escalation_id, platform, chat_id, message_id)"
            " VALUES (?,?,?,?) ON CONFLICT (escalation_id, platform, chat_id) DO UPDATE SET"
            " message_id = excluded.message_id, settled_at = NULL",  # a new copy: unsettled
            (escalation_id, platform, chat_id, message_id))

    async def copies(self, escalation_id: str, platform: str) -> builtins.list[tuple[str, str]]:
        rows = await self.db.fetchall(
            "SELECT chat_id, message_id FROM chat_copies WHERE escalation_id=? AND platform=?",
            (escalation_id, platform))
        return [(r["chat_id"], r["message_id"]) for r in rows]

    async def unsettled(self, platform: str) -> builtins.list[str]:
        """Ids of closed escalations with copies on `platform` still showing the question."""
        rows = await self.db.fetchall(
            "SELECT c.escalation_id FROM chat_copies c JOIN escalations e"
            " ON e.id = c.escalation_id WHERE c.platform=? AND c.settled_at IS NULL"
            " AND e.status != 'open' GROUP BY c.escalation_id ORDER BY MIN(e.seq)", (platform,))
        return [r["escalation_id"] for r in rows]

    async def settle(self, escalation_id: str, platform: str) -> None:
        """Its copies on `platform` now show the outcome."""
        await self.db.execute(
            "UPDATE chat_copies SET settled_at=? WHERE escalation_id=? AND platform=?"
            " AND settled_at IS NULL", (self._now(), escalation_id, platform))

    async def escalation_for_message(self, platform: str, chat_id: str,
                                     message_id: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT escalation_id FROM chat_copies WHERE platform=? AND chat_id=?"
            " AND message_id=?", (platform, chat_id, message_id))
        return row["escalation_id"] if row else None

    # -- status cards (on Slack: the top message of each agent's thread) -----------------------

    async def set_card(self, platform: str, agent_id: str, chat_id: str,
                       message_id: str) -> None:
        await self.db.execute(
            "INSERT INTO chat_threads (platform, agent_id, chat_id, message_id, created_at)"
            " VALUES (?,?,?,?,?) ON CONFLICT (platform, agent_id, chat_id) DO UPDATE SET"
            " message_id = excluded.message_id, created_at = excluded.created_at",
            (platform, agent_id, chat_id, message_id, self._now()))

    async def card(self, platform: str, agent_id: str, chat_id: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT message_id FROM chat_threads WHERE platform=? AND agent_id=? AND chat_id=?",
            (platform, agent_id, chat_id))
        return row["message_id"] if row else None

    async def agent_for_card(self, platform: str, chat_id: str, message_id: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT agent_id FROM chat_threads WHERE platform=? AND chat_id=? AND message_id=?",
            (platform, chat_id, message_id))
        return row["agent_id"] if row else None
