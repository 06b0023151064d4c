"""Charters of standing agents: which lines a question touches, what goes back to the agent,
at most once per question, and what the runner puts into the system prompt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import Store, open_store
from supervisor.errors import InvalidRequest
from supervisor.guard.charter import (
    SEND_BACK_PREFIX,
    judge,
    parse,
    question_key,
    relevant,
    send_back_text,
    system_prompt,
)
from supervisor.guard.sendback import send_back
from supervisor.schedule.standing import charter_text

CHARTER = """\
Goal: keep the main branch green.
Authority:
- Fix flaky tests yourself; never skip or delete a test to make it pass.
- Pick the smallest fix; prefer reverting your own change over a workaround.
Needs approval:
- Pushing, merging or deploying anything.
What not to do:
- Do not touch the release scripts.
Escalate when: the same test fails three nights in a row.
"""


def test_lines_are_read_with_their_section_or_label():
    lines = {ln.text: ln.section for ln in parse(CHARTER)}
    assert lines["Goal: keep the main branch green."] == "goal"
    assert lines["- Fix flaky tests yourself; never skip or delete a test to make it pass."] \
        == "authority"
    assert lines["- Pushing, merging or deploying anything."] == "needs approval"
    assert lines["Escalate when: the same test fails three nights in a row."] == "escalate when"


def test_a_question_the_charter_decides_is_sent_back_with_its_lines():
    verdict = judge("The flaky test in test_api fails again. Should I skip it or fix it?",
                    CHARTER)
    assert verdict.send_back
    assert verdict.lines[0].startswith("- Fix flaky tests yourself")
    text = send_back_text(verdict.lines)
    assert SEND_BACK_PREFIX in text and "Fix flaky tests yourself" in text


def test_a_question_about_what_needs_approval_reaches_the_operator():
    verdict = judge("Tests pass now. May I push the fix to main?", CHARTER)
    assert not verdict.send_back and "irreversible step (push)" in verdict.why
    night = judge("Should I tell someone? The same test fails three nights in a row.", CHARTER)
    assert not night.send_back and "the charter says to ask" in night.why
    assert night.lines == ("Escalate when: the same test fails three nights in a row.",)


def test_a_question_no_line_covers_reaches_the_operator():
    verdict = judge("Which colour should the new logo be?", CHARTER)
    assert (verdict.send_back, verdict.lines) == (False, ())


def test_overlap_needs_two_words_and_ranks_by_shared_words():
    assert relevant("branch?", CHARTER)[0].text.startswith("Goal:")  # one word: one is enough
    assert relevant("what about the weather today", CHARTER) == ()
    ranked = relevant("fix the flaky tests, or skip the test?", CHARTER)
    assert ranked[0].text.startswith("- Fix flaky tests")


def test_the_same_question_has_one_key_however_written():
    assert question_key("Should I  skip it?") == question_key("should i skip it?")
    assert question_key("Should I skip it?") != question_key("Should I fix it?")


def test_the_charter_is_in_the_system_prompt_with_the_rules_of_a_standing_agent():
    text = system_prompt(CHARTER)
    assert CHARTER.strip() in text and "<charter>" in text
    assert "never that approval" in text and "irreversible" in text


def test_charter_text_reads_a_file_and_refuses_what_it_cannot_use(tmp_path: Path):
    f = tmp_path / "charter.md"
    f.write_text(CHARTER)
    assert charter_text(f"@{f}") == CHARTER.strip()
    assert charter_text("  Goal: x  ") == "Goal: x"
    with pytest.raises(InvalidRequest, match="cannot read"):
        charter_text(f"@{tmp_path / 'missing.md'}")
    with pytest.raises(InvalidRequest, match="empty"):
        charter_text("   ")
    with pytest.raises(InvalidRequest, match="limit"):
        charter_text("x" * 20_001)


@pytest.fixture
async def nightly_store(migrated_db: Path, tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated store with one agent, a1 ("nightly")."""
    db = tmp_path / "db.sqlite"
    db.write_bytes(migrated_db.read_bytes())
    store = await open_store(db)
    try:
        await store.agents.create(id="a1", name="nightly", parent_id=None, model=None,
                                  cwd="/tmp", prompt="p", permission_mode="default",
                                  state="idle")
        yield store
    finally:
        await store.db.close()


async def test_a_question_is_sent_back_once_then_reaches_the_operator(nightly_store: Store):
    store = nightly_store
    q = "Should I skip the flaky test or fix it?"
    first = await send_back(store, 100.0, "a1", CHARTER, q)
    assert first is not None and SEND_BACK_PREFIX in first
    assert await send_back(store, 101.0, "a1", CHARTER, "should I skip the flaky test "
                                                           "or fix it?") is None
    assert await send_back(store, 102.0, "a1", CHARTER, "May I push the fix?") is None
    assert await send_back(store, 103.0, "a1", None, q) is None  # not standing
    rows = await store.charters.sendbacks("a1")
    assert [(r.question, r.at) for r in rows] == [(q, 100.0)]
    events = await store.events.tail("a1", 10)
    assert [e.kind for e in events] == ["charter_send_back"]


async def test_once_means_once_per_turn(nightly_store: Store):
    """A later turn (another wake) meeting the same question is sent back again; within one
    turn the second ask reaches the operator."""
    store = nightly_store
    q = "Should I skip the flaky test or fix it?"
    assert await send_back(store, 1.0, "a1", CHARTER, q, "turn 1") is not None
    assert await send_back(store, 2.0, "a1", CHARTER, q, "turn 1") is None
    assert await send_back(store, 3.0, "a1", CHARTER, q, "turn 2") is not None
    assert await send_back(store, 4.0, "a1", CHARTER, q, "turn 2") is None
