"""Repository for the web console's credentials: one-time sign-in links, browser sessions and
the HTTP API's tokens. Only a hash of each secret is stored (like invite codes: a copy of the
database holds no working credential); the kill switch revokes them all at once."""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
from dataclasses import dataclass

from store.clock import Now, system_now
from store.db import AnyDatabase

KINDS = ("link", "session", "token")


@dataclass(frozen=True, slots=True)
class CredentialRow:
    id: str  # public: names a token or session in lists, revocations and the audit
    kind: str  # link | session | token
    operator: str  # "platform:user_id"
    label: str
    csrf: str  # a session's CSRF token ("" otherwise)
    created_at: float
    expires_at: float | None  # None: until revoked (API tokens)
    used_at: float | None  # a link: when it was redeemed
    last_seen: float | None
    revoked_at: float | None
    revoked_by: str | None


def hash_secret(secret: str) -> str:
    """The stored form of a credential: its SHA-256 (a secret is 256 random bits, so there is
    nothing to guess; see store.operators.hash_code for why not an HMAC)."""
    return hashlib.sha256(b"switchboard-web:" + secret.encode()).hexdigest()


class WebCredentialRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    async def add(self, cid: str, kind: str, secret: str, operator: str, *, label: str = "",
                  csrf: str = "", ttl_s: float | None = None) -> CredentialRow:
        if kind not in KINDS:
            raise ValueError(f"unknown credential kind {kind!r}")
        now = self._now()
        await self.db.execute(
            "INSERT INTO web_credentials (id, secret_hash, kind, operator, label, csrf,"
            " created_at, expires_at) VALUES (?,?,?,?,?,?,?,?)",
            (cid, hash_secret(secret), kind, operator, label, csrf, now,
             None if ttl_s is None else now + ttl_s))
        row = await self.get(cid)
        assert row is not None
        return row

    async def get(self, cid: str) -> CredentialRow | None:
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM web_credentials WHERE id=?", (cid,))
        return CredentialRow(**dict(row)) if row else None

    async def by_secret(self, secret: str, kind: str) -> CredentialRow | None:
        """The credential `secret` is, valid or not (the caller says why it is not)."""
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM web_credentials WHERE secret_hash=? AND kind=?",
            (hash_secret(secret), kind))
        return CredentialRow(**dict(row)) if row else None

    async def link_state(self, secret: str) -> str:
        """ok, used, revoked, expired or unknown."""
        row = await self.by_secret(secret, "link")
        if row is None:
            return "unknown"
        if row.used_at is not None:
            return "used"
        if row.revoked_at is not None:
            return "revoked"
        if row.expires_at is not None and row.expires_at <= self._now():
            return "expired"
        return "ok"

    async def valid(self, secret: str, kind: str) -> CredentialRow | None:
        """A session or token that works now (not revoked, not expired); its last use noted."""
        now = self._now()
        row = await self.by_secret(secret, kind)
        if row is None or row.revoked_at is not None or row.used_at is not None:
            return None
        if row.expires_at is not None and row.expires_at <= now:
            return None
        if row.last_seen is None or now - row.last_seen > 60:  # a write a minute at most
            await self.db.execute("UPDATE web_credentials SET last_seen=? WHERE id=?",
                                  (now, row.id))
            row = dataclasses.replace(row, last_seen=now)
        return row

    async def use_link(self, secret: str) -> CredentialRow | None:
        """Atomically use a one-time link: the row, or None if unknown, used, revoked or
        expired (`by_secret` tells which)."""
        now = self._now()
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE web_credentials SET used_at=? WHERE secret_hash=? AND kind='link'"
                " AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?",
                (now, hash_secret(secret), now))
            if cur.rowcount != 1:
                return None
        return await self.by_secret(secret, "link")

    async def revoke(self, cid: str, by: str) -> bool:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE web_credentials SET revoked_at=?, revoked_by=? WHERE id=?"
                " AND revoked_at IS NULL", (self._now(), by, cid))
            return cur.rowcount == 1

    async def revoke_secret(self, secret: str, kind: str, by: str) -> bool:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE web_credentials SET revoked_at=?, revoked_by=? WHERE secret_hash=?"
                " AND kind=? AND revoked_at IS NULL", (self._now(), by, hash_secret(secret), kind))
            return cur.rowcount == 1

    async def revoke_all(self, by: str = "kill switch",
                         operator: str | None = None) -> int:
        """Every live link, session and token (of one operator, or everyone's)."""
        now = self._now()
        who, params = ("AND operator=?", (operator,)) if operator else ("", ())
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE web_credentials SET revoked_at=?, revoked_by=? WHERE revoked_at IS NULL"
                " AND used_at IS NULL AND (expires_at IS NULL OR expires_at > ?) " + who,
                (now, by, now, *params))
            return cur.rowcount

    async def list(self, kind: str, operator: str | None = None, *,
                   live_only: bool = True) -> builtins.list[CredentialRow]:
        where = ["kind=?"]
        params: builtins.list[object] = [kind]
        if operator:
            where.append("operator=?")
            params.append(operator)
        if live_only:
            where.append("revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)")
            params.append(self._now())
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM web_credentials WHERE {' AND '.join(where)}"
            " ORDER BY created_at", tuple(params))
        return [CredentialRow(**dict(r)) for r in rows]

    async def purge(self, older_than: float) -> int:
        """Forget links, sessions and tokens that ended (expired, used or revoked) before then."""
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM web_credentials WHERE (revoked_at IS NOT NULL AND revoked_at < ?)"
                " OR (expires_at IS NOT NULL AND expires_at < ?)", (older_than, older_than))
            return cur.rowcount


_COLUMNS = ("id, kind, operator, label, csrf, created_at, expires_at, used_at, last_seen,"
            " revoked_at, revoked_by")
