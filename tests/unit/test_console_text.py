"""The console's pure text (bot/console/text.py, render.py, terminal.complete): timestamps,
relative times, the status line and toolbar, colour, completion, and each answer printed once
and whole."""

from __future__ import annotations

import time

from bot.console.render import ANSWER_SHOWN_CHARS, TOOL_SHOWN_CHARS, Answers, render_escalation
from bot.console.terminal import complete
from bot.console.text import (
    STAMP_WIDTH,
    Halt,
    Waiting,
    Working,
    clock,
    paint,
    stamped,
    status_line,
    toolbar_lines,
)
from commands.render import span
from store.escalations import EscalationRow
from supervisor.events import AgentOutput, AgentState, StateChanged

T0 = time.mktime((2026, 12, 6, 14, 2, 11, 0, 0, -1))  # local 14:02:11


def notice(body: str, agent_id: str = "a1", *, created_at: float = T0) -> EscalationRow:
    return EscalationRow(
        seq=1, id="n1", agent_id=agent_id, kind="notice", title="fixer finished", body=body,
        tool_name=None, tool_input=None, options=(), free_text=False, ref_id=None,
        status="open", answer=None, answered_by=None, answered_via=None, answered_at=None,
        created_at=created_at)


def test_spans_read_as_a_person_says_them():
    assert [span(s) for s in (-3, 0, 59.9, 60, 185, 3599, 3600, 7440, 86400, 90000)] == [
        "0s", "0s", "59s", "1m00s", "3m05s", "59m59s", "1h00m", "2h04m", "1d00h", "1d01h"]


def test_every_entry_has_a_timestamp_and_its_other_lines_sit_under_it():
    assert clock(T0) == "14:02:11"
    text = stamped("first\nsecond\n\nfourth", T0)
    assert text == ("14:02:11 first\n" + " " * STAMP_WIDTH + "second\n" + " " * STAMP_WIDTH
                    + "\n" + " " * STAMP_WIDTH + "fourth")


def test_colour_only_when_asked_and_the_stamp_dim():
    line = stamped("error: no such agent", T0)
    assert paint(line, "error", colour=False) == line
    painted = paint(line, "error", colour=True)
    assert painted == "\x1b[2m14:02:11 \x1b[0m\x1b[31merror: no such agent\x1b[0m"
    assert paint(line, "reply", colour=True) == "\x1b[2m14:02:11 \x1b[0merror: no such agent"


def test_the_status_line_moves_with_the_clock():
    w = Working("fixer", "working", since=T0, tool="Bash: pytest -q\n  --maxfail=1",
                tool_since=T0 + 50)
    assert status_line(w, T0 + 65) == "fixer · working 1m05s · ⚙ Bash: pytest -q --maxfail=1 (15s)"
    assert status_line(w, T0 + 125).endswith(
        "working 2m05s · ⚙ Bash: pytest -q --maxfail=1 (1m15s)")
    long_tool = Working("x", "working", since=None, tool="Read: " + "y" * 200)
    line = status_line(long_tool, T0)
    assert line.startswith("x · working · ⚙ Read: yyy") and line.endswith("…")
    assert len(line) < 80


def test_the_toolbar_shows_the_kill_switch_first_then_what_waits_then_who_works():
    waiting = [Waiting("k8pd", "fixer wants to use Bash", T0 - 190),
               Waiting("aaaa", "old question", T0 - 4000)]
    working = [Working(f"a{i}", "working", T0 - i) for i in range(8)]
    lines = toolbar_lines(working, waiting, Halt("root", "console", T0 - 30), T0)
    assert lines[0] == ("🛑 KILL SWITCH ON for 30s (by root via console): agents are refused; "
                        "/killswitch off confirm")
    assert lines[1] == ("❓ 2 waiting for you: aaaa old question (1h06m ago), k8pd fixer wants "
                        "to use Bash (3m10s ago) · /pending")
    assert lines[2:8] == [f"a{i} · working {i}s" for i in range(6)]
    assert lines[8] == "… and 2 more working · /agents"
    later = toolbar_lines([], waiting[:1], None, T0 + 60)
    assert later == ["❓ 1 waiting for you: k8pd fixer wants to use Bash (4m10s ago) · /pending"]
    assert "no agent working" in toolbar_lines([], [], None, T0)[0]


