"""One fleet on several workers (issue 30): three `switchboard run` processes on one PostgreSQL
database against one, in the same run, with the fake CLI.

Run from the repository root:  .venv/bin/python bench/fleet_pg.py  (or `make bench`)

Needs PostgreSQL's server binaries (Debian's `postgresql` package, or SWITCHBOARD_TEST_PG_BIN):
a throw-away cluster is made as the tests make theirs (tests/pg.py).

* spawn throughput: N spawns asked on one worker's console, until every agent's first turn is
  done (from the database): three workers (the agents placed over the three) against one.
  Goal: three workers >= 2.5x one's. On one host the three share its cores, so this measures
  the placement and the claim path, not the capacity of three hosts.
* kill switch: `switchboard kill` from another data directory (another host) to the last agent
  process gone, three workers against one, the same N agents. Goal: <= 2x one worker's.
* failover: SIGKILL of a worker that runs agents, to its agents idle on the others (claimed,
  resumed), against the hand-over of a worker stopped cleanly (SIGTERM: its leases end at once)
  in the same run. Goal: < 15 s (the bound docs/postgresql.md states).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench._common import quiet_logging, scratch_dir, smoke  # noqa: E402
from bench._figures import Figure, table  # noqa: E402
from supervisor.agents.ownership import FAILOVER_BOUND_S  # noqa: E402
from supervisor.persistence.offline import kill_from_shell  # noqa: E402
from tests.conftest import make_settings, processes_with_tag  # noqa: E402
from tests.pg import Cluster, find_bin  # noqa: E402
from tests.subproc import Supervisor, write_config  # noqa: E402

N = 3 if smoke() else 12
TIMEOUT_S = 240.0


def q(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def poll(pred: Any, what: str, every_s: float = 0.1) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while not (value := pred()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(every_s)
    return value


class Fleet:
    """`workers` supervisors on a fresh database, started one by one (the first coordinates)."""

    def __init__(self, cluster: Cluster, home: Path, name: str, workers: int) -> None:
        cluster.admin(f"CREATE DATABASE {name}")
        self.url = cluster.url(name)
        self.home = home
        self.homes = [home / f"w{i}" for i in range(workers)]
        self.sups: list[Supervisor] = []
        for h in self.homes:
            write_config(h, fake=True, database_url=self.url, allow_unisolated_agents=True)
            self.sups.append(Supervisor(h, cold=True))
            self.sups[-1].expect("Switchboard console", TIMEOUT_S)
        poll(lambda: len(q(self.url, "SELECT 1 FROM workers")) == workers, "the workers")

    def tags(self) -> list[str]:
        # Settings.instance_id: names the data directory in its agents' process tags.
        return [hashlib.sha256(str(h.resolve()).encode()).hexdigest()[:12] + "/"
                for h in self.homes]

    def spawn(self, n: int) -> float:
        """Seconds from the first /spawn to every first turn done."""
        first = self.sups[0]
        started = time.monotonic()
        for i in range(n):
            first.send(f"/spawn a{i:03d} hello {i}")
            first.expect(f"Spawned a{i:03d}", TIMEOUT_S)
        poll(lambda: q(self.url, "SELECT COUNT(*) FROM turns WHERE status = 'ok'")[0][0] >= n,
             "every first turn", 0.05)
        return time.monotonic() - started

    def kill_switch(self) -> float:
        """Seconds from `switchboard kill` on another data directory to no agent process."""
        tags = self.tags()
        poll(lambda: all(processes_with_tag(t) for t in tags), "agents running everywhere")
        elsewhere = make_settings(self.home / "ops", fake=True, database_url=self.url)
        started = time.monotonic()
        kill_from_shell(elsewhere, "bench", "bench")
        poll(lambda: not any(processes_with_tag(t) for t in tags), "no agent", 0.02)
        return time.monotonic() - started

    def pids(self) -> dict[str, int]:
        """live agent's id -> the pid of its worker."""
        return {a: int(o.split(":")[1]) for a, o in q(
            self.url, "SELECT l.agent_id, l.owner FROM agent_leases l JOIN agents a ON a.id ="
                      " l.agent_id WHERE a.state IN ('idle', 'working', 'starting')"
                      " AND l.owner IS NOT NULL")}

    def move(self, sup: Supervisor, sig: signal.Signals) -> float:
        """Seconds from `sig` to the worker's agents idle under another worker."""
        theirs = [a for a, p in self.pids().items() if p == sup.proc.pid]
        started = time.monotonic()
        os.kill(sup.proc.pid, sig)

        def moved() -> bool:
            owners = self.pids()
            return all(owners.get(a, sup.proc.pid) != sup.proc.pid for a in theirs)

        poll(moved, "the agents moved", 0.05)
        return time.monotonic() - started

    def close(self) -> None:
        for sup in self.sups:
            if sup.proc.poll() is None:
                sup.proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(Exception):
                    sup.proc.wait(30)
            sup.close()


def main() -> int:
    quiet_logging()
    bin_dir = find_bin()
    if bin_dir is None:
        print("fleet_pg: no PostgreSQL server binaries (apt-get install postgresql, or set "
              "SWITCHBOARD_TEST_PG_BIN): nothing measured")
        return 0
    cluster = Cluster(bin_dir)
    cluster.start()
    figures: list[Figure] = []
    try:
        with scratch_dir("sbfl") as tmp:
            runs: dict[int, tuple[float, float]] = {}
            for workers in (1, 3):
                fleet = Fleet(cluster, tmp / f"k{workers}", f"bench{workers}", workers)
                try:
                    spawn_s = fleet.spawn(N)
                    runs[workers] = (N / spawn_s, fleet.kill_switch())
                finally:
                    fleet.close()
            fleet = Fleet(cluster, tmp / "fo", "benchfo", 3)
            try:
                fleet.spawn(N)
                handover_s = fleet.move(fleet.sups[1], signal.SIGTERM)
                failover_s = fleet.move(fleet.sups[2], signal.SIGKILL)
            finally:
                fleet.close()
    finally:
        cluster.stop()
    (one_rate, one_kill), (three_rate, three_kill) = runs[1], runs[3]
    verdict = None if smoke() else True
    figures += [
        Figure(f"spawn throughput, 3 workers vs 1 ({N} agents)", ">= 2.5x", three_rate,
               one_rate, "agents/s",
               None if verdict is None else three_rate >= 2.5 * one_rate),
        Figure(f"kill switch to the last process, 3 workers vs 1 ({N} agents)", "<= 2x",
               three_kill * 1000, one_kill * 1000, "ms",
               None if verdict is None else three_kill <= 2 * one_kill),
        Figure("failover: SIGKILL to the agents idle elsewhere (vs a clean stop's hand-over)",
               f"< {FAILOVER_BOUND_S:g} s", failover_s, handover_s, "s",
               None if verdict is None else failover_s < FAILOVER_BOUND_S),
    ]
    print(table(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
