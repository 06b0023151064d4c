"""Recommended answers (issue 27): an agent's question can carry the answer it recommends and
why; the card shows it first, so one tap accepts it. Through the ask_operator tool (the fake CLI
calls the supervisor's in-process MCP server as the real CLI does) and AskUserQuestion's own
"(Recommended)" label; a real Switchboard, the real front desk on a fake chat."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_for
from tests.integration.test_guards_once import ALICE, desk_with, idle_agent, last  # noqa: F401
from tests.integration.test_kit import dm, says, taps

pytestmark = pytest.mark.timeout(60)


async def question(app):
    rows: list = []

    async def opened() -> bool:
        rows[:] = await app.api.pending()
        return bool(rows)

    await wait_for(opened, 20, "the question")
    return rows[0]


async def card(chat, esc_id):
    """The question's card, once the front desk has shown it."""
    def shown():
        return [m for m in chat.sent(dm(ALICE)) if esc_id in m.text and m.buttons]

    await wait_for(shown, 20, f"the card of {esc_id}")
    return shown()[-1]


async def test_the_recommended_answer_is_first_and_one_tap_accepts_it(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        ask = {"question": "The flaky test failed again. Skip it or fix it?",
               "options": ["Skip it", "Fix it", "Ask QA"], "recommended": "fix it",
               "why": "it failed 3 of the last 5 runs; skipping hides a real race"}
        await says(desk, ALICE, f"/ask dev MCP ask_operator {json.dumps(ask)}")
        row = await question(app)
        assert row.options == ("Fix it", "Skip it", "Ask QA")
        assert row.body.startswith("★ Recommended: Fix it (the first button): it failed 3 of "
                                   "the last 5 runs; skipping hides a real race\n\nThe flaky")
        shown = await card(chat, row.id)
        assert "★ Recommended: Fix it" in shown.text
        label, action = shown.buttons[0][0]
        assert label == "Fix it"
        await taps(desk, ALICE, shown, action)
        await wait_for(lambda: any("MCP RESULT: The operator answered: Fix it" in t
                                   for t in chat.texts(dm(ALICE))), 20, "the agent's answer")


async def test_askuserquestions_own_recommended_label_goes_first(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        call = {"questions": [{"question": "Which database?", "header": "DB",
                               "multiSelect": False,
                               "options": [{"label": "SQLite", "description": "one file"},
                                           {"label": "PostgreSQL (Recommended)",
                                            "description": "several hosts"}]}]}
        await says(desk, ALICE, f"/ask dev ASKTOOL AskUserQuestion {json.dumps(call)}")
        row = await question(app)
        assert row.options == ("PostgreSQL (Recommended)", "SQLite")
        assert row.body.startswith("★ Recommended: PostgreSQL (the first button)\n\n"
                                   "Which database?")
        await says(desk, ALICE, f"/answer {row.id} 1")
        await wait_for(lambda: any("TOOL ALLOWED" in t for t in chat.texts(dm(ALICE))), 20,
                       "the answer reaching the CLI")


async def test_a_question_without_a_recommendation_is_unchanged(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        ask = {"question": "Which branch?", "options": ["main", "dev"]}
        await says(desk, ALICE, f"/ask dev MCP ask_operator {json.dumps(ask)}")
        row = await question(app)
        assert row.options == ("main", "dev") and row.body == "Which branch?"
        await says(desk, ALICE, f"/answer {row.id} 2")


async def test_pending_answers_several_requests_of_one_agent_and_tool_at_once(desk_with):  # noqa: F811
    """Issue 27: "approve all three of dev's Bash requests" is one tap from /pending."""
    from supervisor.guard.escalations import Kind
    from supervisor.guard.gate import PERMISSION_OPTIONS

    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        r = await app.pool.fleet.get("dev")
        for tool, what in [("Bash", "make a"), ("Bash", "make b"), ("Write", "/w/x"),
                           ("Bash", "make c")]:
            await app.pool.escalations.open(
                agent_id=r.id, kind=Kind.PERMISSION, title=f"dev wants to use {tool}",
                body="Why asked: no rule decides it", tool_name=tool, tool_input={"x": what},
                options=PERMISSION_OPTIONS, detail=what)
        await says(desk, ALICE, "/pending")
        listing = next(m for m in reversed(chat.sent(dm(ALICE))) if "4 waiting" in m.text)
        labels = [label for row in listing.buttons for label, _ in row]
        assert labels[0] == "✅ All 3 of dev's Bash" and "All 1" not in " ".join(labels)
        await taps(desk, ALICE, listing, listing.buttons[0][0][1])
        assert any(t.startswith("Approved 3 Bash request(s) of dev: ")
                   for t in chat.texts(dm(ALICE)))
        left = await app.api.pending()
        assert [row.tool_name for row in left] == ["Write"]
        await says(desk, ALICE, "/approve all dev Bash Write")
        assert "expected a tool name and/or 'session'" in last(chat)
        await says(desk, ALICE, "/approve all dev Bash session")
        assert "dev has no open Bash permission requests." in chat.texts(dm(ALICE))
