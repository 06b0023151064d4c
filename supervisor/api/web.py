"""The web console's and the HTTP API's credentials (a part of SupervisorAPI): one-time sign-in
links sent in chat, browser sessions with their CSRF token, and per-operator API tokens issued
and revoked from chat. Each acts as the operator it belongs to, with that operator's role as it
is now (a role changed or an operator removed takes effect on the next request). Only hashes
are stored; the kill switch revokes every one (layer 3)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.web import CredentialRow
from supervisor.api.errors import store_errors
from supervisor.api.views import Actor
from supervisor.errors import InvalidRequest, SignInRefused
from supervisor.redact import SECRETS

if TYPE_CHECKING:
    from store import Store

logger = logging.getLogger("supervisor.api")

LINK_TTL_S = 10 * 60.0  # a sign-in link works once, for ten minutes
SESSION_TTL_S = 12 * 3600.0  # a browser session lasts a working day
TOKEN_PREFIX = "sbt_"  # an API token says what it is (secret scanners, a pasted log line)
LABEL_CHARS = 60
NEW_LINK = "Send /web in chat for a new sign-in link."
KEEP_ENDED_S = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class WebLink:
    token: str  # the secret in the link's path
    expires_at: float


@dataclass(frozen=True, slots=True)
class WebSession:
    id: str
    secret: str  # the cookie's value
    csrf: str
    operator: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class WebHolder:
    """Who a session or token is, as of this request."""

    credential_id: str
    kind: str  # session | token
    operator: str  # "platform:user_id"
    name: str
    role: str  # viewer | operator | admin
    csrf: str  # a session's ("" for a token: scripts send no cookie, so CSRF cannot reach them)


@dataclass(frozen=True, slots=True)
class TokenView:
    id: str
    operator: str
    label: str
    created_at: float
    last_seen: float | None


@dataclass(frozen=True, slots=True)
class IssuedToken:
    id: str
    secret: str  # shown once, in the reply to the one who asked
    label: str


def link_refusal(state: str) -> str:
    """Why a sign-in link does not work, for its `link_state` (the confirm page and a
    redemption say the same)."""
    return {"used": "This sign-in link was already used.",
            "expired": "This sign-in link has expired. A link works for ten minutes.",
            "revoked": "This sign-in link was revoked, by the kill switch or a sign-out.",
            }.get(state, "This is not a sign-in link of this Switchboard.")


def _secret() -> str:
    value = secrets.token_urlsafe(32)
    SECRETS.add(value)  # never in a log line or an audit row
    return value


def _token_view(row: CredentialRow) -> TokenView:
    return TokenView(row.id, row.operator, row.label, row.created_at, row.last_seen)


class WebAPI:
    def __init__(self, store: Store, not_halted: Callable[[], None]) -> None:
        self._store = store
        self._not_halted = not_halted
        # Where the browser reaches the web console (public_url, else the listener's own
        # address), set by the composition root once the listener listens; None: no listener.
        self.url: str | None = None

    async def _operator(self, who: str) -> tuple[str, str] | None:
        """(name, role) of operator "platform:user_id" now, or None if it is not one."""
        platform, _, user_id = who.partition(":")
        row = await self._store.operators.get(platform, user_id)
        return (row.name or user_id, row.role) if row else None

    @store_errors
    async def link(self, by: Actor) -> WebLink:
        """A one-time sign-in link for `by` (the operator asking in chat)."""
        if await self._operator(by.id) is None:
            raise InvalidRequest(f"{by.id} is not an operator")
        # Ended links, sessions and tokens are kept a month (who had access, when), then go
        # as new ones come.
        await self._store.web.purge(time.time() - KEEP_ENDED_S)
        token = _secret()
        row = await self._store.web.add(f"l-{secrets.token_hex(4)}", "link", token, by.id,
                                        ttl_s=LINK_TTL_S)
        assert row.expires_at is not None
        return WebLink(token, row.expires_at)

    @store_errors
    async def link_state(self, token: str) -> str:
        """What a sign-in link is now, without using it: ok, used, expired, revoked, unknown
        (the confirm page says so before the operator presses the button)."""
        return await self._store.web.link_state(token)

    @store_errors
    async def redeem(self, token: str) -> WebSession:
        """Use a sign-in link: a new browser session for its operator. A link works once."""
        row = await self._store.web.use_link(token)
        if row is None:
            state = await self.link_state(token)
            raise SignInRefused(link_refusal(state), NEW_LINK)
        if await self._operator(row.operator) is None:
            raise SignInRefused(f"{row.operator} is no longer an operator.",
                                "Ask an admin for an invite.")
        secret, csrf = _secret(), secrets.token_urlsafe(24)
        session = await self._store.web.add(f"s-{secrets.token_hex(4)}", "session", secret,
                                            row.operator, csrf=csrf, ttl_s=SESSION_TTL_S)
        assert session.expires_at is not None
        logger.info("web sign-in operator=%s session=%s", row.operator, session.id)
        return WebSession(session.id, secret, csrf, row.operator, session.expires_at)

    @store_errors
    async def holder(self, secret: str, kind: str) -> WebHolder | None:
        """The operator behind a session cookie or an API token, or None if it does not work
        (unknown, expired, revoked, or its operator was removed)."""
        if kind not in ("session", "token"):
            raise ValueError(kind)
        row = await self._store.web.valid(secret, kind)
        if row is None:
            return None
        who = await self._operator(row.operator)
        if who is None:
            return None
        return WebHolder(row.id, kind, row.operator, who[0], who[1], row.csrf)

    @store_errors
    async def sign_out(self, secret: str) -> bool:
        return await self._store.web.revoke_secret(secret, "session", "sign-out")

    @store_errors
    async def issue_token(self, by: Actor, label: str) -> IssuedToken:
        """A new API token for `by`, acting with their role. Refused while halted."""
        self._not_halted()
        label = " ".join(label.split())[:LABEL_CHARS]
        if not label:
            raise InvalidRequest("give the token a label that says what uses it, "
                                 "e.g. /token new deploy-script")
        if await self._operator(by.id) is None:
            raise InvalidRequest(f"{by.id} is not an operator")
        secret = TOKEN_PREFIX + _secret()
        SECRETS.add(secret)
        row = await self._store.web.add(f"t-{secrets.token_hex(4)}", "token", secret, by.id,
                                        label=label)
        return IssuedToken(row.id, secret, row.label)

    @store_errors
    async def tokens(self, operator: str | None = None) -> tuple[TokenView, ...]:
        """Live API tokens: one operator's, or everyone's."""
        return tuple(_token_view(r) for r in await self._store.web.list("token", operator))

    @store_errors
    async def revoke_token(self, token_id: str, *, by: Actor, admin: bool) -> TokenView:
        """Revoke a token: one's own, or anyone's for an admin."""
        row = await self._store.web.get(token_id)
        if row is None or row.kind != "token" or row.revoked_at is not None:
            raise InvalidRequest(f"there is no live API token {token_id!r} "
                                 "(/token list shows them)")
        if row.operator != by.id and not admin:
            raise InvalidRequest(f"token {token_id} is not yours; an admin can revoke it")
        await self._store.web.revoke(token_id, by.id)
        return _token_view(row)


__all__ = ["IssuedToken", "TokenView", "WebAPI", "WebHolder", "WebLink", "WebSession",
           "link_refusal"]
