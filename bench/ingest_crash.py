"""Crash during 300-agent ingest (issue 11 item 6): SIGKILL the supervisor while 300 agents
stream; every turn, cost and state change acknowledged before the kill is there after restart.

Run from the repository root:  .venv/bin/python bench/ingest_crash.py [--agents N]

A real `switchboard run` on the fake CLI (tests/fakes/fake_claude.py), each agent a sandboxed
process as the supervisor runs it, driven and watched through the console: 300 agents spawned,
each streaming 100 events a turn with a second turn queued; once 300 turn ends have been shown,
SIGKILL. The supervisor is started again on the same data directory, and the database must hold
every turn end the console showed (status, cost, the cost ledger and the agent's totals, every
event the turn streamed) and every state change it showed (tests/ingest_crash.py, the same check
as tests/integration/test_ingest_crash.py with 10 agents, which is what the test suite runs: 300
sandboxed agents take 20-70 s on two shared cores).

This is a check, not a timing: it runs at full size in `make bench-smoke` (so on every CI run),
and a broken guarantee makes it exit 1 (the suite fails on that), never a slow machine. The rows
it prints say how much was acknowledged and checked, and how long the run took.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import result, scratch_dir  # noqa: E402
from tests import ingest_crash  # noqa: E402

SUITE = {"timeout_s": 400, "smoke_timeout_s": 400}
AGENTS = 300
CHUNKS = 100  # events a turn streams
TURNS = 2  # per agent, queued at once
TIMEOUT_S = 180.0  # for any one line the console must show


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=AGENTS)
    args = parser.parse_args()
    n = args.agents
    with scratch_dir("sbic") as home:
        out = ingest_crash.run(
            home / "sb", n, CHUNKS, TURNS, timeout_s=TIMEOUT_S, cold=True,  # timed: cold starts
            max_agents=n + 10, spawns_per_minute=100_000, commands_per_minute=100_000,
            messages_per_minute=100_000, memory_refuse_pct=100.0, memory_warn_pct=100.0,
            stall_s=3600.0)
    print(f"{out}", flush=True)
    result(f"crash mid-ingest, {n} agents: acknowledged and lost", 0, "items", goal="= 0",
           passed=True, note=f"{out.shown_finished} turn ends with their costs and "
           f"{out.shown_changes} state changes shown before the SIGKILL, all stored")
    result(f"  same: events stored after the restart, {n} agents", out.events, "events")
    result(f"  same: spawn to SIGKILL, {n} agents", out.kill_s, "s")
    result(f"  same: the whole run (two supervisors and the check), {n} agents", out.total_s,
           "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
