"""Conformance of ResultStore: files agents send out, and graded results (issue 28)."""

from __future__ import annotations

import pytest

from store import Store
from store.protocols import ResultStore
from tests.store.conftest import T0, FakeNow


@pytest.fixture
def results(store: Store) -> ResultStore:
    return store.results


async def test_a_file_round_trips_byte_for_byte_and_is_pruned_by_age(
        results: ResultStore, clock: FakeNow) -> None:
    content = bytes(range(256)) * 3
    await results.put_file("f1", "a1", "report.bin", content)
    clock.advance(100)
    await results.put_file("f2", "a1", "later.txt", b"x")
    got = await results.file("f1")
    assert got is not None and got.content == content and got.name == "report.bin"
    assert got.created_at == T0
    assert await results.file("nope") is None
    assert await results.prune_files(T0 + 50) == 1
    assert await results.file("f1") is None and await results.file("f2") is not None


async def test_recent_results_are_listed_lowest_confidence_first(
        results: ResultStore, clock: FakeNow) -> None:
    for i, grade in enumerate((90, 20, 55, 20)):
        clock.advance(1)
        row = await results.add(agent_id=f"a{i % 2}", agent_name=f"n{i % 2}",
                                summary=f"s{i}", confidence=grade, evidence=f"e{i}",
                                needs_review=grade < 50, turn_id=i)
        assert row.created_at == T0 + i + 1 and row.needs_review == (grade < 50)
    rows = await results.recent(10)
    assert [(r.summary, r.confidence) for r in rows] == [("s3", 20), ("s1", 20), ("s2", 55),
                                                          ("s0", 90)]
    assert [r.summary for r in await results.recent(2)] == ["s3", "s2"]  # the 2 newest
    assert [r.summary for r in await results.recent(10, agent_id="a0")] == ["s2", "s0"]
    latest = await results.latest("a1")
    assert latest is not None and latest.summary == "s3" and latest.evidence == "e3"
    assert await results.latest("none") is None


@pytest.mark.parametrize("grade", [-1, 101])
async def test_a_grade_outside_0_to_100_is_refused(results: ResultStore, grade: int) -> None:
    with pytest.raises(ValueError, match="between 0 and 100"):
        await results.add(agent_id="a", agent_name="n", summary="s", confidence=grade,
                          evidence="", needs_review=False)
    assert await results.recent() == []
