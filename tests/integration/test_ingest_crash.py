"""SIGKILL of the supervisor during ingest from many agents: every turn end, cost and state
change a front end was shown before the kill is in the database after the restart, with every
event of each finished turn (supervisor/ingest.py: the batch is flushed before any of them is
reported). The supervisor is a real `switchboard run` subprocess on the fake CLI, driven and
watched through its console, whose output is what "acknowledged to a front end" means here."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from collections import Counter

import pytest

from tests.subproc import Supervisor, write_config

pytestmark = [pytest.mark.timeout(120)]

AGENTS = 10  # each a real sandboxed fake CLI (3 processes): 300 would take minutes here
CHUNKS = 200  # events a turn streams
TURNS = 3  # per agent, queued at once
FINISHED = re.compile(r"^\[(\w+)\] ✓ turn finished \(\$(\d+\.\d+)\)$")
CHANGED = re.compile(r"^\[(\w+)\] (\S+) → (\w+)")


def test_what_was_acknowledged_before_a_sigkill_mid_ingest_is_there_after_restart(short_home):
    home = short_home / "sb"
    write_config(home, fake=True, ingest_window_s=0.05)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        for i in range(AGENTS):
            sup.send(f"/spawn w{i} STREAM {CHUNKS}")
        for i in range(AGENTS):
            for _ in range(TURNS - 1):
                sup.send(f"/ask w{i} STREAM {CHUNKS}")
        # Kill once some turns have ended and the fleet is still streaming.
        for _ in range(AGENTS):
            sup.expect("✓ turn finished", 60)
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
        shown = sup.rest()  # everything it printed before it died
    finally:
        sup.close()
    finished = [m.groups() for m in map(FINISHED.match, shown) if m]
    changes = Counter(m.groups() for m in map(CHANGED.match, shown) if m)
    assert AGENTS <= len(finished) < AGENTS * TURNS, "the kill was not mid-ingest"

    sup2 = Supervisor(home)
    try:
        sup2.expect("Switchboard console")
        sup2.send("/quit")
        sup2.proc.wait(30)
    finally:
        sup2.close()
    db = sqlite3.connect(home / "switchboard.db")
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
                assert f"{turn_cost:.4f}" == "0.0010"
                assert db.execute("SELECT SUM(cost_usd) FROM costs WHERE turn_id=?",
                                  (turn_id,)).fetchone()[0] == pytest.approx(0.001)
                asked = max(1, prompt.count("<message "))
                kinds = Counter(k for (k,) in db.execute(
                    "SELECT kind FROM agent_events WHERE turn_id=?", (turn_id,)))
                assert kinds["assistant"] == CHUNKS * asked + 1, (name, turn_id, kinds)
                assert kinds["result"] == 1 and kinds["prompt"] == 1, (name, turn_id, kinds)
            spent = db.execute("SELECT cost_usd, turns FROM agent_totals WHERE agent_id=?",
                               (names[name],)).fetchone()
            assert spent[0] >= shown_ok * 0.001 - 1e-9
        for (name, old, new), n in changes.items():
            stored = db.execute(
                "SELECT COUNT(*) FROM agent_transitions WHERE agent_id=? AND"
                " COALESCE(from_state, '-')=? AND to_state=?", (names[name], old, new)
            ).fetchone()[0]
            assert stored >= n, (name, old, new, stored, n)
        assert sum(cost for cost in (float(c) for _, c in finished)) == pytest.approx(
            0.001 * len(finished))
    finally:
        db.close()
