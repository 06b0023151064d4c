"""SIGKILL of the supervisor during ingest from many agents: every turn end, cost and state
change a front end was shown before the kill is in the database after the restart, with every
event of each finished turn (tests/ingest_crash.py has the run and the check). 10 agents here,
each a real sandboxed fake CLI; the same at 300 agents is bench/ingest_crash.py, which
`make bench-smoke` (so CI) runs: 20-70 s, too long for the suite."""

from __future__ import annotations

import pytest

from tests import ingest_crash

pytestmark = [pytest.mark.timeout(120)]

AGENTS = 10
CHUNKS = 200  # events a turn streams
TURNS = 3  # per agent, queued at once


def test_what_was_acknowledged_before_a_sigkill_mid_ingest_is_there_after_restart(short_home):
    out = ingest_crash.run(short_home / "sb", AGENTS, CHUNKS, TURNS)
    assert out.shown_finished >= AGENTS and out.events >= AGENTS * CHUNKS
