"""The fleets bench/scale_out.py measures: `switchboard run` workers (console front end, fake CLI)
on one database of a throw-away PostgreSQL server, started and watched with the helpers of
tests/integration/test_pg_fleet.py (tests/pg.py `Cluster`, tests/subproc.py `Supervisor` and
`write_config`). Every time here is read from the database's rows (the workers' own stamps: one
machine, one clock) or taken by the kill-switch bench's /proc watcher, never by polling."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg

from bench.killswitch_latency import Watcher
from supervisor.agents.ownership import RENEW_S
from supervisor.persistence.offline import kill_from_shell
from tests.conftest import make_settings, processes_with_tag
from tests.integration.test_pg_fleet import owners, tag_of
from tests.pg import Cluster
from tests.subproc import Supervisor, write_config

# Limits out of the way: the bench measures throughput, not the guardrails that cap it.
LIMITS: dict[str, object] = {
    "spawns_per_minute": 100_000, "commands_per_minute": 100_000,
    "messages_per_minute": 100_000, "memory_refuse_pct": 100, "max_agents": 1_000,
    "bus_inbox_cap": 1_000_000, "bus_pair_limit": 1_000_000, "bus_rate_alarm_per_min": 10**8,
    "bus_round_limit": 1_000_000,
}
START_TIMEOUT_S = 120.0
POLL_S = 0.25
SENT = re.compile(r"SPAM SENT (\d+) of")  # the fake CLI's report of a SPAM turn


def log(text: str) -> None:
    print(text, flush=True)


@dataclass(frozen=True, slots=True)
class Spawned:
    agents: int
    seconds: float  # first /spawn sent -> the last agent idle after its first turn
    placed: dict[int, int]  # worker pid -> agents it runs
    cpu_s: float  # CPU the workers, the agents' processes and the database used meanwhile
    cpu_wall_s: float  # the wall time `cpu_s` was counted over (the spawn and the wait after)

    @property
    def rate(self) -> float:
        return self.agents / self.seconds

    @property
    def cores(self) -> float:
        """Cores kept busy on average while the agents were spawned."""
        return self.cpu_s / self.cpu_wall_s


class Fleet:
    """`workers` supervisors on a fresh database of `cluster`; the first is started first, so
    it is the coordinator, and every command is typed on its console."""

    def __init__(self, cluster: Cluster, root: Path, workers: int, label: str) -> None:
        self.cluster = cluster
        self.root = root
        self.url = cluster.new_database()
        self.homes = [root / f"{label}{i}" for i in range(1, workers + 1)]
        self.sups: list[Supervisor] = []
        self.dead: list[Supervisor] = []  # stopped on purpose (a failover, a hand-over)
        self.conn = psycopg.connect(self.url, autocommit=True)

    def __enter__(self) -> Fleet:
        try:
            for home in self.homes:  # one by one: the first coordinates
                write_config(home, fake=True, database_url=self.url,
                             allow_unisolated_agents=True, **LIMITS)
                self.sups.append(Supervisor(home, cold=True))  # as deployed: no test zygote
                self.sups[-1].expect("Switchboard console", START_TIMEOUT_S)
            self.wait(lambda: self.one("SELECT COUNT(*) FROM workers") == len(self.homes), 30,
                      "every worker registered")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for sup in self.sups:
            if sup.proc.poll() is None:
                sup.proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(Exception):
                    sup.proc.wait(60)
            sup.close()
        tags = [tag_of(h) for h in self.homes]
        for proc in [p for t in tags for p in processes_with_tag(t)]:  # none, normally
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
        self.conn.close()
        with contextlib.suppress(Exception):
            self.cluster.drop_database(self.url)

    # -- the database, read by the bench ----------------------------------------------------

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(sql, params).fetchall()]

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.rows(sql, params)[0][0]

    def wait(self, done: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}; the "
                                   f"first worker's output:\n" + "\n".join(
                                       self.sups[0].seen[-30:]))
            for sup in self.sups:
                if sup.proc.poll() is not None and sup not in self.dead:
                    raise RuntimeError(f"worker {sup.proc.pid} exited while waiting for {what}:"
                                       "\n" + "\n".join(sup.rest()[-30:]))
            time.sleep(POLL_S)

    def placed(self) -> dict[int, int]:
        return dict(Counter(owners(self.url).values()))

    def tags(self) -> list[str]:
        return [tag_of(h) for h in self.homes]

    # -- what is measured -------------------------------------------------------------------

    def spawn(self, n: int, timeout: float) -> Spawned:
        """`n` agents spawned from the first worker's console, one /spawn line each, sent at
        once: from the first line sent to the last agent idle after its first turn."""
        names = [f"s{i:03d}" for i in range(n)]
        cpu0 = self.cpu()
        t0 = time.time()
        for name in names:
            self.sups[0].send(f"/spawn {name} hello from {name}")
        self.wait(lambda: self.one("SELECT COUNT(*) FROM turns WHERE status = 'ok'") >= n
                  and self.one("SELECT COUNT(*) FROM agents WHERE state = 'idle'") >= n,
                  timeout, f"{n} agents idle after their first turn")
        # Each agent's first idle after a finished turn (the runner's own stamp).
        last = self.one("SELECT MAX(first_idle) FROM (SELECT a.id, MIN(t.at) AS first_idle "
                        "FROM agents a JOIN agent_transitions t ON t.agent_id = a.id WHERE "
                        "t.to_state = 'idle' AND t.at >= (SELECT MIN(u.ended_at) FROM turns u "
                        "WHERE u.agent_id = a.id AND u.status = 'ok') GROUP BY a.id) f")
        cpu_s = self.cpu() - cpu0
        return Spawned(n, float(last) - t0, self.placed(), cpu_s, time.time() - t0)

    def cpu(self) -> float:
        """CPU seconds (user + system) used so far by the live workers, every agent process
        alive now and the database server, with their reaped children (the sandbox's
        short-lived steps, the server's ended backends)."""
        procs = [psutil.Process(s.proc.pid) for s in self.sups if s not in self.dead]
        server = psutil.Process(int((self.cluster.data / "postmaster.pid").read_text().split()[0]))
        procs += [server, *server.children()]
        procs += [p for t in self.tags() for p in processes_with_tag(t)]
        total = 0.0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                c = proc.cpu_times()
                total += c.user + c.system + c.children_user + c.children_system
        return total

    def bus(self, per_agent: int, timeout: float) -> tuple[int, float]:
        """Every live agent sends `per_agent` bus messages to the next one in a ring that
        alternates workers (`SPAM`, the fake CLI's send_message loop). (messages, seconds from
        the first message stored to the last one consumed by its recipient's turn)."""
        # A worker learns of the agents other workers run at its lease renewals: a message to
        # one it does not know of yet is refused ("no live agent"). Two renewals first.
        time.sleep(2 * RENEW_S + 0.5)
        by_worker: dict[int, list[str]] = {}
        for name, pid in sorted(owners(self.url).items()):
            by_worker.setdefault(pid, []).append(name)
        ring: list[str] = []
        columns = list(by_worker.values())
        for i in range(max(len(c) for c in columns)):
            ring += [c[i] for c in columns if i < len(c)]
        for i, name in enumerate(ring):
            self.sups[0].send(f"/ask {name} SPAM {per_agent} {ring[(i + 1) % len(ring)]}")
        total = per_agent * len(ring)
        agent_sent = ("FROM bus_deliveries d JOIN bus_messages m ON m.id = d.message_id "
                      "WHERE m.sender IN (SELECT id FROM agents)")

        def sent() -> list[int]:  # each sender's count, once its SPAM turn is over
            return [int(m.group(1)) for (text,) in self.rows(
                "SELECT result_text FROM turns WHERE result_text LIKE '%%SPAM SENT%%'")
                for m in [SENT.search(text)] if m]

        def done() -> bool:
            if self.one(f"SELECT COUNT(*) {agent_sent} AND d.state = 'consumed'") >= total:
                return True
            return len(sent()) == len(ring) and not self.one(
                f"SELECT COUNT(*) {agent_sent} AND d.state <> 'consumed'")

        try:
            self.wait(done, timeout, f"{total} bus messages consumed")
        except TimeoutError as exc:  # where they are: the deliveries, the senders' turns
            states = self.rows(f"SELECT d.state, COUNT(*) {agent_sent} GROUP BY d.state")
            turns = self.rows("SELECT status, COUNT(*) FROM turns GROUP BY status")
            raise TimeoutError(f"{exc}\ndeliveries by state {states}; SPAM turns over "
                               f"{len(sent())} of {len(ring)}; turns by status {turns}") from None
        if sum(sent()) < total:
            raise RuntimeError(f"{total - sum(sent())} of {total} messages were refused")
        first, last = self.rows(f"SELECT MIN(m.created_at), MAX(d.consumed_at) {agent_sent}")[0]
        return total, float(last) - float(first)

    def kill_switch(self) -> tuple[int, float]:
        """`switchboard kill` on another data directory (another host, as far as the workers
        can tell): (agent processes, seconds from the call to the last of them gone). Every
        worker learns of it from the shared halt flag."""
        pids = [p.pid for t in self.tags() for p in processes_with_tag(t)]
        if not pids:
            raise RuntimeError("no agent process to kill")
        watcher = Watcher(pids)
        ops = make_settings(self.root / "ops", fake=True, database_url=self.url)
        t0 = time.monotonic()
        watcher.go()
        done = kill_from_shell(ops, "bench@cli", "scale-out bench")
        end, _ = asyncio.run(watcher.gone_at())
        if done.problems:
            raise RuntimeError(f"switchboard kill: {done.problems}")
        left = [p.pid for t in self.tags() for p in processes_with_tag(t)]
        if left:
            raise RuntimeError(f"agent processes left after the kill switch: {left}")
        return len(pids), end - t0

    def move(self, victim: Supervisor, sig: signal.Signals, timeout: float) -> tuple[int, float]:
        """`sig` to a worker (SIGKILL: a failover; SIGTERM: a clean stop, whose leases end at
        once): (its agents, seconds from the signal to the last of them adopted by another
        worker and idle with the restart: claimed, its cut state reported, the restart note
        waiting for its next turn; the CLI process starts with that turn, as after any
        restart)."""
        pid = victim.proc.pid
        mine = sorted(n for n, p in owners(self.url).items() if p == pid)
        if not mine:
            raise RuntimeError(f"worker {pid} runs no agent")
        self.dead.append(victim)
        alive = {s.proc.pid for s in self.sups if s not in self.dead}
        t0 = time.time()
        os.kill(pid, sig)
        marks = ",".join(["%s"] * len(mine))
        restarted = (f"SELECT a.name, MAX(t.at) FROM agents a JOIN agent_transitions t ON "
                     f"t.agent_id = a.id WHERE a.name IN ({marks}) AND a.state = 'idle' AND "
                     f"t.reason LIKE 'supervisor restarted%%' AND t.at >= %s GROUP BY a.name")

        def moved() -> bool:
            if len(self.rows(restarted, (*mine, t0))) < len(mine):
                return False
            placed = owners(self.url)
            return all(placed.get(n) in alive for n in mine)

        self.wait(moved, timeout, f"{len(mine)} agents of worker {pid} resumed elsewhere")
        last = max(float(at) for _, at in self.rows(restarted, (*mine, t0)))
        return len(mine), last - t0