def test_completion_of_commands_then_agent_names():
    commands = ["agents", "ask", "kill", "killall", "status"]
    agents = ["fixer", "f00bar", "reviewer"]
    assert complete("/a", commands, agents) == ["/agents", "/ask"]
    assert complete("/kil", commands, agents) == ["/kill", "/killall"]
    assert complete("", commands, agents)[0] == "/agents"
    assert complete("/ask f", commands, agents) == ["fixer", "f00bar"]
    assert complete("/ask fixer do", commands, agents) == []
    assert complete("hello f", commands, agents) == []


def test_an_answer_is_printed_once_whichever_copy_comes_first():
    answer = "The failure is in test_parse_dates.\n" * 3
    live = AgentOutput("a1", "fixer", "text", answer)
    first = Answers()
    assert first.event(live).text == "[fixer] " + answer
    short = first.escalation(notice(answer))
    assert "its answer is above" in short.text and answer not in short.text
    # The notice first (the outbox can be quicker than the event stream): the live copy points.
    said = "The failure is in test_parse_dates."
    second = Answers()
    assert second.escalation(notice(answer)).text.count(said) == 3
    assert second.event(live).text == "[fixer] (its answer is the notice above, 108 characters)"
    # Another agent's notice, or a notice after a restart (nothing seen live), is whole.
    assert first.escalation(notice(answer, "a2")).text.count(said) == 3


def test_answers_are_whole_and_a_huge_one_says_where_the_rest_is():
    answers = Answers()
    big = "x" * 200_000
    assert answers.event(AgentOutput("a1", "fixer", "text", big)).text == "[fixer] " + big
    huge = "y" * (ANSWER_SHOWN_CHARS + 10)
    line = answers.event(AgentOutput("a1", "fixer", "text", huge)).text
    assert "10 more characters not shown: the agent's session transcript" in line
    tool = answers.event(AgentOutput("a1", "fixer", "tool_result", "z" * 5000)).text
    assert f"{5000 - TOOL_SHOWN_CHARS:,} more characters not shown: /logs fixer" in tool
    state = answers.event(StateChanged("a1", "fixer", AgentState.IDLE, AgentState.WORKING, ""))
    assert state.text == "[fixer] idle → working" and state.kind == "state"


def test_a_printed_escalation_says_when_it_was_asked_not_how_long_ago():
    row = EscalationRow(
        seq=1, id="ab3k", agent_id="a1", kind="permission", title="w wants to use Bash",
        body="Why asked: Bash: no rule decides it", tool_name="Bash",
        tool_input={"command": "ls"}, options=(), free_text=False, ref_id=None,
        status="open", answer=None, answered_by=None, answered_via=None, answered_at=None,
        created_at=T0)
    out = render_escalation(row)
    assert out.startswith("🔐 ab3k · w wants to use Bash · asked at 14:02:11\n")
    assert " ago" not in out
    assert render_escalation(notice("done")).startswith("ℹ️ n1 · fixer finished · at 14:02:11")


def test_a_pasted_line_is_shown_folded_and_the_cursor_maps_both_ways():
    from prompt_toolkit.document import Document
    from prompt_toolkit.layout.processors import TransformationInput

    from bot.console.terminal import FOLD_CHARS, FOLD_KEEP, FoldLongLines

    short = "/ask fixer " + "s" * 100
    line = "/ask fixer " + "".join(f"{i:09d}," for i in range(100_000))

    def fold(text: str):
        ti = TransformationInput(None, Document(text), 0, lambda i: i, [("", text)], 100, 30)
        return FoldLongLines().apply_transformation(ti)

    assert fold(short).fragments == [("", short)]
    t = fold(line)
    [(_, shown)] = t.fragments
    left_out = len(line) - 2 * FOLD_KEEP
    assert shown == (line[:FOLD_KEEP] + f" …[{left_out:,} more characters]… "
                     + line[-FOLD_KEEP:])
    assert len(shown) < FOLD_CHARS
    # The cursor: at the start, at the end, and anywhere in the part left out (at the fold).
    assert t.source_to_display(0) == 0 and t.source_to_display(len(line)) == len(shown)
    assert t.source_to_display(len(line) // 2) == FOLD_KEEP
    assert t.display_to_source(len(shown)) == len(line)
    assert t.display_to_source(len(shown) - 5) == len(line) - 5
    assert t.display_to_source(FOLD_KEEP + 3) == FOLD_KEEP
