"""SIGKILL of the supervisor while a fleet floods the bus, and the check of what survived it:
every message the bus acknowledged to its sender before the kill reaches its recipient after the
restart, and the senders' redone sends (the same dedup keys, their cut turns run again on the
operator's answer) store nothing twice. The supervisor is a real `switchboard run` subprocess on
the fake CLI (`SPAM`: each agent sends round robin to all the others, every id the bus returns in
its `bus-sent.log` at once, every id it is handed in its `bus-received.log`), its agents in real
sandboxes, driven and watched through its console.

Shared by tests/integration/test_bus_crash.py (10 agents x 100 messages, in the suite) and
bench/bus_crash.py (50 agents x 200 messages, in `make bench-smoke`, which CI runs).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from tests.subproc import Supervisor, write_config

INTERRUPTED = re.compile(r"❓ (\w+) · (\w+): a turn was interrupted")


@dataclass(frozen=True, slots=True)
class Outcome:
    agents: int
    messages: int  # agents x per agent: every one stored once, and received
    sent_before: int  # acknowledged before the SIGKILL
    cut_turns: int  # turns the kill cut, each reported after the restart
    kill_s: float  # from the first /spawn to the SIGKILL
    total_s: float


def ids(home: Path, name: str) -> list[str]:
    """Every id in the agents' `name` logs (bus-sent.log or bus-received.log)."""
    out: list[str] = []
    for log in (home / "workspaces").glob(f"a*-*/{name}"):
        out += log.read_text().split()
    return out


def run(home: Path, agents: int, per_agent: int, *, timeout_s: float = 120.0,
        cold: bool = False) -> Outcome:
    """Spawn `agents` agents, have each send `per_agent` bus messages to the others, SIGKILL the
    supervisor once 30% of them were acknowledged, restart it, answer each cut turn's question
    with "run it again", and check (AssertionError on a message lost or stored twice). `cold`
    starts both supervisors from a cold interpreter, not the tests' zygote: for a bench's times."""
    write_config(home, fake=True, spawns_per_minute=1000, commands_per_minute=10_000,
                 memory_refuse_pct=100, bus_inbox_cap=100_000, bus_pair_limit=10_000,
                 bus_rate_alarm_per_min=1_000_000, max_agents=agents + 10)
    total = agents * per_agent
    kill_at = int(total * 0.3)
    names = [f"a{i:02d}" for i in range(agents)]
    started = time.monotonic()
    sup = Supervisor(home, cold=cold)
    try:
        sup.expect("Switchboard console", timeout_s)
        for name in names:
            sup.send(f"/spawn {name} hello")
        sup.expect_all([f"[{name}] ✓ turn finished" for name in names], timeout_s * 1.5)
        for i, name in enumerate(names):
            others = ",".join(names[(i + k) % agents] for k in range(1, agents))
            sup.send(f"/ask {name} SPAM {per_agent} {others}")
        deadline = time.monotonic() + timeout_s
        while len(ids(home, "bus-sent.log")) < kill_at and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(sup.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        sup.proc.wait(10)
    finally:
        sup.close()
    sent_before = set(ids(home, "bus-sent.log"))
    assert kill_at <= len(sent_before) < total, "the kill was not in the middle of the flood"
    db = sqlite3.connect(home / "switchboard.db")
    try:  # the turns the kill cut: each must be reported after the restart
        cut = db.execute("SELECT COUNT(*) FROM turns WHERE status = 'running'").fetchone()[0]
    finally:
        db.close()
    assert cut, "the kill cut no turn"
    sup2 = Supervisor(home, cold=cold)
    try:
        sup2.expect("Switchboard console", timeout_s)
        # The operator's SPAM turns that the kill cut are reported, not replayed unasked: one
        # answer each runs them again (the same dedup keys: nothing is stored twice). A cut
        # turn that held only other agents' messages is reported as a notice, with nothing to
        # answer: the bus delivers those again by itself. Every cut turn is reported (waited
        # for by count, not by a quiet spell, which under load ended early and left turns
        # unanswered).
        interrupted: dict[str, str] = {}
        for _ in range(cut):
            line = sup2.expect("a turn was interrupted", timeout_s / 2)
            found = INTERRUPTED.search(line)
            if found:
                interrupted[found.group(2)] = found.group(1)
        for esc_id in interrupted.values():
            sup2.send(f"/answer {esc_id} 1")
        deadline = time.monotonic() + timeout_s * 1.5
        while time.monotonic() < deadline:
            sent, received = set(ids(home, "bus-sent.log")), set(ids(home, "bus-received.log"))
            if len(sent) == total and sent <= received:
                break
            time.sleep(0.1)
        said = (f"cut turns {cut}, questions answered {len(interrupted)}, sent {len(sent)} of"
                f" {total}, not received {len(sent - received)}; the log's end:\n"
                + _tail(home / "switchboard.log") + "\nthe console's end:\n"
                + "\n".join(sup2.rest(1)[-20:]))
        assert sent_before <= received, f"{len(sent_before - received)} acknowledged, lost; {said}"
        assert len(sent) == total and sent <= received, said
        sup2.send("/quit")
        sup2.proc.wait(timeout_s / 2)
    finally:
        sup2.close()
    db = sqlite3.connect(home / "switchboard.db")
    try:
        stored = db.execute("SELECT COUNT(*) FROM bus_messages WHERE sender != 'operator'"
                            ).fetchone()[0]
    finally:
        db.close()
    assert stored == total, f"{stored} stored for {total} sent: the redone sends were stored twice"
    return Outcome(agents, total, len(sent_before), cut, killed - started,
                   time.monotonic() - started)


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"
