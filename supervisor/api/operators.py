"""The API's operators and invites (a part of SupervisorAPI): the allowlist with roles, changes
to it (never leaving no admin), and one-time invite codes."""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from supervisor.api.errors import store_errors
from supervisor.api.views import Actor, InviteView, OperatorView
from supervisor.errors import InvalidRequest, UnknownOperator
from supervisor.redact import SECRETS

if TYPE_CHECKING:
    from store import Store
    from supervisor.config import Settings

logger = logging.getLogger("supervisor.api")

ROLES = ("viewer", "operator", "admin")
INVITE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
INVITE_LENGTH = 10


class OperatorAdmin:
    if TYPE_CHECKING:  # the facade's, which this is a part of
        settings: Settings
        _store: Store

        def _not_halted(self) -> None: ...

    @staticmethod
    def _role(word: str) -> str:
        role = word.lower()
        if role not in ROLES:
            raise InvalidRequest(f"unknown role {word!r}; roles are {', '.join(ROLES)}")
        return role

    @staticmethod
    def _who(who: str) -> tuple[str, str]:
        platform, _, user_id = who.partition(":")
        if not platform or not user_id:
            raise InvalidRequest(f"name the operator as platform:user_id, got {who!r}")
        return platform, user_id

    @store_errors
    async def operators(self, platform: str | None = None) -> tuple[OperatorView, ...]:
        return tuple(await self._store.operators.list(platform))

    @store_errors
    async def operator(self, platform: str, user_id: str) -> OperatorView | None:
        return await self._store.operators.get(platform, user_id)

    @store_errors
    async def add_operator(self, platform: str, user_id: str, name: str, role: str, *,
                           added_by: str) -> OperatorView:
        """Add an operator, or update the name and role of one (a front end learning a
        user's name, admins seeded from the configuration)."""
        role = self._role(role)
        await self._store.operators.upsert(platform, user_id, name, role, added_by)
        row = await self._store.operators.get(platform, user_id)
        assert row is not None
        return row

    async def _target(self, who: str, by: Actor) -> OperatorView:
        platform, user_id = self._who(who)
        if f"{platform}:{user_id}" == by.id:
            raise InvalidRequest("you cannot change or remove yourself")
        current = await self._store.operators.get(platform, user_id)
        if current is None:
            raise UnknownOperator(who)
        return current

    @store_errors
    async def set_role(self, who: str, role: str, *, by: Actor) -> OperatorView:
        """Change the role of operator `who` ("platform:user_id")."""
        self._not_halted()
        current = await self._target(who, by)
        role = self._role(role)
        await self._store.operators.upsert(current.platform, current.user_id, current.name,
                                           role, by.id)
        changed = await self._store.operators.get(current.platform, current.user_id)
        assert changed is not None
        return changed

    @store_errors
    async def remove_operator(self, who: str, *, by: Actor) -> OperatorView:
        """Remove operator `who`; returns who it was. Works while halted: it takes access
        away, like the kill switch's own revocations."""
        current = await self._target(who, by)
        await self._store.operators.remove(current.platform, current.user_id)
        return current

    @store_errors
    async def create_invite(self, role: str, *, by: Actor) -> InviteView:
        """A one-time code that makes whoever redeems it an operator with `role`."""
        self._not_halted()
        role = self._role(role)
        code = "".join(secrets.choice(INVITE_ALPHABET) for _ in range(INVITE_LENGTH))
        SECRETS.add(code)  # shown once, to the admin; never in a log line (PTB logs at DEBUG)
        ttl_s = self.settings.invite_ttl_s
        expires_at = await self._store.operators.create_invite(code, role, by.id, ttl_s)
        return InviteView(code, role, expires_at, ttl_s)

    @store_errors
    async def redeem_invite(self, code: str, platform: str, user_id: str,
                            name: str) -> OperatorView | None:
        """Use a valid code once and add its redeemer; None if it is unknown, used, expired
        or revoked."""
        role = await self._store.operators.redeem_invite(code, f"{platform}:{user_id}")
        if role is None:
            return None
        await self._store.operators.upsert(platform, user_id, name, role, "invite")
        return await self._store.operators.get(platform, user_id)
