"""Operator attention: a scripted ten-agent day, with charters and without.

Run from the repository root:  .venv/bin/python bench/operator_attention.py

The same day runs twice, one after the other, each in a fresh Switchboard with ten agents on the
REAL bundled `claude` CLI against the mock Anthropic API:

* charter: the ten agents are standing agents (`/spawn ... --charter @file`);
* baseline: the same agents, prompts and policy, with no charter.

The day is 10 agents x 8 h = 80 agent-hours. Every agent is woken every 2 h (4 wakes, run back
to back: the clock is not simulated) through the wake path the scheduler calls
(`api.standing.wake`, a bus message with the slot as its dedup key); one wake is sent twice, as a
restarted scheduler would. In the charter run the agents' idle CLIs are parked between wakes, so
each wake resumes a session on a new CLI. Each wake is a script the mock plays step by step (a
tool call per step): three routine commands the policy allows (touch, ls, git status); at the
last wake a `git push` (and for half the agents an `rm -r` at the third), which the policy asks
about in both runs (as the default policy does); by a fixed pattern a command no rule decides
(`make check`, asked in both runs); and every other wake a question (AskUserQuestion): one the
charter decides, one it says to ask, or one it does not cover (3:1:1).

A simulated operator follows the outbox, answers every question and permission request at once
("Allow for session" where offered, which it never is for a standing agent's irreversible step,
else "Allow"; a question's first option) and counts what it was sent: a push is any row it gets
(questions, permission requests, notices such as "finished"). Figures, each with its goal and
its ratio to the baseline measured in the same run:

* pushes per agent-hour that need an answer, and all pushes per agent-hour;
* the share of tool calls settled without a push;
* duplicate or superseded pushes: the same request twice in one wake, reminders, and requests
  closed unanswered (cancelled, expired); goal 0;
* questions settled by the charter (sent back and not asked again) of all questions asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import quiet_logging, scratch_dir, wait_until  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from store.escalations import EscalationRow  # noqa: E402
from supervisor.config import Settings  # noqa: E402
from supervisor.escalations import Answer, Decision, Kind  # noqa: E402
from supervisor.sandbox import agent_ids  # noqa: E402
from tests.conftest import make_settings, run  # noqa: E402
from tests.fakes.mock_anthropic import MockAnthropic  # noqa: E402

AGENTS = 10
DAY_H = 8
WAKE_EVERY_H = 2
AGENT_HOURS = AGENTS * DAY_H
FRONTEND = "bench"
STEPS = "STEPS "
TURN_TIMEOUT_S = 120.0

CHARTER = """\
Goal: keep the {name} service healthy and its main branch green.
Authority:
- Fix flaky tests yourself; never skip a test to make it pass.
- Choose names, wording and formatting of changelogs and reports yourself.
- Retry a failing build once before you report it.
Needs approval:
- Pushing, merging or deploying anything.
What not to do:
- Do not touch the release scripts.
Escalate when: the same test fails three runs in a row.
"""
DECIDED = (
    "The flaky test failed again. Should I skip the test or fix it?",
    "Which wording and formatting should the changelog entry use?",
    "The build failed once. Should I retry the build or report it now?",
)
MUST_ASK = "The same test fails three runs in a row now. What should happen?"
OPEN = "Which customer should we contact about the outage?"
POLICY = """\
default = "ask"
[tools]
Read = "allow"
Glob = "allow"
Grep = "allow"
LS = "allow"
TodoWrite = "allow"
"mcp__switchboard__*" = "allow"
[[rules]]
tool = "Bash"
command = ["touch", "ls", "git status", "git add", "git commit"]
action = "allow"
reason = "routine for this fleet"
"""


def wake_script(agent: int, wake: int) -> list[dict[str, Any]]:
    """The tool calls of one wake, in order (a fixed pattern, the same in both runs)."""
    tag = f"{agent}-{wake}"
    steps: list[dict[str, Any]] = [
        {"tool": "Bash", "input": {"command": f"touch notes-{tag}.txt", "description": "note"}},
        {"tool": "Bash", "input": {"command": "ls", "description": "look"}},
        {"tool": "Bash", "input": {"command": "git status", "description": "status"}},
    ]
    if wake == DAY_H // WAKE_EVERY_H - 1:  # the day's work is pushed at its last wake
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
    """Plays the script of the last STEPS message in the conversation: the next step after as
    many tool results as have come back since, then a closing text. Counts what it serves."""

    def __init__(self) -> None:
        super().__init__()
        self.served: Counter[str] = Counter()
        self.on_request = self._play

    def _play(self, body: dict[str, Any]) -> dict[str, Any] | None:
        if not body.get("tools"):
            return None
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") != "user":
                continue
            script = next((t[t.index(STEPS) + len(STEPS):] for t in _user_texts(messages[i])
                           if STEPS in t), None)
            if script is None:
                continue
            steps = json.loads(script.split("\n</message>")[0].strip())
            done = sum(_tool_results(m) for m in messages[i + 1:])
            if done < len(steps):
                self.served[steps[done]["tool"]] += 1
                return dict(steps[done])
            return {"text": "done for now"}
        return None


@dataclass
class Day:
    label: str
    pushes: list[EscalationRow] = field(default_factory=list)
    asks_per_wake: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    wake: int = 0
    tool_calls: int = 0
    questions: int = 0
    send_backs: int = 0
    superseded: int = 0
    duplicate_wakes_stored: int = 0
    resumed: int = 0
    seconds: float = 0.0

    @property
    def asks(self) -> list[EscalationRow]:
        return [r for r in self.pushes if r.kind != Kind.NOTICE]

    @property
    def duplicates(self) -> int:
        reminders = sum(1 for r in self.pushes if r.title.startswith("Reminder:"))
        return sum(n - 1 for n in self.asks_per_wake.values() if n > 1) + reminders


async def operator(app: Switchboard, day: Day) -> None:
    """Follows the outbox; answers every question and request at once; counts every push."""
    assert app.pool is not None
    esc = app.pool.escalations
    async for row in esc.follow(FRONTEND):
        day.pushes.append(row)
        if row.kind != Kind.NOTICE:
            day.asks_per_wake[(row.agent_id or "", day.wake, row.body + (row.detail or ""))] += 1
        if row.status == "open" and row.kind == Kind.PERMISSION:
            # "Allow for session" where it is offered (never for an irreversible step).
            how = Decision.ALLOW_SESSION if "Allow for session" in row.options else Decision.ALLOW
            await esc.answer(row.id, Answer(how, "", "bench", "bench"))
        elif row.status == "open" and row.kind in (Kind.QUESTION, Kind.PLAN):
            text = row.options[0] if row.options else "go ahead"
            await esc.answer(row.id, Answer(Decision.ANSWER, text, "bench", "bench"))
        await esc.ack(row.id, FRONTEND)


def _quiet(app: Switchboard, names: list[str]) -> bool:
    assert app.pool is not None
    runners = [r for r in app.pool.runners() if r.name in names]
    return all(r.state == "idle" and not r.busy and not r.queued for r in runners)


async def run_day(home: Path, *, charters: bool) -> Day:
    day = Day("charter" if charters else "baseline")
    started = time.monotonic()
    policy = home / "policy.toml"
    policy.write_text(POLICY)
    with ScriptedMock() as mock:
        extra: dict[str, Any] = {"standing_idle_stop_s": 1.0, "watchdog_interval_s": 0.2} \
            if charters else {}
        settings = make_settings(home, mock, policy_file=policy, spawns_per_minute=1000,
                                 commands_per_minute=10_000, messages_per_minute=10_000,
                                 approval_reminder_s=3600.0, approval_timeout_s=7200.0, **extra)
        async with Switchboard(settings) as app:
            assert app.pool is not None and app.api is not None
            fe = asyncio.create_task(operator(app, day), name="bench-operator")
            try:
                names = await spawn_fleet(app, home, charters)
                for wake in range(DAY_H // WAKE_EVERY_H):
                    day.wake = wake
                    if charters:
                        await wait_parked(app, names)
                    await wake_all(app, names, wake, day)
                day.send_backs = len(await app.store.charters.sendbacks())
                day.superseded = sum(1 for r in await app.store.escalations.undelivered("none")
                                     if r.status in ("cancelled", "expired"))
            finally:
                fe.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fe
        day.tool_calls = sum(mock.served.values())
        day.questions = mock.served["AskUserQuestion"]
    day.seconds = time.monotonic() - started
    return day


async def spawn_fleet(app: Switchboard, home: Path, charters: bool) -> list[str]:
    names = [f"svc{i}" for i in range(AGENTS)]
    uid, gid = agent_ids(Settings(home=home))
    for name in names:
        cwd = home / "w" / name
        cwd.mkdir(parents=True)
        if uid is not None and gid is not None:
            os.chown(cwd, uid, gid)  # sandboxed agents run as this uid when we are root
        flag = ""
        if charters:
            f = home / f"{name}.charter.md"
            f.write_text(CHARTER.format(name=name))
            flag = f"--charter @{f} "
        reply = await run(app, f"/spawn {name} --cwd {cwd} {flag}TEXT: ready")
        if not reply.ok:
            raise RuntimeError(f"/spawn {name} failed: {reply.plain()}")
    await wait_until(lambda: _quiet(app, names), TURN_TIMEOUT_S, "the first turns",
                     interval=0.05)
    return names


async def wait_parked(app: Switchboard, names: list[str]) -> None:
    """The gap between wakes: every standing agent's idle CLI is parked."""
    assert app.pool is not None
    runners = [r for r in app.pool.runners() if r.name in names]
    await wait_until(lambda: all(r.process is None for r in runners), 60.0,
                     "the idle CLIs to be parked", interval=0.05)


