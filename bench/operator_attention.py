"""Operator attention: a scripted ten-agent day on real schedules, with charters and without.

Run from the repository root:  .venv/bin/python bench/operator_attention.py

The same day runs three times, one after the other, each in a fresh Switchboard with ten agents
on the REAL bundled `claude` CLI against the mock Anthropic API, the whole Switchboard on one
injected clock (supervisor/clock.py `FakeClock`), so the 8-hour day passes in about a minute:

* reviewer (the figures): the ten agents are standing agents (`/spawn ... --charter @file`),
  and an eleventh, `rev`, is a reviewer agent (docs/reviewers.md): its charter's Reviews section
  covers `make check` and two of the questions the workers' charters leave to the operator;
* charter: the same ten standing agents without the reviewer;
* baseline: the same agents, schedules, prompts and policy, with no charter.

The day is Monday 7 Dec 2026, 08:00 to 16:00 Europe/Berlin: 10 agents x 8 h = 80 agent-hours.
At 08:00 the operator spawns the agents and gives each a schedule in plain words, as from chat:
`/cron add every 2 hours svcN ...` (`0 */2 * * *`), then `/cron confirm`; so each agent is woken
at 10, 12, 14 and 16 by the scheduler, through the bus, with the scheduler's default notify
policy (the operator hears of a run only if it failed or reported a finding). The day then
passes in steps of STEP_S (60 s): each step moves the clock, lets every loop on it do its pass
(the watchdog: session TTLs, parking idle standing agents after `standing_idle_stop_s`;
escalation timers; the bus), then runs the scheduler's tick once (its run-once mode; its own
loop is stopped) and a second scheduler's, on its own connection to the same database, as a
replica would, and waits until every run they started has ended. The clock stands still while
agents work. Production settings otherwise (tick 15 s, session TTL 4 h, parking after 15 min,
reminders and timeouts); stepping by the 15 s tick gives the same figures, in twice the time.

Each wake is a script the mock plays step by step (a tool call per step), chosen by the agent's
name in the schedule's prompt and the slot in the message's `written` stamp: three routine
commands the policy allows (touch, ls, git status); at the last wake a `git push` (and for half
the agents an `rm -r` at the third), which the policy asks about in both runs (as the default
policy does); by a fixed pattern a command no rule decides (`make check`, asked in both runs);
every other wake a question (AskUserQuestion): one the charter decides, one it says to ask, or
one it does not cover (3:1:1); and a quarter of the wakes end with a finding (`NOTIFY: ...`).

The reviewer's model plays its charter: each review request it is sent is decided at once with
`review_decision` (a call allowed, a question answered with its first option); those calls are
the reviewer's, not the script's, and are not counted as the day's tool calls. The agent-hours
are the ten workers' (80): the reviewer's eight hours are not counted, which would lower every
rate.

A simulated operator follows the outbox, answers every question and permission request at once
as a real one would with one tap on its card: "♾ Always allow" when a rule is offered (after
three identical approvals: this day never offers one, since no agent repeats an approvable call
three times), else "Allow for session" where offered (never for a standing agent's irreversible
step), else "Allow"; a question's first option (the recommended one, when there is one). It
counts what it was sent: a push is any row it gets (questions, permission requests, notices such
as "finished", a run's finding, a TTL warning, a reviewer's decision). Figures, each with its
ratio to the baseline measured in the same run; the goals are issue 27's, for the ten-agent day:

* pushes per agent-hour that need an answer (goal <= 0.25), and all pushes per agent-hour;
* the share of tool calls settled without a push (goal >= 90%);
* duplicate or superseded pushes: the same request twice in one wake, reminders, requests
  closed unanswered (cancelled, expired), and a slot delivered to its agent twice; goal 0;
* the share of pushes needing an answer that one button answers (goal 100%);
* questions settled by the charter (sent back and not asked again) of all questions asked.

Under BENCH_SMOKE=1 (make bench-smoke) the day has three agents and 4-minute steps; its attention
figures are printed without a verdict (the goals are the ten-agent day's), the duplicates' and
the one tap's still hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._attention_script import (  # noqa: E402
    DAY_END,
    DAY_H,
    DAY_START,
    STEPS,
    TZ,
    WAKE_EVERY_H,
    WAKES,
    ScriptedMock,
)
from bench._common import quiet_logging, result, scratch_dir, smoke  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from bot.kit.digest import Gatherer  # noqa: E402
from commands.base import Caller, Role  # noqa: E402
from store import open_store  # noqa: E402
from store.escalations import EscalationRow  # noqa: E402
from supervisor.clock import FakeClock  # noqa: E402
from supervisor.config import Settings  # noqa: E402
from supervisor.guard.escalations import Answer, Decision, Kind  # noqa: E402
from supervisor.guard.learned import ALWAYS  # noqa: E402
from supervisor.process.sandbox import agent_ids  # noqa: E402
from supervisor.schedule.scheduler import PoolTargets, Scheduler  # noqa: E402
from tests.conftest import make_settings, run  # noqa: E402

SUITE = {"timeout_s": 400}
AGENTS = 3 if smoke() else 10
AGENT_HOURS = AGENTS * DAY_H
FRONTEND = "bench"
TURN_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 30.0
STEP_S = 240.0 if smoke() else 60.0  # the clock's step (the scheduler ticks every 15 s)
DIGEST_S = Settings.model_fields["notice_digest_s"].default  # Telegram's notice digest

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
REVIEWER = "rev"
REVIEWER_CHARTER = """\
Goal: settle the fleet's routine requests, so the operator is asked only what needs them.
Reviews:
- Bash make check, make test and make lint in an agent's own workspace
- a test that fails three runs in a row: quarantine the test and open an issue
- which customer to contact about an outage: the account owner on the on-call sheet
Escalate:
- anything about credentials, secrets or money
"""
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
OPERATOR = Caller("bench:1", "bench", Role.ADMIN, "bench")


@dataclass
class Day:
    label: str
    pushes: list[EscalationRow] = field(default_factory=list)
    asks_per_wake: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    wake: int = -1  # the slot the day is at (-1: the morning's set-up)
    tool_calls: int = 0
    questions: int = 0
    send_backs: int = 0
    superseded: int = 0
    runs: Counter[str] = field(default_factory=Counter)  # the schedules' slots by outcome
    by_replica: int = 0  # slots the second scheduler claimed
    twice_delivered: int = 0  # scheduled messages an agent got more than once per slot
    resumed: int = 0  # wakes that started a CLI (parked or stopped agent)
    one_tap: int = 0  # pushes needing an answer that the operator answered with one button
    # What the phone shows: rows, with routine notices gathered as the Telegram front end does
    # (bot/kit/digest.py, the default notice_digest_s) on the day's clock.
    messages: int = 0
    gatherer: Gatherer = field(default_factory=lambda: Gatherer(DIGEST_S))
    rules_taken: int = 0  # "Always allow" rules the operator took when offered
    reviewed: Counter[str] = field(default_factory=Counter)  # the reviewer's decisions
    steps: int = 0
    seconds: float = 0.0

    @property
    def asks(self) -> list[EscalationRow]:
        return [r for r in self.pushes if r.kind != Kind.NOTICE]

    @property
    def duplicates(self) -> int:
        reminders = sum(1 for r in self.pushes if r.title.startswith("Reminder:"))
        return (sum(n - 1 for n in self.asks_per_wake.values() if n > 1) + reminders
                + self.superseded + self.twice_delivered)


async def operator(app: Switchboard, day: Day, clock: FakeClock) -> None:
    """Follows the outbox; answers every question and request at once; counts every push."""
    assert app.pool is not None
    esc = app.pool.escalations
    async for row in esc.follow(FRONTEND):
        day.pushes.append(row)
        day.messages += day.gatherer.offer(row, clock.monotonic())
        if row.kind != Kind.NOTICE:
            day.asks_per_wake[(row.agent_id or "", day.wake, row.body + (row.detail or ""))] += 1
        if row.status == "open" and row.kind == Kind.PERMISSION and ALWAYS in row.options:
            # A rule offered after three identical approvals: one tap takes it for good.
            assert app.api is not None
            await app.api.approve(row.id, by=OPERATOR, always=True)
            day.rules_taken += 1
            day.one_tap += 1
        elif row.status == "open" and row.kind == Kind.PERMISSION:
            # "Allow for session" where it is offered (never for an irreversible step).
            label = "Allow for session" if "Allow for session" in row.options else "Allow"
            how = Decision.ALLOW_SESSION if label == "Allow for session" else Decision.ALLOW
            await esc.answer(row.id, Answer(how, "", "bench", "bench"))
            day.one_tap += label in row.options  # its card's button
        elif row.status == "open" and row.kind in (Kind.QUESTION, Kind.PLAN):
            text = row.options[0] if row.options else "go ahead"  # a recommendation is first
            await esc.answer(row.id, Answer(Decision.ANSWER, text, "bench", "bench"))
            day.one_tap += bool(row.options)
        await esc.ack(row.id, FRONTEND)


def _quiet(app: Switchboard, names: list[str]) -> bool:
    assert app.pool is not None
    runners = [r for r in app.pool.fleet.everyone() if r.name in names]
    return all(r.state in ("idle", "stopped") and not r.busy and not r.queued for r in runners)


async def run_day(home: Path, *, charters: bool, reviewer: bool = False) -> Day:
    day = Day("reviewer" if reviewer else "charter" if charters else "baseline")
    started = time.monotonic()
    policy = home / "policy.toml"
    policy.write_text(POLICY)
    clock = FakeClock(start=DAY_START)
    with ScriptedMock() as mock:
        settings = make_settings(home, mock, policy_file=policy, timezone=TZ,
                                 spawns_per_minute=1000, commands_per_minute=10_000,
                                 messages_per_minute=10_000)
        async with Switchboard(settings, clock) as app:
            assert app.pool is not None and app.api is not None and app.store is not None
            await app.api.schedules.stop()  # the day drives the tick itself (run-once mode)
            replica_store = await open_store(settings.db_path)
            replica = Scheduler(replica_store, PoolTargets(app.pool, app.core.standing),
                                notify=lambda a, t, b: app.pool.escalations.notify(a, t, b),
                                clock=clock, tick_s=settings.schedule_tick_s,
                                grace_s=settings.schedule_grace_s)
            fe = asyncio.create_task(operator(app, day, clock), name="bench-operator")
            try:
                names = await spawn_fleet(app, home, charters, reviewer)
                sids = await make_schedules(app, names)
                await pass_the_day(app, clock, replica, names, day)
                await count_runs(app, sids, names, replica.holder, day)
                day.messages += bool(day.gatherer.due(float("inf")))  # the day's last digest
                day.send_backs = len(await app.store.charters.sendbacks())
                day.superseded = sum(1 for r in await app.store.escalations.undelivered("none")
                                     if r.status in ("cancelled", "expired"))
            finally:
                fe.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fe
                await replica_store.db.close()
        day.tool_calls = sum(mock.served.values())
        day.questions = mock.served["AskUserQuestion"]
        day.reviewed = Counter(mock.reviewed)
    day.seconds = time.monotonic() - started
    return day


async def spawn_fleet(app: Switchboard, home: Path, charters: bool,
                      reviewer: bool = False) -> list[str]:
    """The fleet's names; with `reviewer`, the reviewer agent first (the day waits for it as
    for the others, but its schedule-less turns are not the script's)."""
    names = [f"svc{i}" for i in range(AGENTS)]
    if reviewer:
        names.insert(0, REVIEWER)
    uid, gid = agent_ids(Settings(home=home))
    for name in names:
        cwd = home / "w" / name
        cwd.mkdir(parents=True)
        if uid is not None and gid is not None:
            os.chown(cwd, uid, gid)  # sandboxed agents run as this uid when we are root
        flag = ""
        if charters:
            f = home / f"{name}.charter.md"
            f.write_text(REVIEWER_CHARTER if name == REVIEWER else CHARTER.format(name=name))
            flag = f"--charter @{f} "
        reply = await run(app, f"/spawn {name} --cwd {cwd} {flag}TEXT: ready")
        if not reply.ok:
            raise RuntimeError(f"/spawn {name} failed: {reply.plain()}")
    await wait_real(lambda: _quiet(app, names), "the first turns")
    return names


