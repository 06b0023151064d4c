"""Escalation round trip: what an operator approval costs, human time excluded.

Run from the repository root:  .venv/bin/python bench/escalation_roundtrip.py
                               [--stored N | --compare N]

`--stored N` runs with N delivered notices already in the escalated instance's database (what
a long-lived fleet leaves: every finished turn adds one); `--compare N` runs on an empty
database, then with N, and prints the escalated round trip of both (goal: within 1.2x);
`--in-process N` compares the same without the CLI (open -> delivered -> answered -> the
waiting call returns, then a notice, 200 times): the store's and the outbox's part alone,
which the CLI's tens of milliseconds would otherwise drown on a busy machine.

Two Switchboard instances run side by side in this process, each with one agent on the REAL
bundled `claude` CLI against one mock Anthropic API, and get the same kind of turn, alternately:
`/ask <agent> BASH: touch fN.txt` (every file name unique, so every call is a new request):

* escalated: the built-in default policy, under which `touch` is "ask". The PreToolUse hook
  answers "ask", the CLI calls can_use_tool, the gate opens an escalation and waits. A simulated
  front end consumes `pool.escalations.follow("bench")`, answers each open permission row at once
  with `escalations.answer(id, Answer(ALLOW, ...))`, then acks it.
* baseline: a policy that allows everything (tests/fakes/permissive_policy.toml). The hook says
  "allow" and the CLI runs the command without asking anyone.

Timestamps per call (all time.time() in this process; the mock serves from a thread here):

  served       the mock has streamed the tool_use response to the CLI
  can_use_tool the gate's can_use_tool is entered (timed by wrapping ToolGate.can_use_tool here)
  created      the escalation row's created_at
  delivered    the front end receives the row from follow()
  answered     escalations.answer() has returned (committed, the waiter woken, event published)
  tool_result  the CLI's next /v1/messages request, carrying the tool_result, reaches the mock

Components: (a) created -> delivered, (b) delivered -> answered, (c) answered -> tool_result;
total = created -> tool_result. The baseline is served -> tool_result under the permissive
policy. Overhead = escalated total - baseline, and the ratio. Because "total" starts only once
the row exists, the like-for-like figure (served -> tool_result in both variants) is printed too.

N turns per variant, sequential, after one discarded warm-up turn each (the CLI's first Bash call
sets up its shell). Prints median and p90 (linear interpolation) in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import (  # noqa: E402
    percentile,
    quiet_logging,
    result,
    scratch_dir,
    smoke,
    wait_until,
)
from bench._figures import Figure, table  # noqa: E402
from bench._fill import fill  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from store import open_store  # noqa: E402
from supervisor.agents.runner import AgentRunner  # noqa: E402
from supervisor.clock import SYSTEM_CLOCK  # noqa: E402
from supervisor.config import Settings  # noqa: E402
from supervisor.events import EventHub  # noqa: E402
from supervisor.guard.escalations import Answer, Decision, Escalations, Kind, Timeouts  # noqa: E402
from supervisor.guard.gate import ToolGate  # noqa: E402
from supervisor.process.sandbox import agent_ids  # noqa: E402
from tests.conftest import PERMISSIVE_POLICY, make_settings, run  # noqa: E402
from tests.fakes.mock_anthropic import MockAnthropic, directive_of  # noqa: E402

N = 2 if smoke() else 10
WARMUP = 1
TURN_TIMEOUT_S = 60.0
POLL_S = 0.002  # wait_until's polling interval
FRONTEND = "bench"


# -- timestamps ----------------------------------------------------------------------------------


class Marks:
    """First time each (point, command) was seen; written from the mock's threads and the loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marks: dict[tuple[str, str], float] = {}

    def set(self, point: str, command: str, at: float | None = None) -> None:
        with self._lock:
            self._marks.setdefault((point, command), time.time() if at is None else at)

    def clear(self) -> None:
        with self._lock:
            self._marks.clear()

    def get(self, point: str, command: str) -> float | None:
        with self._lock:
            return self._marks.get((point, command))


MARKS = Marks()


