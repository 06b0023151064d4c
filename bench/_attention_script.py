"""The scripted day of bench/operator_attention.py: its clock (Monday 7 Dec 2026, 08:00 to 16:00
Europe/Berlin, a wake every two hours), what each wake does (a fixed pattern of tool calls and
questions, the same in every run) and the mock model that plays it, with the reviewer's part."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tests.fakes.mock_anthropic import MockAnthropic

DAY_H = 8
WAKE_EVERY_H = 2
WAKES = DAY_H // WAKE_EVERY_H
TZ = "Europe/Berlin"
DAY_START = datetime(2026, 12, 7, 8, 0, tzinfo=ZoneInfo(TZ)).timestamp()  # a Monday
DAY_END = DAY_START + DAY_H * 3600
STEPS = "STEPS "
REASONING = "routine for this fleet, as my charter's Reviews section says"
MUST_ASK = "The same test fails three runs in a row now. What should happen?"
OPEN = "Which customer should we contact about the outage?"
DECIDED = (
    "The flaky test failed again. Should I skip the test or fix it?",
    "Which wording and formatting should the changelog entry use?",
    "The build failed once. Should I retry the build or report it now?",
)
_STEPS_RE = re.compile(r'written="([^"]+)"[^>]*>\s*' + STEPS + r"svc(\d+)\b")
_REVIEW_RE = re.compile(r"Review request (r[a-z0-9]+): \S+ (wants to use|asks)")


def wake_script(agent: int, wake: int) -> list[dict[str, Any]]:
    """The tool calls of one wake, in order (a fixed pattern, the same in both runs)."""
    tag = f"{agent}-{wake}"
    steps: list[dict[str, Any]] = [
        {"tool": "Bash", "input": {"command": f"touch notes-{tag}.txt", "description": "note"}},
        {"tool": "Bash", "input": {"command": "ls", "description": "look"}},
        {"tool": "Bash", "input": {"command": "git status", "description": "status"}},
    ]
    if wake == WAKES - 1:  # the day's work is pushed at its last wake
        steps.append({"tool": "Bash", "input": {"command": f"git push origin fix-{tag}",
                                                "description": "push"}})
    if agent % 2 == 0 and wake == 2:
        steps.append({"tool": "Bash", "input": {"command": f"rm -r scratch-{tag}",
                                                "description": "clean"}})
    if (3 * agent + wake) % 5 == 2:
        steps.append({"tool": "Bash", "input": {"command": "make check", "description": "check"}})
    if (agent + wake) % 2 == 0:
        n = (agent * 2 + wake // 2) % 5
        question = DECIDED[n] if n < 3 else (MUST_ASK if n == 3 else OPEN)
        steps.append({"tool": "AskUserQuestion", "input": {"questions": [{
            "question": question, "header": "Question", "multiSelect": False,
            "options": [{"label": "go ahead", "description": "yes"},
                        {"label": "hold", "description": "no"}]}]}})
    return steps


def closing_text(agent: int, wake: int) -> str:
    """How a wake's turn ends: all well in one line, or, for a quarter of them, a finding."""
    if (agent + wake) % 4 == 1:
        return (f"NOTIFY: svc{agent}: two tests are flaky on main; I fixed one, the other is "
                f"described in notes-{agent}-{wake}.txt")
    return "All well: nothing to report."


def wake_of(written: str) -> int:
    """Which wake of the day a scheduled message is, from its `written` stamp (UTC)."""
    at = datetime.strptime(written, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=ZoneInfo("UTC"))
    return round((at.timestamp() - DAY_START) / (WAKE_EVERY_H * 3600)) - 1


def _user_texts(msg: dict[str, Any]) -> list[str]:
    content = msg.get("content")
    if isinstance(content, str):
        return [content]
    return [str(b.get("text", "")) for b in content or []
            if isinstance(b, dict) and b.get("type") == "text"]


def _tool_results(msg: dict[str, Any]) -> int:
    content = msg.get("content")
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result") \
        if isinstance(content, list) else 0


class ScriptedMock(MockAnthropic):
    """Plays the script of the last scheduled message in the conversation: the next step after
    as many tool results as have come back since, then the closing text. Counts what it
    serves."""

    def __init__(self) -> None:
        super().__init__()
        self.served: Counter[str] = Counter()
        self.reviewed: Counter[str] = Counter()  # the reviewer's decisions (not the script's)
        self.on_request = self._play

    def _play(self, body: dict[str, Any]) -> dict[str, Any] | None:
        if not body.get("tools"):
            return None
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        decision = self._review(messages)
        if decision is not None:
            return decision
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") != "user":
                continue
            found = next((m for t in _user_texts(messages[i]) for m in [_STEPS_RE.search(t)]
                          if m), None)
            if found is None:
                continue
            agent, wake = int(found.group(2)), wake_of(found.group(1))
            steps = wake_script(agent, wake)
            done = sum(_tool_results(m) for m in messages[i + 1:])
            if done < len(steps):
                self.served[steps[done]["tool"]] += 1
                return dict(steps[done])
            return {"text": closing_text(agent, wake)}
        return None

    def _review(self, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The reviewer: the review requests of its latest turn, decided one per step as
        its charter says (a call allowed, a question answered with its first option)."""
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") != "user" or not _user_texts(messages[i]):
                continue
            asked = [m for t in _user_texts(messages[i]) for m in _REVIEW_RE.finditer(t)]
            if not asked:
                return None
            done = sum(_tool_results(m) for m in messages[i + 1:])
            if done >= len(asked):
                return {"text": "Reviewed."}
            review_id, what = asked[done].group(1), asked[done].group(2)
            decision = {"review_id": review_id, "decision": "allow", "reasoning": REASONING}
            if what == "asks":
                decision.update(decision="answer", answer="go ahead")
            self.reviewed[str(decision["decision"])] += 1
            return {"tool": "mcp__switchboard__review_decision", "input": decision}
        return None