def workers(names: list[str]) -> list[str]:
    """The agents with a schedule (all but the reviewer)."""
    return [n for n in names if n != REVIEWER]


async def make_schedules(app: Switchboard, names: list[str]) -> list[str]:
    """Each agent's schedule, in plain words from chat, confirmed as the operator would."""
    sids = []
    for name in workers(names):
        draft = await run(app, f"/cron add every 2 hours {name} {STEPS}{name}: the routine "
                               "round: check the build, tidy up, report what you find")
        if not draft.ok or not draft.blocks[0].text.startswith("Every 2 hours, next "):
            raise RuntimeError(f"/cron add for {name}: {draft.plain()}")
        made = await run(app, "/cron confirm")
        if not made.ok:
            raise RuntimeError(f"/cron confirm for {name}: {made.plain()}")
        sids.append(made.plain().split()[2].rstrip(":"))
    return sids


async def wait_real(pred: Any, what: str, timeout: float = TURN_TIMEOUT_S) -> None:
    """Poll `pred` (sync or async) in real time, the fake clock standing still."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.001)


async def pass_the_day(app: Switchboard, clock: FakeClock, replica: Scheduler,
                       names: list[str], day: Day) -> None:
    """Step the clock to the end of the day and the last runs recorded: each step, every loop
    on the clock does its pass, then both schedulers tick, then the runs they started end."""
    assert app.api is not None and app.pool is not None and app.store is not None
    store, scheduler = app.store, app.api.schedules.scheduler
    while True:
        await advance(clock, STEP_S)
        day.steps += 1
        slot = round((clock.now() - DAY_START) / (WAKE_EVERY_H * 3600)) - 1
        if abs(clock.now() - (DAY_START + (slot + 1) * WAKE_EVERY_H * 3600)) < STEP_S / 2:
            day.wake = slot
            day.resumed += sum(1 for r in app.pool.fleet.everyone()
                               if r.name in workers(names) and r.process is None)
        day.messages += bool(day.gatherer.due(clock.monotonic()))  # a digest sent
        await asyncio.gather(scheduler.tick(), replica.tick())
        await wait_real(lambda: runs_ended(app, names),
                        f"the runs at {clock.now() - DAY_START:.0f}s")
        if clock.now() >= DAY_END and not await store.schedules.running():
            return


async def advance(clock: FakeClock, seconds: float) -> None:
    """Move the clock, and wait until every loop it woke (watchdog, timers, bus) has done its
    pass and gone back to sleep."""
    asleep = clock.sleepers
    clock.advance(seconds)
    await wait_real(lambda: clock.sleepers >= asleep, "the clock's loops to settle",
                    SETTLE_TIMEOUT_S)


async def runs_ended(app: Switchboard, names: list[str]) -> bool:
    """Every run the schedulers started has its outcome (what their next tick records), and
    the fleet is quiet."""
    assert app.store is not None and app.pool is not None
    targets = PoolTargets(app.pool, app.core.standing)
    for r in await app.store.schedules.running():
        s = await app.store.schedules.get(r.schedule_id)
        if s is None or await targets.outcome(s, r) is None:
            return False
    return _quiet(app, names)


async def count_runs(app: Switchboard, sids: list[str], names: list[str], replica: str,
                     day: Day) -> None:
    assert app.store is not None and app.pool is not None
    for sid in sids:
        for r in await app.store.schedules.history(sid, 100):
            day.runs[r.status] += 1
            day.by_replica += r.claimed_by == replica
    for name in workers(names):
        runner = await app.pool.fleet.get(name)
        got: Counter[str] = Counter()
        for t in await app.store.turns.recent(runner.id, 100):
            got.update(re.findall(r'<message [^>]*id="(\d+)" from="scheduler"', t.prompt))
        day.twice_delivered += sum(n - 1 for n in got.values())


def ratio(value: float, base: float) -> float | None:
    return value / base if base else None


def _ratio_text(value: float, base: float) -> str:
    r = ratio(value, base)
    return ("—" if value == 0 else "∞") if r is None else f"{r:.2f}x"


def report(main: Day, charter: Day, base: Day) -> bool:
    """The figures of `main` (charters and a reviewer), with the charters-only day beside them
    and the ratio to the baseline (no charters). The issue's goals hold for the ten-agent day;
    the smoke day (three agents) reports them without a verdict."""
    def per_h(rows: list[Any]) -> float:
        return len(rows) / AGENT_HOURS

    def settled(d: Day) -> float:
        return 100.0 * (d.tool_calls - len(d.asks)) / d.tool_calls if d.tool_calls else 0.0

    def by_charter(d: Day) -> float:
        return 100.0 * d.send_backs / d.questions if d.questions else 0.0

    def one_tap(d: Day) -> float:
        return 100.0 * d.one_tap / len(d.asks) if d.asks else 100.0

    def verdict(ok: bool) -> bool | None:
        return None if smoke() else ok

    rows = [  # figure, unit, with reviewer, charters only, baseline, goal, met (None: none)
        ("pushes needing an answer per agent-hour", "/agent-h", per_h(main.asks),
         per_h(charter.asks), per_h(base.asks), "<= 0.25", verdict(per_h(main.asks) <= 0.25)),
        ("all pushes per agent-hour (with notices, digests)", "/agent-h",
         main.messages / AGENT_HOURS, charter.messages / AGENT_HOURS,
         base.messages / AGENT_HOURS, "", None),
        ("all rows pushed per agent-hour (each notice alone)", "/agent-h", per_h(main.pushes),
         per_h(charter.pushes), per_h(base.pushes), "", None),
        ("tool calls settled without a push", "%", settled(main), settled(charter),
         settled(base), ">= 90 %", verdict(settled(main) >= 90.0)),
        ("duplicate or superseded pushes", "pushes", main.duplicates, charter.duplicates,
         base.duplicates, "0", main.duplicates == 0 and charter.duplicates == 0),
        ("pushes needing an answer answerable with one tap", "%", one_tap(main),
         one_tap(charter), one_tap(base), "100 %", one_tap(main) == 100.0),
        ("questions settled by the charter", "%", by_charter(main), by_charter(charter),
         by_charter(base), "", None),
    ]
    print(f"\n  {'figure':<48} {'reviewer':>9} {'charter':>9} {'baseline':>9} {'ratio':>7}"
          "  goal")
    for label, _unit, value, c, b, goal, met in rows:
        verdict_text = "" if met is None else f"{goal}: {'met' if met else 'NOT MET'}"
        if met is None and goal:
            verdict_text = f"{goal}: (the ten-agent day's goal)"
        print(f"  {label:<48} {value:9.2f} {c:9.2f} {b:9.2f} {_ratio_text(value, b):>7}  "
              f"{verdict_text}")
    for d in (main, charter, base):
        kinds = Counter(str(r.kind) for r in d.pushes)
        titles = Counter(_title_kind(r) for r in d.pushes if r.kind == Kind.NOTICE)
        asked = Counter(_ask_kind(r) for r in d.asks)
        print(f"\n  {d.label}: {d.tool_calls} tool calls ({d.questions} questions), "
              f"{len(d.pushes)} rows {dict(sorted(kinds.items()))} in {d.messages} messages, "
              f"asks "
              f"{dict(sorted(asked.items()))}, notices {dict(sorted(titles.items()))}, "
              f"{d.send_backs} sent back, reviewer {dict(sorted(d.reviewed.items()))}, "
              f"{d.rules_taken} rules taken; slots {dict(sorted(d.runs.items()))}, "
              f"{d.by_replica} claimed by the replica, {d.twice_delivered} delivered twice; "
              f"{d.resumed} wakes started a CLI; {d.steps} ticks, {d.seconds:.1f}s", flush=True)
    for label, unit, value, _c, b, goal, met in rows:
        result(label, value, unit, goal=goal, baseline=b, ratio=ratio(value, b), passed=met,
               note="charters and a reviewer agent; baseline: the same day without charters")
    want = AGENTS * WAKES
    same = all(d.tool_calls == base.tool_calls and d.questions == base.questions
               for d in (main, charter))
    if not same:
        print("unexpected: the runs did not play the same script")
    complete = all(d.runs == Counter({"ran": want}) for d in (main, charter, base))
    if not complete:
        print(f"unexpected: not every one of the {want} slots ran once")
    return same and complete and all(met is not False for *_, met in rows)


def _ask_kind(row: EscalationRow) -> str:
    """What a push that needs an answer was about: the command's first word, or the kind."""
    if row.kind == Kind.PERMISSION and isinstance(row.tool_input, dict):
        words = str(row.tool_input.get("command", "")).split()
        return " ".join(words[:2]) if words[:1] == ["git"] else (words[0] if words else "?")
    return str(row.kind)


def _title_kind(row: EscalationRow) -> str:
    title = row.title
    if title.startswith("🧑"):
        return "reviewer's decision"
    for word in ("finished", "session TTL", "stopped", "ran", "failed", "paused"):
        if word in title:
            return word
    return title[:30]


async def main() -> int:
    quiet_logging()
    started = time.monotonic()
    print(f"operator attention, python {sys.version.split()[0]}, {os.cpu_count()} cpus: "
          f"{AGENTS} agents x {DAY_H} h = {AGENT_HOURS} agent-hours on a fake clock, "
          f"'every 2 hours' schedules, the real CLI on the mock API", flush=True)
    with scratch_dir("sbo") as home:
        for d in (home / "r", home / "c", home / "b"):
            (d / "t").mkdir(parents=True)
        main_day = await run_day(home / "r", charters=True, reviewer=True)
        charter = await run_day(home / "c", charters=True)
        base = await run_day(home / "b", charters=False)
    ok = report(main_day, charter, base)
    print(f"done in {time.monotonic() - started:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
