"""Conformance of ReviewStore: requests offered to reviewer agents, their one outcome, the
operator's one overturn, and the session allowance a reviewer granted (docs/reviewers.md)."""

from __future__ import annotations

import pytest

from store import Store
from store.protocols import ReviewStore
from tests.store.conftest import T0, FakeNow, MakeAgent


@pytest.fixture
def reviews(store: Store) -> ReviewStore:
    return store.reviews


async def offer(reviews: ReviewStore, review_id: str, kind: str = "permission"):
    return await reviews.create(
        review_id=review_id, agent_id="a1", agent_name="dev", reviewer_id="r1",
        reviewer_name="rev", kind=kind, title="dev wants to use Bash", summary="npm test",
        tool_name="Bash", session_key="Bash:npm test", session_id="s1")


async def test_a_review_has_one_outcome_and_one_overturn(reviews: ReviewStore,
                                                         clock: FakeNow) -> None:
    row = await offer(reviews, "r1")
    assert row.status == "open" and row.created_at == T0 and row.decided_at is None
    assert await reviews.overturn("r1", by="alice") is False  # nothing decided yet
    clock.advance(5)
    assert await reviews.close("r1", status="allow", reasoning="tests are in the charter")
    assert not await reviews.close("r1", status="handed_over", answer="too late")
    got = await reviews.get("r1")
    assert got is not None and got.status == "allow" and got.decided_at == T0 + 5
    assert got.reasoning == "tests are in the charter"
    assert await reviews.overturn("r1", by="alice")
    assert not await reviews.overturn("r1", by="bob")
    got = await reviews.get("r1")
    assert got is not None and got.overturned_by == "alice" and got.overturned_at == T0 + 5


async def test_a_handed_over_review_cannot_be_overturned_and_recent_is_newest_first(
        reviews: ReviewStore, clock: FakeNow) -> None:
    await offer(reviews, "r1")
    clock.advance(1)
    await offer(reviews, "r2", kind="question")
    assert await reviews.close("r1", status="handed_over", answer="no decision in time")
    assert not await reviews.overturn("r1", by="alice")
    assert [r.id for r in await reviews.recent(10)] == ["r2", "r1"]
    assert [r.id for r in await reviews.recent(10, since=T0 + 1)] == ["r2"]
    assert await reviews.get("nope") is None


async def test_only_the_reviewers_session_allowance_is_revoked(
        store: Store, reviews: ReviewStore, make_agent: MakeAgent) -> None:
    await make_agent("a1", "dev")
    await store.escalations.allow_for_session("a1", "s1", "Bash:npm test", "Bash", "reviewer rev")
    await store.escalations.allow_for_session("a1", "s1", "Bash:ls", "Bash", "alice")
    assert await reviews.revoke_session("a1", "Bash:ls", "reviewer rev") == 0
    assert await reviews.revoke_session("a1", "Bash:npm test", "reviewer rev") == 1
    assert not await store.escalations.session_allowed("a1", "s1", "Bash:npm test")
    assert await store.escalations.session_allowed("a1", "s1", "Bash:ls")