async def wake_all(app: Switchboard, names: list[str], wake: int, day: Day) -> None:
    assert app.pool is not None and app.api is not None
    for i, name in enumerate(names):
        body = STEPS + json.dumps(wake_script(i, wake))
        slot = f"day1:{name}:{wake * WAKE_EVERY_H:02d}:00"
        if (await app.pool.get(name)).process is None:
            day.resumed += 1
        await app.api.standing.wake(name, body, by="scheduler", dedup_key=slot)
        if i == 0 and wake == 1:  # the same slot again, as a restarted scheduler would send
            again = await app.api.standing.wake(name, body, by="scheduler", dedup_key=slot)
            day.duplicate_wakes_stored += 0 if again.duplicate else 1
    runners = [await app.pool.get(n) for n in names]
    want = wake + 2  # the first turn, and one per wake so far

    async def all_done() -> bool:
        for r in runners:
            turns = await app.store.turns.recent(r.id, 20)
            if sum(1 for t in turns if t.status != "running") < want:
                return False
        return _quiet(app, names)

    deadline = time.monotonic() + TURN_TIMEOUT_S
    while not await all_done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"wake {wake} did not finish in {TURN_TIMEOUT_S:.0f}s")
        await asyncio.sleep(0.05)


def ratio(value: float, base: float) -> str:
    if base == 0:
        return "—" if value == 0 else "∞"
    return f"{value / base:.2f}x"


