"""Hostile agents that try to outlive /kill, /killall and `switchboard kill`, or to keep running
through /pause: each starts every kind of escaper it can (fork chains, setsid and double forks,
nohup, env -i, setsid -f env -i, a TERM-ignoring loop), half of them after trying to SIGKILL
their own init. Twenty agents at once, then ten.

Before the sandbox these failed: an agent's processes were found by an environment tag plus the
launcher's descendants, and `env -i` drops the tag while `setsid -f` plus the launcher's death
(an agent could SIGKILL its own launcher: same user) orphans the process to the host's init, out
of the tree; the rest of /pause (a SIGSTOP per member, repeated) raced a fork chain. Now the agent
is its own pid namespace: one kill(-1, SIGSTOP) from its init freezes it, the init's death ends it.

Two fleets, not one per mechanism (the real CLIs and their escapers were a third of the suite's
CPU): the twenty of the first are ten /kill'ed at once while the other ten run on (which must
not touch them), then those ten paused, resumed and /killall'ed; the second, ten, meets
`switchboard kill`. Each mechanism still acts on ten hostile agents at once, half of which
tried to kill their init, and /kill with twenty live, as before.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run, wait_for
from tests.security.conftest import (
    COUNTERS,
    SPAWN_WAIT_S,
    HostTable,
    Watched,
    counters,
    escaper_prompt,
    escapers_running,
    spawn_fleet,
    tool_calls,
    wait_dead,
)

# One worker runs the fleets one after the other, and first (tests/conftest.py, make test): forty
# real CLIs with their escapers at once bring two cores to a standstill.
pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(300), pytest.mark.fleet]

HALF = 10  # hostile agents a mechanism acts on at once
KILL_BOUND_S = 5.0  # after the command returned: all of it is dead by then
ROOT = Path(__file__).resolve().parents[2]


async def hostile_fleet(app, mock, prefix: str, size: int) -> list[Watched]:
    """`size` agents with escapers running; the odd ones first tried `kill -9 1` (their init)."""
    names = [f"{prefix}{i}" for i in range(size)]
    # Started idle, then all handed their escapers at once: the escapers of the first agents
    # would otherwise tick through every later CLI's start on these two cores.
    runners = await spawn_fleet(app, names, "TEXT: ready")
    for i, r in enumerate(runners):
        reply = await run(app, f"/ask {r.name} {escaper_prompt(kill_init=i % 2 == 1)}")
        assert reply.ok, reply.plain()

    def escapers_done() -> bool:
        done = [c for c in tool_calls(mock) if "base64 -d" in c.command]
        return len(done) == size and all(
            r.state == "idle" and not r.busy and not r.queued for r in runners)

    try:
        await wait_for(escapers_done, SPAWN_WAIT_S, "every agent to run its escapers")
    except AssertionError as exc:
        states = ", ".join(f"{r.name}={r.state} busy={r.busy} queued={r.queued} ({r.last_error})"
                           for r in runners)
        done = len([c for c in tool_calls(mock) if "base64 -d" in c.command])
        raise AssertionError(f"{exc}: {done} escaper results; {states}") from None
    fleet = [Watched.of(r) for r in runners]
    await wait_for(lambda: all_running(fleet), 30, "every escaper running")
    host = HostTable()
    for w in fleet:
        w.look(host)
    results = [c.result for c in tool_calls(mock) if "base64 -d" in c.command]
    assert len(results) == size and all("escaped" in r for r in results), results
    tried = [r for r in results if "kill -9 1 rc=" in r]
    assert len(tried) == size // 2
    # Its own init is out of an agent's reach: pid 1 of the namespace, and root.
    assert all("kill -9 launcher 1 rc=1" in r for r in tried), tried
    assert not [r for r in tried if " rc=0" in r], tried
    host = HostTable()
    assert all(any(p.pid == w.init_pid for p in w.look(host)) for w in fleet)
    return fleet


def all_running(fleet: list[Watched]) -> bool:
    host = HostTable()  # one scan of /proc for the whole fleet
    return all(escapers_running(w, host) for w in fleet)


def assert_all_dead(fleet: list[Watched], what: str) -> float:
    try:
        elapsed, left = wait_dead(fleet, KILL_BOUND_S)
    finally:
        for w in fleet:
            w.release()
    assert not left, f"{len(left)} process(es) survived {what} after {elapsed:.1f}s: {left}"
    assert sum(len(w.seen) for w in fleet) >= len(fleet) * 10  # every escaper was counted
    return elapsed


def running(w: Watched, host: HostTable | None = None) -> list[str]:
    return [str(p) for p in w.agent_side(host) if p.state() not in ("T", "t", "Z", None)]


async def test_kill_then_pause_then_killall_leave_nothing_of_twenty_hostile_agents(
        hostile_app, mock_api):
    fleet = await hostile_fleet(hostile_app, mock_api, "h", 2 * HALF)
    # /kill: half the fleet at once (five of them tried to kill their init), the other half
    # running on beside it.
    doomed, rest = fleet[:HALF], fleet[HALF:]
    started = time.monotonic()
    replies = await asyncio.gather(*(run(hostile_app, f"/kill {w.runner.name}") for w in doomed))
    took = time.monotonic() - started
    assert all(r.ok for r in replies), [r.plain() for r in replies if not r.ok]
    assert all(w.runner.state == "killed" for w in doomed)
    after = assert_all_dead(doomed, "/kill")
    print(f"/kill x{HALF}: commands {took:.2f}s, then all dead {after:.2f}s later")
    # ... and it reached no other agent: every escaper of the rest still runs.
    assert all(w.runner.state == "idle" for w in rest)
    host = HostTable()
    assert all(escapers_running(w, host) for w in rest), [
        w.runner.name for w in rest if not escapers_running(w, host)]

    # /pause: the other half.
    for w in rest:
        reply = await run(hostile_app, f"/pause {w.runner.name}")
        assert reply.ok, reply.plain()
    frozen = {}
    for w in rest:
        # A process inside a system call (state D, a write under load) takes its SIGSTOP
        # when the call returns, so a stop is waited for; one that keeps running fails.
        try:
            await wait_for(lambda w=w: not running(w), 10, f"{w.runner.name} to stop")
        except AssertionError:
            raise AssertionError(
                f"{w.runner.name}: not stopped after /pause: {running(w)}") from None
        procs = w.agent_side()
        frozen[w.runner.name] = ({(p.pid, p.start) for p in procs}, counters(w.runner))
    await asyncio.sleep(1.0)
    host = HostTable()
    for w in rest:
        pids, count = frozen[w.runner.name]
        procs = w.agent_side(host)
        assert {(p.pid, p.start) for p in procs} <= pids, (
            f"{w.runner.name}: new processes while paused: "
            f"{[str(p) for p in procs if (p.pid, p.start) not in pids]}")
        assert all(p.state() in ("T", "t", "Z", None) for p in procs)
        assert counters(w.runner) == count, f"{w.runner.name}: a counter grew while paused"
    for w in rest:
        reply = await run(hostile_app, f"/resume {w.runner.name}")
        assert reply.ok, reply.plain()

    def all_ticking() -> bool:
        return all(all(counters(w.runner)[c] > frozen[w.runner.name][1][c] for c in COUNTERS)
                   for w in rest)

    await wait_for(all_ticking, 10, "every escaper running again after /resume")
    # /killall: the same half, running again.
    started = time.monotonic()
    reply = await run(hostile_app, "/killall confirm")
    took = time.monotonic() - started
    assert reply.ok, reply.plain()
    assert f"{HALF} agent(s) killed" in reply.plain()
    after = assert_all_dead(rest, "/killall")
    print(f"/killall: {took:.2f}s, then all dead {after:.2f}s later")


async def test_switchboard_kill_command_leaves_nothing_of_ten_hostile_agents(
        hostile_app, mock_api):
    fleet = await hostile_fleet(hostile_app, mock_api, "sk", HALF)
    # Only the command's own sweep acts: the running supervisor's trigger-file watcher is
    # stopped, as if its process were wedged.
    hostile_app.pool.killswitch.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "ANTHROPIC_"))}
    env["SWITCHBOARD_HOME"] = str(hostile_app.settings.home)
    started = time.monotonic()
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "bot.cli", "kill", "--reason", "hostile"],
        capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert "kill switch on" in out.stdout
    after = assert_all_dead(fleet, "switchboard kill")
    print(f"switchboard kill: {took:.2f}s (with interpreter start), then all dead {after:.2f}s")
