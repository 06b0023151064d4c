"""The record from chat (issue 27): /audit by operator or agent and time span, /search in plain
words over bus messages, turns' prompts and results, and audit rows; each match a short line,
the whole text as a file. A real Switchboard and its SQLite store, the fake claude CLI, the
real front desk on a fake chat."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.integration.test_guards_once import ALICE, desk_with, idle_agent  # noqa: F401
from tests.integration.test_kit import add_staff, dm, says

pytestmark = pytest.mark.timeout(90)
BOB = type(ALICE)("200", "bob")  # test_kit's operator


def last(chat, who=ALICE) -> str:
    """The newest message that is not an agent's notice (they arrive in their own time)."""
    return [t for t in chat.texts(dm(who)) if not t.startswith("ℹ️")][-1]


async def finished(chat, turns: int) -> None:
    await wait_for(lambda: len([t for t in chat.texts(dm(ALICE)) if "dev finished" in t])
                   >= turns, 20, f"{turns} turns of dev finished")


async def test_audit_by_operator_agent_and_span(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await add_staff(app)
        await idle_agent(app, desk, chat, "dev")
        await idle_agent(app, desk, chat, "devops")
        await says(desk, BOB, "/ask dev run the flaky login test")
        await finished(chat, 2)
        await says(desk, ALICE, "/pause devops")
        await says(desk, ALICE, "/audit dev")
        text = last(chat)
        assert "action(s) of or about dev in the last 7 day(s)" in text, text
        assert "bob (fake) ✓ /ask dev run the flaky login test" in text
        assert "alice (fake) ✓ /spawn dev hello" in text and "devops" not in text
        await says(desk, ALICE, "/audit bob")
        assert "/ask dev" in last(chat) and "/spawn" not in last(chat)
        await says(desk, ALICE, "/audit 12h")
        assert "in the last 12 hour(s)" in last(chat) and "/pause devops" in last(chat)
        await says(desk, ALICE, "/audit nobody")
        assert last(chat) == "No operator actions of or about nobody in the last 7 day(s)."
        await says(desk, ALICE, "/audit dev soon")
        assert "'soon' is not a time span: use 30m, 12h, 3d or 2w" in last(chat)
        vic = type(ALICE)("300", "vic")  # a viewer
        await says(desk, vic, "/audit")
        assert "operator" in last(chat, vic) and "action(s)" not in last(chat, vic)


async def test_search_finds_turns_messages_and_audit_rows_with_the_whole_text(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        await says(desk, ALICE, "/ask dev the STAGING login fails after deploy " + "z" * 300)
        await finished(chat, 2)
        await says(desk, ALICE, "/search staging login")
        shown = chat.sent(dm(ALICE))
        reply = next(m.text for m in reversed(shown) if "match(es)" in m.text)
        assert "for 'staging login' in the last 7 day(s), newest first" in reply, reply
        assert "3 match(es)" in reply, reply
        assert "turn 2 · dev: Prompt: the STAGING login fails" in reply  # the turn
        assert "message 2 · operator → dev: the STAGING login fails" in reply  # on the bus
        assert "audit 2 · alice (fake): /ask dev the STAGING login fails" in reply
        assert "z" * 200 not in reply  # a short line each
        files = [m.document for m in shown if m.document is not None]
        whole = files[-1].content.decode()
        assert files[-1].filename == "search.txt" and whole.count("z" * 300) == 4
        await says(desk, ALICE, "/search nothing-like-this")
        assert "Nothing holds 'nothing-like-this' in the last 7 day(s)." in last(chat)
        await says(desk, ALICE, "/search 30d")
        assert "give the words to look for after the span" in last(chat)
        await says(desk, ALICE, "/search a")
        assert "at least 2 characters" in last(chat)
        await says(desk, ALICE, "/search 2w staging")
        assert "3 match(es) for 'staging' in the last 14 day(s)" in last(chat)