def report(charter: Day, base: Day) -> bool:
    def per_h(rows: list[Any]) -> float:
        return len(rows) / AGENT_HOURS

    def settled(d: Day) -> float:
        return 100.0 * (d.tool_calls - len(d.asks)) / d.tool_calls if d.tool_calls else 0.0

    def by_charter(d: Day) -> float:
        return 100.0 * d.send_backs / d.questions if d.questions else 0.0

    rows = [
        ("pushes needing an answer per agent-hour", per_h(charter.asks), per_h(base.asks),
         "<= 0.25", per_h(charter.asks) <= 0.25),
        ("all pushes per agent-hour (with notices)", per_h(charter.pushes), per_h(base.pushes),
         "<= 1.00", per_h(charter.pushes) <= 1.0),
        ("tool calls settled without a push, %", settled(charter), settled(base), ">= 90",
         settled(charter) >= 90),
        ("duplicate or superseded pushes", charter.duplicates + charter.superseded,
         base.duplicates + base.superseded, "0", charter.duplicates + charter.superseded == 0),
        ("questions settled by the charter, %", by_charter(charter), by_charter(base), ">= 50",
         by_charter(charter) >= 50),
    ]
    print(f"\n  {'figure':<44} {'charter':>9} {'baseline':>9} {'ratio':>7}  goal     met")
    for label, value, b, goal, met in rows:
        print(f"  {label:<44} {value:9.2f} {b:9.2f} {ratio(value, b):>7}  {goal:<8} "
              f"{'yes' if met else 'NO'}")
    for d in (charter, base):
        kinds = Counter(str(r.kind) for r in d.pushes)
        print(f"\n  {d.label}: {d.tool_calls} tool calls ({d.questions} questions), "
              f"{len(d.pushes)} pushes {dict(sorted(kinds.items()))}, {d.send_backs} sent back, "
              f"{d.resumed} wakes resumed a parked CLI, duplicate wake stored "
              f"{d.duplicate_wakes_stored}x, {d.seconds:.1f}s")
    same = charter.tool_calls == base.tool_calls and charter.questions == base.questions
    if not same:
        print("unexpected: the two runs did not play the same script")
    return same and charter.duplicate_wakes_stored == 0 and base.duplicate_wakes_stored == 0


async def main() -> int:
    quiet_logging()
    started = time.monotonic()
    print(f"operator attention, python {sys.version.split()[0]}, {os.cpu_count()} cpus: "
          f"{AGENTS} agents x {DAY_H} h = {AGENT_HOURS} agent-hours, a wake every "
          f"{WAKE_EVERY_H} h, the real CLI on the mock API", flush=True)
    with scratch_dir("sbo") as home:
        (home / "c").mkdir()
        (home / "b").mkdir()
        for d in (home / "c", home / "b"):
            (d / "t").mkdir()
        charter = await run_day(home / "c", charters=True)
        base = await run_day(home / "b", charters=False)
    ok = report(charter, base)
    print(f"done in {time.monotonic() - started:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
