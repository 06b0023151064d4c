"""One fleet on three workers (issue 30): three `switchboard run` processes (console, fake CLI) on
one PostgreSQL database. Spawns asked on one worker land on all three (placement); a bus message,
an /ask, a pause and an approval cross workers; a schedule made on a standby worker fires once
per slot; SIGKILL of the coordinator in the middle of a turn: another worker takes the role, and
its agents are resumed on the other two exactly once (epoch 2, one restart, the cut turn reported
and never replayed, the restart note in the next turn); a worker cut from the database (its
connections refused) halts its agents within the bound; `switchboard kill` from another host
leaves no agent process on any worker."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from store.agents import LIVE_STATES
from supervisor.agents.handover import TAKEOVER_REASON
from supervisor.agents.ownership import FAILOVER_BOUND_S, HALT_BOUND_S
from supervisor.coordinator import TAKEOVER_BOUND_S
from supervisor.persistence.offline import kill_from_shell
from tests.conftest import make_settings, processes_with_tag
from tests.pg import database, pg_cluster
from tests.subproc import Supervisor, write_config

__all__ = ["database", "pg_cluster"]
pytestmark = pytest.mark.timeout(300)
T = TypeVar("T")
SLACK_S = 10.0  # two shared cores, three supervisors and their agents: a loaded machine


def settle(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """tests/conftest.py's, polling less often: each poll here is a database connection."""
    deadline = time.monotonic() + timeout
    while True:
        if result := predicate():
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.3)


def tag_of(home: Path) -> str:
    """The agents' process tag of a data directory (Settings.instance_id)."""
    return hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12] + "/"


def q(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def owners(url: str) -> dict[str, int]:
    """live agent's name -> the pid of the worker owning it (0: not claimed yet)."""
    return {name: int(owner.split(":")[1]) if owner else 0 for name, owner in q(
        url, "SELECT a.name, l.owner FROM agents a JOIN agent_leases l ON l.agent_id = a.id"
             f" WHERE a.state IN {LIVE_STATES!r}")}


def turns_of(url: str, name: str) -> list[tuple[str, str]]:
    """(status, prompt) of the agent's turns, oldest first."""
    return [(s, p) for s, p in q(url, "SELECT t.status, t.prompt FROM turns t JOIN agents a ON"
                                      " a.id = t.agent_id WHERE a.name = %s ORDER BY t.id",
                                 (name,))]


class Gate:
    """A TCP door to the server's Unix socket, for one worker: `cut` closes it and every
    connection through it, so the worker's connections fail and new ones are refused."""

    def __init__(self, socket_path: str) -> None:
        self.target = socket_path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.closed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.closed:
                client.close()
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.target)
            with self.lock:
                self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):  # wakes the accept (a close alone would not)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self.lock:
            for s in self.open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


def through(url: str, gate: Gate) -> str:
    """The database URL by way of the gate (the server's socket directory is in the URL)."""
    base, _, _query = url.partition("?")
    return base.replace("postgresql://postgres@/", f"postgresql://postgres@127.0.0.1:"
                                                   f"{gate.port}/")


def test_three_workers_one_fleet_placement_failover_cut_and_kill(
        short_home: Path, database: str) -> None:
    socket_dir = database.partition("?host=")[2]
    gate = Gate(f"{socket_dir}/.s.PGSQL.5432")
    homes = [short_home / f"w{i}" for i in (1, 2, 3)]
    urls = [database, database, through(database, gate)]  # the third can be cut
    sups: list[Supervisor] = []
    try:
        for home, url in zip(homes, urls, strict=True):  # one by one: the first coordinates
            write_config(home, fake=True, database_url=url, allow_unisolated_agents=True)
            sups.append(Supervisor(home))
            sups[-1].expect("Switchboard console", 120)
        settle(lambda: len(q(database, "SELECT 1 FROM workers")) == 3, 30, "three workers")
        run_fleet(database, sups, homes, gate)
    finally:
        gate.cut()
        for sup in sups:
            sup.stop()


