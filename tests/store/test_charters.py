"""Conformance of CharterStore: standing agents' charters and the questions sent back once."""

from __future__ import annotations

import pytest

from store import Store
from store.errors import Conflict
from store.protocols import CharterStore
from tests.store.conftest import T0, MakeAgent


@pytest.fixture
def charters(store: Store) -> CharterStore:
    return store.charters


async def test_set_get_and_replace(charters: CharterStore, make_agent: MakeAgent) -> None:
    await make_agent("a1")
    assert await charters.get("a1") is None
    await charters.set("a1", "watch the builds", now=T0)
    assert await charters.get("a1") == "watch the builds"
    await charters.set("a1", "watch the builds and the deploys", now=T0 + 1)
    assert await charters.get("a1") == "watch the builds and the deploys"


async def test_all_maps_every_agent_to_its_charter(charters: CharterStore,
                                                   make_agent: MakeAgent) -> None:
    await make_agent("a1", "alpha")
    await make_agent("a2", "bravo")
    assert await charters.all() == {}
    await charters.set("a1", "one", now=T0)
    await charters.set("a2", "two", now=T0)
    await charters.set("a1", "one again", now=T0)
    assert await charters.all() == {"a1": "one again", "a2": "two"}


async def test_a_charter_belongs_to_a_known_agent(charters: CharterStore) -> None:
    with pytest.raises(Conflict):
        await charters.set("ghost", "haunt", now=T0)
    assert await charters.get("ghost") is None


async def test_a_question_goes_back_at_most_once(charters: CharterStore) -> None:
    assert await charters.claim_sendback("a1", "q-1", "Deploy?", ("line 1", "line 2"),
                                         now=T0)
    assert not await charters.claim_sendback("a1", "q-1", "Deploy? (again)", (), now=T0 + 1)
    [only] = await charters.sendbacks("a1")
    assert (only.agent_id, only.question, only.lines, only.at) == (
        "a1", "Deploy?", ("line 1", "line 2"), T0)


async def test_the_key_is_per_agent(charters: CharterStore) -> None:
    assert await charters.claim_sendback("a1", "q", "one", (), now=T0)
    assert await charters.claim_sendback("a2", "q", "two", (), now=T0)
    assert await charters.claim_sendback("a1", "q2", "three", (), now=T0)
    assert [s.question for s in await charters.sendbacks("a1")] == ["one", "three"]
    assert [s.question for s in await charters.sendbacks("a2")] == ["two"]


async def test_sendbacks_are_in_time_order(charters: CharterStore) -> None:
    assert await charters.sendbacks() == []
    await charters.claim_sendback("a1", "late", "late", (), now=T0 + 20)
    await charters.claim_sendback("a2", "early", "early", ("x",), now=T0 + 10)
    await charters.claim_sendback("a1", "middle", "middle", (), now=T0 + 15)
    assert [(s.question, s.at) for s in await charters.sendbacks()] == [
        ("early", T0 + 10), ("middle", T0 + 15), ("late", T0 + 20)]
    assert [s.question for s in await charters.sendbacks("a1")] == ["middle", "late"]
    assert await charters.sendbacks("nobody") == []
