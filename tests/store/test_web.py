"""Conformance of WebCredentialStore: sign-in links that work once and expire, sessions and
API tokens that work until they expire or are revoked, the kill switch's revoke-all, and only a
hash of any secret stored."""

from __future__ import annotations

import pytest

from store import Store
from store.protocols import WebCredentialStore
from store.web import hash_secret
from tests.store.conftest import T0, FakeNow


@pytest.fixture
def web(store: Store) -> WebCredentialStore:
    return store.web


async def test_a_link_works_once_and_until_it_expires(web: WebCredentialStore,
                                                      clock: FakeNow) -> None:
    row = await web.add("l-1", "link", "secret-1", "telegram:1", ttl_s=600)
    assert (row.kind, row.operator, row.created_at, row.expires_at) == (
        "link", "telegram:1", T0, T0 + 600)
    assert await web.link_state("secret-1") == "ok"
    used = await web.use_link("secret-1")
    assert used is not None and used.used_at == T0
    assert await web.use_link("secret-1") is None
    assert await web.link_state("secret-1") == "used"
    await web.add("l-2", "link", "secret-2", "telegram:1", ttl_s=600)
    clock.advance(600)
    assert await web.use_link("secret-2") is None
    assert await web.link_state("secret-2") == "expired"
    assert await web.link_state("never-issued") == "unknown"
    # A session's secret is not a link.
    await web.add("s-1", "session", "secret-3", "telegram:1", csrf="c", ttl_s=60)
    assert await web.use_link("secret-3") is None


async def test_sessions_and_tokens_until_expiry_or_revocation(web: WebCredentialStore,
                                                              clock: FakeNow) -> None:
    await web.add("s-1", "session", "sess", "telegram:1", csrf="tok", ttl_s=100)
    await web.add("t-1", "token", "tkn", "slack:U2", label="ci")
    session = await web.valid("sess", "session")
    assert session is not None and session.csrf == "tok"
    assert await web.valid("sess", "token") is None  # the kind must match
    clock.advance(100)
    assert await web.valid("sess", "session") is None
    clock.advance(10_000)
    token = await web.valid("tkn", "token")
    assert token is not None and token.expires_at is None and token.last_seen == clock.t
    assert [r.id for r in await web.list("token")] == ["t-1"]
    assert [r.id for r in await web.list("token", "telegram:1")] == []
    assert await web.revoke("t-1", "telegram:1")
    assert not await web.revoke("t-1", "telegram:1")
    assert await web.valid("tkn", "token") is None
    assert await web.list("token") == []
    gone = await web.get("t-1")
    assert gone is not None and gone.revoked_by == "telegram:1"
    assert [r.id for r in await web.list("token", live_only=False)] == ["t-1"]


async def test_revoke_all_ends_every_live_one(web: WebCredentialStore, clock: FakeNow) -> None:
    await web.add("l-1", "link", "a", "telegram:1", ttl_s=600)
    await web.add("l-2", "link", "b", "telegram:1", ttl_s=600)
    await web.use_link("b")  # used: nothing left to revoke
    await web.add("s-1", "session", "c", "telegram:1", ttl_s=600)
    await web.add("t-1", "token", "d", "slack:U2")
    await web.add("t-2", "token", "e", "slack:U2")
    await web.revoke("t-2", "slack:U2")
    assert await web.revoke_all("telegram:9", "slack:U2") == 1  # one operator's
    assert await web.revoke_all() == 2
    assert await web.link_state("a") == "revoked"
    assert await web.valid("c", "session") is None
    assert await web.revoke_all() == 0
    assert await web.revoke_secret("c", "session", "x") is False


async def test_only_hashes_are_stored_and_ended_ones_purged(web: WebCredentialStore,
                                                            store: Store,
                                                            clock: FakeNow) -> None:
    await web.add("t-1", "token", "sbt_plain-secret", "telegram:1", label="x")
    found = await web.by_secret("sbt_plain-secret", "token")
    assert found is not None and found.id == "t-1"
    rows = await store.db.fetchall("SELECT * FROM web_credentials")
    assert "sbt_plain-secret" not in repr([tuple(r) for r in rows])
    assert hash_secret("sbt_plain-secret") in repr([tuple(r) for r in rows])
    await web.add("l-1", "link", "old", "telegram:1", ttl_s=10)
    clock.advance(100)
    assert await web.purge(clock.t) == 1  # the expired link; the live token stays
    assert await web.get("t-1") is not None
