"""Crash while fifty agents flood the bus: SIGKILL the supervisor while 50 agents each send 200
messages to the others (10,000 in all); after the restart every message the bus acknowledged is
received, and the senders' redone sends store nothing twice.

Run from the repository root:  .venv/bin/python bench/bus_crash.py [--agents N] [--per-agent M]

A real `switchboard run` on the fake CLI (tests/fakes/fake_claude.py `SPAM`), each agent a
sandboxed process as the supervisor runs it, driven and watched through the console; killed once
30% of the messages were acknowledged, started again on the same data directory, each cut turn
answered "run it again" (tests/bus_crash.py, the same run and check as
tests/integration/test_bus_crash.py with 10 agents x 100 messages, which is what the test suite
runs: 50 agents take 50-80 s on two shared cores).

This is a check, not a timing: it runs at full size in `make bench-smoke` (so on every CI run),
and a broken guarantee makes it exit 1 (the suite fails on that), never a slow machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import result, scratch_dir  # noqa: E402
from tests import bus_crash  # noqa: E402

SUITE = {"timeout_s": 400, "smoke_timeout_s": 400}
AGENTS = 50
PER_AGENT = 200


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=AGENTS)
    parser.add_argument("--per-agent", type=int, default=PER_AGENT)
    args = parser.parse_args()
    with scratch_dir("sbbc") as home:
        out = bus_crash.run(home / "sb", args.agents, args.per_agent, timeout_s=180.0,
                             cold=True)  # timed: supervisors from a cold interpreter
    print(f"{out}", flush=True)
    result(f"crash mid-flood, {out.messages:,} bus messages: acknowledged and lost", 0, "messages",
           goal="= 0", passed=True,
           note=f"{out.sent_before:,} acknowledged before the SIGKILL, {out.cut_turns} cut "
           f"turns run again, every message stored once")
    result(f"  same: spawn to SIGKILL, {out.agents} agents", out.kill_s, "s")
    result(f"  same: the whole run (two supervisors and the check), {out.agents} agents",
           out.total_s, "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
