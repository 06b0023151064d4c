"""SIGKILL of the supervisor during ingest from a fleet, and the check of what survived it:
every turn end, cost and state change a front end was shown before the kill is in the database
after the restart, with every event of each finished turn (supervisor/agents/ingest.py: the batch is
flushed before any of them is reported). The supervisor is a real `switchboard run` subprocess
on the fake CLI, its agents in real sandboxes, driven and watched through its console, whose
output is what "acknowledged to a front end" means here.

Shared by tests/integration/test_ingest_crash.py (10 agents, in the suite) and
bench/ingest_crash.py (300 agents, in `make bench-smoke`, which CI runs).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.subproc import Supervisor, write_config

FINISHED = re.compile(r"^\[(\w+)\] ✓ turn finished \(\$(\d+\.\d+)\)$")
CHANGED = re.compile(r"^\[(\w+)\] (\S+) → (\w+)")
COST = 0.001  # what the fake CLI charges a turn


@dataclass(frozen=True, slots=True)
class Outcome:
    agents: int
    shown_finished: int  # turn ends the console showed before the kill
    shown_changes: int  # state changes it showed
    events: int  # events in the database after the restart
    kill_s: float  # from the first /spawn to the SIGKILL
    restart_s: float  # from the restart to the console's prompt
    total_s: float


def run(home: Path, agents: int, chunks: int, turns: int, *, timeout_s: float = 60.0,
        cold: bool = False, **config: object) -> Outcome:
    """Spawn `agents` agents each streaming `chunks` events a turn with `turns` turns queued,
    SIGKILL the supervisor once `agents` turn ends were shown (the fleet still streaming),
    restart it, and check the database (AssertionError on anything missing). `cold` starts both
    supervisors from a cold interpreter, not the tests' zygote: for a bench's times."""
    write_config(home, fake=True, **{"ingest_window_s": 0.05, **config})
    started = time.monotonic()
    sup = Supervisor(home, cold=cold)
    try:
        sup.expect("Switchboard console", timeout_s)
        for i in range(agents):
            sup.send(f"/spawn w{i} STREAM {chunks}")
        for i in range(agents):
            for _ in range(turns - 1):
                sup.send(f"/ask w{i} STREAM {chunks}")
        # Kill once some turns have ended and the fleet is still streaming.
        for _ in range(agents):
            sup.expect("✓ turn finished", timeout_s)
        os.kill(sup.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        sup.proc.wait(10)
        shown = sup.rest()  # everything it printed before it died
    finally:
        sup.close()
    finished = [m.groups() for m in map(FINISHED.match, shown) if m]
    changes = Counter(m.groups() for m in map(CHANGED.match, shown) if m)
    assert agents <= len(finished) < agents * turns, "the kill was not mid-ingest"

    restarted = time.monotonic()
    sup2 = Supervisor(home, cold=cold)
    try:
        sup2.expect("Switchboard console", timeout_s)
        ready = time.monotonic()
        sup2.send("/quit")
        sup2.proc.wait(timeout_s)
    finally:
        sup2.close()
    events = check(home / "switchboard.db", finished, changes, chunks)
    return Outcome(agents, len(finished), sum(changes.values()), events, killed - started,
                   ready - restarted, time.monotonic() - started)


def check(db_path: Path, finished: list[tuple[str, str]],
          changes: Counter[tuple[str, str, str]], chunks: int) -> int:
    """Every turn end shown is stored as it was shown, with its cost in the ledger and the
    totals and every event it streamed; every state change shown is stored. Returns how many
    events the database holds."""
    db = sqlite3.connect(db_path)
    try:
        names = dict(db.execute("SELECT name, id FROM agents").fetchall())
        per_agent = Counter(name for name, _ in finished)
        for name, shown_ok in per_agent.items():
            turns = db.execute("SELECT id, cost_usd, prompt FROM turns WHERE agent_id=? AND"
                               " status='ok' ORDER BY id", (names[name],)).fetchall()
            assert len(turns) >= shown_ok, (name, turns)
            for turn_id, turn_cost, prompt in turns[:shown_ok]:
                # The cost shown, in the turn and in the ledger; every event it streamed (a
                # turn may carry several queued messages, each streaming), and its result.
                assert f"{turn_cost:.4f}" == f"{COST:.4f}", (name, turn_id, turn_cost)
                ledger = db.execute("SELECT SUM(cost_usd) FROM costs WHERE turn_id=?",
                                    (turn_id,)).fetchone()[0]
                assert ledger is not None and abs(ledger - COST) < 1e-9, (name, turn_id, ledger)
                asked = max(1, prompt.count("<message "))
                kinds = Counter(k for (k,) in db.execute(
                    "SELECT kind FROM agent_events WHERE turn_id=?", (turn_id,)))
                assert kinds["assistant"] == chunks * asked + 1, (name, turn_id, kinds)
                assert kinds["result"] == 1 and kinds["prompt"] == 1, (name, turn_id, kinds)
            spent = db.execute("SELECT cost_usd, turns FROM agent_totals WHERE agent_id=?",
                               (names[name],)).fetchone()
            assert spent[0] >= shown_ok * COST - 1e-9, (name, spent, shown_ok)
        for (name, old, new), n in changes.items():
            stored = db.execute(
                "SELECT COUNT(*) FROM agent_transitions WHERE agent_id=? AND"
                " COALESCE(from_state, '-')=? AND to_state=?", (names[name], old, new)
            ).fetchone()[0]
            assert stored >= n, (name, old, new, stored, n)
        shown_cost = sum(float(c) for _, c in finished)
        assert abs(shown_cost - COST * len(finished)) < 1e-9, shown_cost
        return int(db.execute("SELECT COUNT(*) FROM agent_events").fetchone()[0])
    finally:
        db.close()
