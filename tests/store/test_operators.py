"""Conformance of OperatorStore: operators, one-time invite codes, chat copies of escalations
and the chat messages of status cards."""

from __future__ import annotations

import pytest

from store import Store
from store.operators import hash_code
from store.protocols import OperatorStore
from tests.store.conftest import T0, FakeNow


@pytest.fixture
def operators(store: Store) -> OperatorStore:
    return store.operators


async def test_upsert_get_and_list(operators: OperatorStore, clock: FakeNow) -> None:
    assert await operators.get("telegram", "1") is None
    await operators.upsert("telegram", "1", "ann", "admin", "bootstrap")
    clock.advance(1)
    await operators.upsert("slack", "U2", "bob", "viewer", "telegram:1")
    clock.advance(1)
    await operators.upsert("telegram", "3", "cy", "operator", "telegram:1")
    row = await operators.get("telegram", "1")
    assert row is not None
    assert (row.platform, row.user_id, row.name, row.role, row.added_by, row.added_at) == (
        "telegram", "1", "ann", "admin", "bootstrap", T0)
    assert [(o.platform, o.user_id) for o in await operators.list()] == [
        ("slack", "U2"), ("telegram", "1"), ("telegram", "3")]
    assert [o.user_id for o in await operators.list("telegram")] == ["1", "3"]
    assert await operators.list("teams") == []


async def test_upsert_changes_role_and_name_but_keeps_who_added_and_when(
        operators: OperatorStore, clock: FakeNow) -> None:
    await operators.upsert("telegram", "1", "ann", "viewer", "bootstrap")
    clock.advance(100)
    await operators.upsert("telegram", "1", "Ann B", "admin", "someone else")
    row = await operators.get("telegram", "1")
    assert row is not None
    assert (row.name, row.role, row.added_by, row.added_at) == (
        "Ann B", "admin", "bootstrap", T0)
    assert len(await operators.list()) == 1


async def test_remove_says_whether_there_was_one(operators: OperatorStore) -> None:
    await operators.upsert("telegram", "1", "ann", "admin", "bootstrap")
    assert await operators.remove("telegram", "1")
    assert not await operators.remove("telegram", "1")
    assert await operators.get("telegram", "1") is None


async def test_an_invite_works_once(store: Store, operators: OperatorStore) -> None:
    expires = await operators.create_invite("CODE-1", "operator", "telegram:1", 3600)
    assert expires == T0 + 3600
    assert await operators.redeem_invite("CODE-1", "telegram:2") == "operator"
    assert await operators.redeem_invite("CODE-1", "telegram:3") is None  # used
    assert await operators.redeem_invite("WRONG", "telegram:3") is None  # unknown
    # only the code's hash is stored, never the code
    rows = await store.db.fetchall("SELECT code_hash FROM invites")
    assert [r[0] for r in rows] == [hash_code("CODE-1")] and hash_code("CODE-1") != "CODE-1"


async def test_an_invite_expires_on_the_store_clock(operators: OperatorStore,
                                                    clock: FakeNow) -> None:
    await operators.create_invite("C1", "viewer", "telegram:1", 60)
    await operators.create_invite("C2", "viewer", "telegram:1", 60)
    clock.advance(59)
    assert await operators.redeem_invite("C1", "u") == "viewer"
    clock.advance(1)
    assert await operators.redeem_invite("C2", "u") is None  # expires_at is not > now


async def test_revoking_takes_only_the_live_unused_codes(operators: OperatorStore,
                                                         clock: FakeNow) -> None:
    await operators.create_invite("used", "viewer", "a", 60)
    await operators.redeem_invite("used", "u")
    await operators.create_invite("stale", "viewer", "a", 10)
    await operators.create_invite("live1", "viewer", "a", 600)
    await operators.create_invite("live2", "admin", "a", 600)
    clock.advance(30)
    assert await operators.revoke_invites() == 2
    assert await operators.revoke_invites() == 0
    assert await operators.redeem_invite("live1", "u") is None


async def _escalation(store: Store, esc_id: str, *, closed: bool) -> None:
    await store.escalations.create(id=esc_id, agent_id=None, kind="permission", title="t",
                                   body="b")
    if closed:
        await store.escalations.close(esc_id, status="allowed", answer={}, by="x", via="y")


async def test_chat_copies_of_an_escalation(store: Store, operators: OperatorStore) -> None:
    await _escalation(store, "e1", closed=False)
    assert await operators.copies("e1", "telegram") == []
    await operators.add_copy("e1", "telegram", "chat-1", "m-1")
    await operators.add_copy("e1", "telegram", "chat-2", "m-7")
    await operators.add_copy("e1", "telegram", "chat-1", "m-2")  # replaces chat-1's message
    await operators.add_copy("e1", "slack", "C1", "ts-1")
    assert sorted(await operators.copies("e1", "telegram")) == [("chat-1", "m-2"),
                                                                ("chat-2", "m-7")]
    assert await operators.copies("e1", "slack") == [("C1", "ts-1")]
    assert await operators.escalation_for_message("telegram", "chat-2", "m-7") == "e1"
    assert await operators.escalation_for_message("telegram", "chat-1", "m-1") is None
    assert await operators.escalation_for_message("slack", "chat-2", "m-7") is None


async def test_unsettled_copies_of_closed_escalations(store: Store,
                                                      operators: OperatorStore) -> None:
    await _escalation(store, "open", closed=False)
    await _escalation(store, "second", closed=True)
    await _escalation(store, "first", closed=True)
    for esc in ("open", "first", "second"):
        await operators.add_copy(esc, "telegram", "chat", f"m-{esc}")
        await operators.add_copy(esc, "telegram", "chat2", f"n-{esc}")
    await operators.add_copy("first", "slack", "C", "ts")
    assert await operators.unsettled("telegram") == ["second", "first"]  # in outbox order
    await operators.settle("second", "telegram")
    assert await operators.unsettled("telegram") == ["first"]
    assert await operators.unsettled("slack") == ["first"]  # per platform
    await operators.settle("first", "telegram")
    await operators.settle("first", "telegram")  # twice is harmless
    assert await operators.unsettled("telegram") == []


async def test_status_cards(operators: OperatorStore) -> None:
    assert await operators.card("slack", "a1", "C1") is None
    await operators.set_card("slack", "a1", "C1", "ts-1")
    await operators.set_card("slack", "a1", "C2", "ts-2")
    assert await operators.card("slack", "a1", "C1") == "ts-1"
    await operators.set_card("slack", "a1", "C1", "ts-3")  # a new top message replaces it
    assert await operators.card("slack", "a1", "C1") == "ts-3"
    assert await operators.agent_for_card("slack", "C1", "ts-3") == "a1"
    assert await operators.agent_for_card("slack", "C1", "ts-1") is None
    assert await operators.agent_for_card("telegram", "C2", "ts-2") is None
    assert await operators.card("telegram", "a1", "C1") is None