def _tool_result_command(body: dict[str, Any]) -> str | None:
    """If the request answers a Bash tool_use, the command of that tool_use."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    blocks = content if isinstance(content, list) else []
    ids = {b.get("tool_use_id") for b in blocks
           if isinstance(b, dict) and b.get("type") == "tool_result"}
    if not ids:
        return None
    for msg in reversed(messages):
        if msg.get("role") != "assistant" or not isinstance(msg.get("content"), list):
            continue
        for block in msg["content"]:
            if (isinstance(block, dict) and block.get("type") == "tool_use"
                    and block.get("id") in ids and block.get("name") == "Bash"):
                return str((block.get("input") or {}).get("command"))
    return None


class TimedMock(MockAnthropic):
    """The mock, unchanged, plus two timestamps: when a tool_result request arrives, and when
    the response carrying a Bash tool_use has been streamed out."""

    def _handle_messages(self, h: Any, body: dict[str, Any]) -> None:
        arrived = time.time()
        answered = _tool_result_command(body)
        if answered is not None:
            MARKS.set("tool_result", answered, arrived)
        directive = directive_of(body).strip()
        asks_tool = (answered is None and bool(body.get("tools"))
                     and directive.startswith("BASH:"))
        super()._handle_messages(h, body)
        if asks_tool:
            MARKS.set("served", directive.removeprefix("BASH:").strip())


def time_can_use_tool() -> None:
    """Timestamp the gate's can_use_tool entry (in this process only; nothing is edited)."""
    original = ToolGate.can_use_tool

    async def timed(self: ToolGate, name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
        if name == "Bash":
            MARKS.set("can_use_tool", str(tool_input.get("command")))
        return await original(self, name, tool_input, ctx)

    ToolGate.can_use_tool = timed  # type: ignore[method-assign]


# -- the simulated front end ---------------------------------------------------------------------


async def front_end(app: Switchboard) -> None:
    """Deliver the outbox; answer every open permission request at once; ack everything."""
    assert app.pool is not None
    esc = app.pool.escalations
    async for row in esc.follow(FRONTEND):
        delivered = time.time()
        if row.kind == Kind.PERMISSION and row.status == "open":
            command = str((row.tool_input or {}).get("command"))
            MARKS.set("created", command, row.created_at)
            MARKS.set("delivered", command, delivered)
            await esc.answer(row.id, Answer(Decision.ALLOW, "", "bench", "bench"))
            MARKS.set("answered", command, time.time())
        await esc.ack(row.id, FRONTEND)


# -- driver --------------------------------------------------------------------------------------


async def start_agent(app: Switchboard, name: str, cwd: Path) -> AgentRunner:
    assert app.pool is not None
    reply = await run(app, f"/spawn {name} --cwd {cwd} TEXT: ready")
    if not reply.ok:
        raise RuntimeError(f"/spawn {name} failed: {reply.plain()}")
    runner = await app.pool.fleet.get(name)
    await wait_until(lambda: runner.state in ("idle", "failed"), TURN_TIMEOUT_S,
                     f"{name}'s first turn", interval=POLL_S)
    if runner.state == "failed":
        raise RuntimeError(f"agent {name} failed: {runner.last_error}")
    return runner


async def one_turn(app: Switchboard, runner: AgentRunner, cwd: Path, n: int) -> str:
    """`/ask <agent> BASH: touch fN.txt`, to the end of the turn. Returns the command."""
    command = f"touch f{n}.txt"
    reply = await run(app, f"/ask {runner.name} BASH: {command}")
    if not reply.ok:
        raise RuntimeError(f"/ask {runner.name} failed: {reply.plain()}")
    await wait_until(lambda: (MARKS.get("tool_result", command) is not None
                              and (cwd / f"f{n}.txt").exists() and runner.state == "idle")
                     or runner.state == "failed", TURN_TIMEOUT_S, f"{runner.name}: {command}",
                     interval=POLL_S)
    if runner.state == "failed":
        raise RuntimeError(f"agent {runner.name} failed: {runner.last_error}")
    return command


def span(command: str, start: str, end: str) -> float:
    a, b = MARKS.get(start, command), MARKS.get(end, command)
    if a is None or b is None:
        raise RuntimeError(f"{command}: no {start if a is None else end} timestamp")
    return (b - a) * 1000


def summary(label: str, values: list[float]) -> str:
    return (f"  {label:<48} median {percentile(values, 50):7.1f} ms   "
            f"p90 {percentile(values, 90):7.1f} ms   "
            f"[{', '.join(f'{v:.0f}' for v in values)}]")


def compare(label: str, sample: list[float], base: list[float]) -> str:
    parts = []
    for q in (50, 90):
        s, b = percentile(sample, q), percentile(base, q)
        parts.append(f"{'median' if q == 50 else 'p90'} {s - b:+7.1f} ms ({s / b:.2f}x)")
    return f"  {label:<48} " + "   ".join(parts)


async def permission_requests(app: Switchboard) -> int:
    row = await app.store.db.fetchone("SELECT COUNT(*) AS n FROM escalations WHERE kind = ?",
                                      (Kind.PERMISSION,))
    return int(row["n"]) if row else 0


async def session(stored: int) -> tuple[list[str], list[str], int, int, int]:
    """One run of both variants; `stored`: delivered notices already in the escalated
    instance's database (a long-lived one). (escalated, baseline commands, asked, never,
    mock requests)."""
    MARKS.clear()
    esc_cmds: list[str] = []
    base_cmds: list[str] = []
    with scratch_dir("sbe") as home:
        with TimedMock() as mock:
            esc_cwd, base_cwd = home / "we", home / "wb"
            for d in (esc_cwd, base_cwd):
                d.mkdir()
                uid, gid = agent_ids(Settings(home=home))
                if uid is not None and gid is not None:
                    os.chown(d, uid, gid)  # sandboxed agents run as this uid when we are root
            escalated = make_settings(home / "e", mock)
            permissive = make_settings(home / "b", mock, policy_file=PERMISSIVE_POLICY)
            if stored:
                escalated.db_path.parent.mkdir(parents=True, exist_ok=True)
                t = time.monotonic()
                fill(escalated.db_path, agents=1, notices=stored,
                     frontends=(FRONTEND,))
                print(f"  {stored:,} delivered notices stored in "
                      f"{time.monotonic() - t:.1f}s", flush=True)
            async with Switchboard(escalated) as esc_app, Switchboard(permissive) as base_app:
                fe = asyncio.create_task(front_end(esc_app), name="bench-front-end")
                try:
                    esc_agent = await start_agent(esc_app, "asker", esc_cwd)
                    base_agent = await start_agent(base_app, "runner", base_cwd)
                    n = 0
                    for i in range(WARMUP + N):
                        n += 1
                        c = await one_turn(esc_app, esc_agent, esc_cwd, n)
                        if i >= WARMUP:
                            esc_cmds.append(c)
                        n += 1
                        c = await one_turn(base_app, base_agent, base_cwd, n)
                        if i >= WARMUP:
                            base_cmds.append(c)
                    asked = await permission_requests(esc_app)
                    never = await permission_requests(base_app)
                finally:
                    fe.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await fe
            requests = len(mock.requests)
    return esc_cmds, base_cmds, asked, never, requests


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stored", type=int, default=0,
                        help="delivered notices already in the escalated instance's database")
    parser.add_argument("--compare", type=int, metavar="N", default=0,
                        help="run on an empty database and on one with N stored notices, "
                        "and compare (goal: within 1.2x)")
    parser.add_argument("--in-process", type=int, metavar="N", default=0,
                        help="the same comparison without the CLI: the store's and the "
                        "outbox's part alone")
    args = parser.parse_args()
    quiet_logging()
    started = time.monotonic()
    print(f"escalation round trip, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"N={N} turns per variant after {WARMUP} warm-up", flush=True)
    time_can_use_tool()
    if args.in_process:
        return await compare_in_process(args.in_process)
    if args.compare:
        return await compare_stored(args.compare, started)
    esc_cmds, base_cmds, asked, never, requests = await session(args.stored)
    a = [span(c, "created", "delivered") for c in esc_cmds]
    b = [span(c, "delivered", "answered") for c in esc_cmds]
    c_ = [span(c, "answered", "tool_result") for c in esc_cmds]
    total = [span(c, "created", "tool_result") for c in esc_cmds]
    pre = [span(c, "served", "can_use_tool") for c in esc_cmds]
    gate = [span(c, "can_use_tool", "created") for c in esc_cmds]
    from_cut = [span(c, "can_use_tool", "tool_result") for c in esc_cmds]
    esc_e2e = [span(c, "served", "tool_result") for c in esc_cmds]
    base = [span(c, "served", "tool_result") for c in base_cmds]

    print(f"\n== escalated: default policy, `touch` asks; the front end approves at once "
          f"({asked} permission requests, all answered, {args.stored:,} notices stored) ==")
    print(summary("(a) created -> delivered to the front end", a))
    print(summary("(b) delivered -> answer committed", b))
    print(summary("(c) answer committed -> tool_result at the mock", c_))
    print(summary("total: created -> tool_result", total))
    print("  for reference:")
    print(summary("served tool_use -> can_use_tool (CLI, hook)", pre))
    print(summary("can_use_tool -> row created (policy, insert)", gate))
    print(summary("can_use_tool -> tool_result", from_cut))
    print(summary("served tool_use -> tool_result", esc_e2e))
    print(f"\n== baseline: permissive policy, no escalation "
          f"({never} permission requests) ==")
    print(summary("served tool_use -> tool_result", base))
    print("\n== overhead of an escalation answered at once (escalated - baseline, ratio) ==")
    print(compare("total (created -> tool_result) vs baseline", total, base))
    print(compare("like for like (served -> tool_result)", esc_e2e, base))
    print("  (\"total\" starts once the row exists, after the CLI has parsed the tool_use and run"
          " the\n   PreToolUse hook, which the baseline includes: the like-for-like line is the"
          " cost of asking)")
    print(f"\n  mock API requests served: {requests}")
    s, b = percentile(esc_e2e, 50), percentile(base, 50)
    result("escalation answered at once: served -> tool_result (p50), vs no escalation", s,
           "ms", baseline=b, ratio=s / b)
    print(f"done in {time.monotonic() - started:.1f}s")
    if asked != WARMUP + N or never:
        print("unexpected: the escalated agent should ask once per turn, the baseline never")
        return 1
    return 0


async def in_process(stored: int, rounds: int = 200) -> list[float]:
    """The store's and the outbox's part alone, no CLI: open a permission request, the front
    end (following the outbox) answers it the moment it is delivered and acks it, the waiting
    call returns; then a finished-turn notice, delivered and acked, as every turn adds one.
    ms per request, open -> answer returned."""
    with scratch_dir("sbo") as home:
        path = home / "switchboard.db"
        fill(path, agents=1, notices=stored, frontends=(FRONTEND,))
        store = await open_store(path)
        hub = EventHub()
        esc = Escalations(store, hub, Timeouts(), SYSTEM_CLOCK)

        async def answer_all() -> None:
            async for row in esc.follow(FRONTEND):
                if row.kind == Kind.PERMISSION and row.status == "open":
                    await esc.answer(row.id, Answer(Decision.ALLOW, "", "bench", "bench"))
                await esc.ack(row.id, FRONTEND)

        fe = asyncio.create_task(answer_all())
        times = []
        try:
            for i in range(rounds):
                t = time.perf_counter()
                row = await esc.open(agent_id="f0000", kind=Kind.PERMISSION, title="Bash",
                                     body=f"touch f{i}", tool_name="Bash",
                                     tool_input={"command": f"touch f{i}"})
                await esc.wait(row)
                times.append((time.perf_counter() - t) * 1000)
                await esc.notify("f0000", "agent finished", "done")
        finally:
            fe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await fe
            await store.db.close()
    return times[len(times) // 10:]  # the first tenth warms up


async def compare_in_process(stored: int) -> int:
    results = []
    for n in (0, stored):
        t = time.monotonic()
        results.append(await in_process(n))
        r = results[-1]
        print(f"  in process, {n:,} stored: open -> answered: median {percentile(r, 50):.2f} ms,"
              f" p90 {percentile(r, 90):.2f} ms ({time.monotonic() - t:.0f}s with the fill)",
              flush=True)
    m0, m1 = (percentile(r, 50) for r in results)
    figures = [Figure(f"escalation round trip in process, {stored:,} notices", "<= 1.20x",
                      m1, m0, "ms", m1 <= 1.2 * m0)]
    print()
    print(table(figures))
    return 0  # a missed goal is in its row (the suite fails on it)


async def compare_stored(stored: int, started: float) -> int:
    """The escalated variant's round trip (created -> tool_result, and the outbox's part,
    created -> delivered) on an empty database, then with `stored` delivered notices."""
    results = []
    for n in (0, stored):
        esc_cmds, _, asked, _, _ = await session(n)
        if asked != WARMUP + N:
            print(f"unexpected: {asked} permission requests with {n:,} stored")
            return 1
        results.append(([span(c, "created", "tool_result") for c in esc_cmds],
                         [span(c, "created", "delivered") for c in esc_cmds]))
        print(summary(f"{n:,} stored: created -> tool_result", results[-1][0]), flush=True)
        print(summary(f"{n:,} stored: created -> delivered", results[-1][1]), flush=True)
    (total0, out0), (total1, out1) = results
    m0, m1 = percentile(total0, 50), percentile(total1, 50)
    figures = [
        Figure(f"escalation round trip, {stored:,} notices stored", "<= 1.20x", m1, m0,
               "ms", m1 <= 1.2 * m0),
        Figure(f"  its outbox part (created -> delivered), {stored:,}", "-",
               percentile(out1, 50), percentile(out0, 50), "ms", None),
    ]
    print()
    print(table(figures))
    print(f"done in {time.monotonic() - started:.1f}s")
    return 0  # a missed goal is in its row (the suite fails on it)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
