"""Scale-out (issue 30, acceptance 4): one fleet on three workers against the same on one worker.

Run from the repository root:  .venv/bin/python bench/scale_out.py
(or `make bench ONLY=scale_out`; BENCH_SMOKE=1 for tiny sizes)

A throw-away PostgreSQL server (tests/pg.py, Debian's binaries) and, in the same run, two
fleets of `switchboard run` workers on fresh databases of it, each worker a process of its own
with the console front end and the fake CLI (tests/fakes/fake_claude.py), every agent in its
sandbox, every command typed on the first worker's console (bench/_scale_out_fleet.py):

1. spawn throughput: N agents (SPAWN_N; smoke 6) spawned with one `/spawn` line each, all sent
   at once: agents/s from the first line sent to the last agent idle after its first turn (the
   runner's own stamp in `agent_transitions`). On three workers the placer spreads them
   (N/3 each); each placement NOTIFYs its worker, which claims the agent at once (store/leases.py
   `wakeups`; its lease renewal every 2 s is the fallback). Goal: three workers >= 2.5x one
   worker's.
2. bus throughput: every agent sends PER_AGENT messages (`SPAM`, the fake CLI's send_message
   loop, one MCP call each) to the next agent of a ring that alternates workers, so on three
   workers every message crosses to another worker; messages/s from the first stored to the
   last consumed by its recipient's turn. A stored message for an agent on another worker
   NOTIFYs that worker, which reads the bus's counts at once (its lease renewal every 2 s is the
   fallback). The issue sets no goal for it: reported.
3. kill switch: `switchboard kill` from another data directory (`kill_from_shell`, as from
   another host): from the call to the last agent process gone on every worker (the /proc
   watcher of bench/killswitch_latency.py, started with every agent process's pid). The flag's
   write NOTIFYs every worker, which reads it at once (supervisor/guard/killswitch.py
   `hear_database`; its poll every second is the fallback). Goal: three workers <= 2x one
   worker's.
4. failover (three workers only, a third fleet; FAILOVER_K agents per worker, 3K spawned):
   SIGKILL of a worker to the last of its agents adopted by another worker and idle with the
   restart (claimed, its cut state reported, the restart note waiting for its next turn; as
   after any restart its CLI starts with that turn). Goal: under 15 s, which is the lease's
   10 s TTL, a renewal's 2 s and the adoption (supervisor/agents/ownership.py
   FAILOVER_BOUND_S). Its baseline, in the same fleet just before: the hand-over of a worker
   stopped cleanly (SIGTERM: its leases end at once, so only a renewal's wait and the adoption).

The baseline of 1-3 is the one-worker fleet of the same run; under BENCH_SMOKE=1 the figures are
printed without a verdict (tiny sizes, no timing judged). **The machine's cores are shared:**
every worker, every agent and the database run on the same few cores (2 here), so three
workers add no hardware; a throughput ratio across workers measures how much of a worker's
own work is serial (one event loop, one Python thread) and how well several supervisors
overlap on the same cores, not the capacity three hosts would have. On three real hosts the
agents' own processes (most of a spawn's CPU) would be spread too.

Without PostgreSQL's server binaries (Debian's `postgresql` package) the bench prints that it
was skipped and why, as one row without a goal; under CI (`CI=true`, which installs them) it
fails instead.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import quiet_logging, result, scratch_dir, smoke  # noqa: E402
from bench._figures import Figure, table  # noqa: E402
from bench._scale_out_fleet import Fleet, Spawned, log  # noqa: E402
from tests.pg import Cluster, find_bin, in_ci, started  # noqa: E402

SUITE = {"timeout_s": 900, "smoke_timeout_s": 300}  # three fleets, each three cold workers
SPAWN_N = 6 if smoke() else 60
PER_AGENT = 5 if smoke() else 20
FAILOVER_K = 2 if smoke() else 10
SPAWN_GOAL = 2.5  # three workers' agents/s >= this x one worker's
KILL_GOAL = 2.0  # three workers' kill switch <= this x one worker's
FAILOVER_GOAL_S = 15.0
TIMEOUT_S = 120.0 if smoke() else 300.0


def skipped(reason: str) -> int:
    """No server to run on: a failure under CI (which installs one), else said and skipped."""
    if in_ci():
        print(f"scale_out: PostgreSQL is required under CI: {reason}", file=sys.stderr)
        return 1
    log(f"scale_out skipped: {reason} (apt-get install postgresql, or set "
        "SWITCHBOARD_TEST_PG_BIN; CI=true makes this an error)")
    result("scale-out (skipped: no PostgreSQL server binaries)", 0, "", note=reason)
    return 0


def one_fleet(cluster: Cluster, root: Path, workers: int) -> tuple[Spawned, float, float, int,
                                                                     float]:
    """(spawned, bus msg/s, bus messages, agent processes killed, kill switch seconds)."""
    label = "one" if workers == 1 else "three"
    log(f"== {label} worker(s): starting")
    with Fleet(cluster, root, workers, label[0]) as fleet:
        spawned = fleet.spawn(SPAWN_N, TIMEOUT_S)
        log(f"{label}: {spawned.agents} agents in {spawned.seconds:.2f} s = "
            f"{spawned.rate:.2f} agents/s; placed (worker pid: agents) {spawned.placed}; "
            f"CPU used meanwhile (workers, agents, database) {spawned.cpu_s:.2f} s in "
            f"{spawned.cpu_wall_s:.2f} s = {spawned.cores:.2f} cores busy of {os.cpu_count()}")
        messages, bus_s = fleet.bus(PER_AGENT, TIMEOUT_S)
        log(f"{label}: {messages} bus messages in {bus_s:.2f} s = {messages / bus_s:.1f} msg/s")
        procs, kill_s = fleet.kill_switch()
        log(f"{label}: kill switch, {procs} agent processes gone in {kill_s * 1000:.0f} ms")
        log(f"{label}: load average {os.getloadavg()}")
    return spawned, messages / bus_s, messages, procs, kill_s


def failover(cluster: Cluster, root: Path) -> tuple[int, float, int, float]:
    """(agents handed over, seconds; agents failed over, seconds) on a fleet of three."""
    log("== failover: three workers")
    with Fleet(cluster, root, 3, "f") as fleet:
        spawned = fleet.spawn(3 * FAILOVER_K, TIMEOUT_S)
        log(f"failover fleet placed {spawned.placed}")
        handed, handover_s = fleet.move(fleet.sups[1], signal.SIGTERM, TIMEOUT_S)
        log(f"clean stop: {handed} agents resumed elsewhere {handover_s:.2f} s after the "
            "SIGTERM")
        moved, failover_s = fleet.move(fleet.sups[2], signal.SIGKILL, TIMEOUT_S)
        log(f"failover: {moved} agents resumed elsewhere {failover_s:.2f} s after the SIGKILL")
    return handed, handover_s, moved, failover_s


def main() -> int:
    # Ended by the suite's time limit or ^C: the workers and the server are still cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    quiet_logging()
    bin_dir = find_bin()
    if bin_dir is None:
        return skipped("no initdb found (Debian's postgresql package, or the directory "
                       "SWITCHBOARD_TEST_PG_BIN names)")
    started_at = time.monotonic()
    try:
        cluster = started(bin_dir)
    except Exception as exc:  # noqa: BLE001 - a server that cannot start is this bench failing
        print(f"scale_out: the PostgreSQL server did not start: {exc}", file=sys.stderr)
        return 1
    log(f"load average at the start {os.getloadavg()}")
    try:
        with scratch_dir("sbso") as root:  # short: socket paths
            one = one_fleet(cluster, root, 1)
            three = one_fleet(cluster, root, 3)
            handed, handover_s, moved, failover_s = failover(cluster, root)
    finally:
        cluster.stop()
    load = os.getloadavg()
    (s1, bus1, _, procs1, kill1), (s3, bus3, n_bus, procs3, kill3) = one, three

    def verdict(ok: bool) -> bool | None:
        return None if smoke() else ok

    figures = [
        Figure(f"spawn throughput, {SPAWN_N} agents, 3 workers vs 1", f">= {SPAWN_GOAL}x",
               s3.rate, s1.rate, "agents/s", verdict(s3.rate >= SPAWN_GOAL * s1.rate)),
        Figure(f"kill switch -> last process, {procs3} procs on 3 workers vs 1",
               f"<= {KILL_GOAL}x", kill3 * 1000, kill1 * 1000, "ms",
               verdict(kill3 <= KILL_GOAL * kill1)),
        Figure(f"bus throughput, {n_bus} msgs across 3 workers vs 1", "none (reported)",
               bus3, bus1, "msg/s", None),
        Figure(f"failover, SIGKILL of a worker -> its {moved} agents idle elsewhere (vs a "
               f"clean stop's {handed})", f"< {FAILOVER_GOAL_S:g} s", failover_s, handover_s,
               "s", verdict(failover_s < FAILOVER_GOAL_S)),
    ]
    print(table(figures), flush=True)
    log(f"one worker: {procs1} agent processes at the kill switch; spawn CPU: one worker "
        f"{s1.cores:.2f} cores busy, three {s3.cores:.2f}, of {os.cpu_count()}; took "
        f"{time.monotonic() - started_at:.0f} s; load average at the end {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