def run_fleet(url: str, sups: list[Supervisor], homes: list[Path], gate: Gate) -> None:
    w1, w2, w3 = sups
    pid_of = {s.proc.pid: s for s in sups}
    # Six spawns, all asked on the first worker: two land on each.
    names = [f"f{i}" for i in range(6)]
    for name in names:
        w1.send(f"/spawn {name} hello from {name}")
        w1.expect(f"Spawned {name}", 60)
    settle(lambda: len(q(url, "SELECT 1 FROM turns WHERE status = 'ok'")) == 6, 90,
           "every first turn done")
    placed = owners(url)
    assert sorted(Counter(placed.values()).values()) == [2, 2, 2], placed
    assert set(placed.values()) == set(pid_of), placed
    for name in names:  # each ran where it was placed, once
        [(status, prompt)] = turns_of(url, name)
        assert status == "ok" and f"hello from {name}" in prompt

    # A schedule made on a worker that is not the coordinator: the coordinator fires it, once
    # per slot (checked at the end, after a coordinator was SIGKILLed and another took over).
    w2.send("/cron add * * * * * new:tick say tick")
    w2.expect("/cron confirm", 30)
    w2.send("/cron confirm")
    w2.expect("Created schedule", 30)

    # A bus message stored on the first worker reaches an agent on another.
    far = next(n for n, p in placed.items() if p == w2.proc.pid)
    w1.send(f"/send {far} PING across")
    settle(lambda: any(s == "ok" and "PING across" in p for s, p in turns_of(url, far)), 30,
           "the message turned on the other worker")
    w1.send(f"/ask {far} ASK across")  # an /ask too: on the bus, which its worker reads
    settle(lambda: any(s == "ok" and "ASK across" in p for s, p in turns_of(url, far)), 30,
           "the /ask turned on the other worker")
    # A pause asked on the first worker, carried out by the owner through the cancel column.
    w1.send(f"/pause {far}")
    settle(lambda: q(url, "SELECT state FROM agents WHERE name = %s", (far,)) == [("paused",)],
           20, "paused by its worker")
    w1.send(f"/resume {far}")
    settle(lambda: q(url, "SELECT state FROM agents WHERE name = %s", (far,)) == [("idle",)],
           20, "resumed by its worker")

    # A permission request of an agent on another worker, approved on the first worker (the
    # coordinator's chat): the answer reaches the call waiting on the agent's worker.
    [(w2_id,)] = q(url, "SELECT id FROM workers WHERE pid = %s", (w2.proc.pid,))
    w1.send(f'/spawn asker --host {w2_id} ASKTOOL Bash {{"command": "make deploy"}}')
    w1.expect("Spawned asker", 60)
    [(esc_id, agent_of)] = settle(lambda: q(
        url, "SELECT id, agent_id FROM escalations WHERE kind = 'permission' AND status ="
             " 'open'"), 30, "the permission request")
    assert owners(url)["asker"] == w2.proc.pid
    w1.send(f"/approve {esc_id}")
    settle(lambda: q(url, "SELECT result_text FROM turns WHERE agent_id = %s AND status ="
                          " 'ok'", (agent_of,)), 30, "the asker's turn ended")
    assert q(url, "SELECT result_text FROM turns WHERE agent_id = %s", (agent_of,)) == [
        ("TOOL ALLOWED",)]

    # SIGKILL of the coordinator in the middle of a turn.
    [(coord_pid,)] = q(url, "SELECT pid FROM workers WHERE coordinator = 1")
    dead = pid_of[coord_pid]
    alive = [s for s in sups if s is not dead]
    victims = sorted(n for n, p in placed.items() if p == coord_pid)
    busy = victims[0]
    alive[0].send(f"/send {busy} SLEEP 120")
    settle(lambda: "running" in [st for st, _ in turns_of(url, busy)], 30,
           "the turn running on the coordinator")
    os.kill(coord_pid, signal.SIGKILL)
    killed_at = time.monotonic()
    settle(lambda: [p for (p,) in q(url, "SELECT pid FROM workers WHERE coordinator = 1")
                    if p != coord_pid], TAKEOVER_BOUND_S + SLACK_S, "a new coordinator")
    moved = settle(lambda: (lambda o: o if all(o[v] not in (coord_pid, 0) for v in victims)
                            else None)(owners(url)), FAILOVER_BOUND_S + SLACK_S,
                   "the dead worker's agents claimed elsewhere")
    settle(lambda: all(q(url, "SELECT state FROM agents WHERE name = %s", (v,)) == [("idle",)]
                       for v in victims), 20, "resumed, idle")
    took = time.monotonic() - killed_at
    assert took < FAILOVER_BOUND_S + SLACK_S, took
    assert all(moved[v] in {s.proc.pid for s in alive} for v in victims), moved
    for v in victims:  # exactly once: one claim, one restart, the cut turn not replayed
        assert q(url, "SELECT l.epoch FROM agent_leases l JOIN agents a ON a.id = l.agent_id"
                      " WHERE a.name = %s", (v,)) == [(2,)]
        restarts = q(url, "SELECT COUNT(*) FROM agent_transitions t JOIN agents a ON a.id ="
                          " t.agent_id WHERE a.name = %s AND t.reason LIKE 'supervisor"
                          " restarted%%'", (v,))
        assert restarts == [(1,)], (v, restarts)
    ran = turns_of(url, busy)
    assert [st for st, _ in ran][-1:] == ["interrupted"] and "SLEEP 120" in ran[-1][1], ran
    assert sum(1 for _, p in ran if "SLEEP 120" in p) == 1  # never run again
    [(reports,)] = q(url, "SELECT COUNT(*) FROM escalations WHERE title LIKE %s",
                     (f"{busy}: a turn was interrupted ({TAKEOVER_REASON})",))
    assert reports == 1
    # Its next turn carries the restart note, and says its last turn was cut.
    alive[0].send(f"/send {busy} after the move")
    settle(lambda: any(s == "ok" and "after the move" in p for s, p in turns_of(url, busy)),
           30, "a turn after the move")
    [(cwd,)] = q(url, "SELECT cwd FROM agents WHERE name = %s", (busy,))
    notes = (Path(cwd) / "switchboard-notes.log").read_text()
    assert notes.count("was restarted") == 1 and "interrupted" in notes, notes
    assert len(turns_of(url, busy)) == len(ran) + 1

    # The schedule fired, once per slot, each run one agent with one turn.
    runs = settle(lambda: q(url, "SELECT slot_key, agent_id FROM schedule_runs WHERE status ="
                                 " 'ran'"), 90, "a scheduled run")
    [(slots, distinct)] = q(url, "SELECT COUNT(*), COUNT(DISTINCT slot_key) FROM"
                                 " schedule_runs")
    assert slots == distinct, runs
    for _, agent_id in runs:
        assert q(url, "SELECT COUNT(*) FROM turns WHERE agent_id = %s", (agent_id,)) == [(1,)]
    assert len(q(url, "SELECT 1 FROM agents WHERE name LIKE 'tick-%%'")) == slots

    # The worker behind the gate is cut from the database: it halts its agents.
    cut = sups[2]
    assert cut is not dead  # the first worker coordinates
    mine = [n for n, p in owners(url).items() if p == cut.proc.pid]
    tag = tag_of(homes[2])
    settle(lambda: processes_with_tag(tag), 30, "the cut worker's agents running")
    assert mine
    gate.cut()
    cut_at = time.monotonic()
    try:
        settle(lambda: not processes_with_tag(tag), HALT_BOUND_S + SLACK_S,
               "the cut worker's agents ended")
    except AssertionError as exc:
        log = (homes[2] / "switchboard.log").read_text().splitlines()
        raise AssertionError(f"{exc}; its log:\n" + "\n".join(log[-60:])) from None
    assert time.monotonic() - cut_at < HALT_BOUND_S + SLACK_S
    # ... and the last worker takes them over once their leases expire.
    survivor = next(s for s in alive if s is not cut)
    # (A scheduled run's agent among them may have stopped meanwhile, its run over: no longer
    # live, it is nobody's to take over.)
    settle(lambda: (lambda o: all(o.get(n, survivor.proc.pid) == survivor.proc.pid
                                  for n in mine))(owners(url)),
           FAILOVER_BOUND_S + SLACK_S, "the cut worker's agents taken over")

    # The kill switch from another host: no agent process left on any worker.
    elsewhere = make_settings(homes[0].parent / "ops", fake=True, database_url=url)
    done = kill_from_shell(elsewhere, "ops@cli", "from afar")
    assert done.problems == (), done.problems
    tags = [tag_of(h) for h in homes]
    settle(lambda: not any(processes_with_tag(t) for t in tags), 20, "no agent anywhere")
