"""Workers and the coordinator on one PostgreSQL database (issue 30): two `switchboard run`
processes (fake CLI, no console, an HTTP port each, one Telegram bot on the fake Bot API)
both register with a heartbeat on the database's clock, exactly one holds the coordinator
role and answers the chat (the other is ready, on standby), and after a SIGKILL of that one the
other takes the role and answers the chat within the bound docs/postgresql.md states."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from supervisor.coordinator import TAKEOVER_BOUND_S
from supervisor.workers import HEARTBEAT_S
from tests.conftest import free_port, settle
from tests.fakes.fake_telegram import FakeTelegram
from tests.pg import database, pg_cluster
from tests.subproc import Supervisor, write_config

__all__ = ["database", "pg_cluster"]
pytestmark = pytest.mark.timeout(180)
ADMIN = 100


def workers(url: str) -> list[tuple[Any, ...]]:
    """(pid, coordinator, seconds since the heartbeat) per worker row."""
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT pid, coordinator, EXTRACT(EPOCH FROM now()) - heartbeat_at FROM workers"
            " ORDER BY pid").fetchall()]


def rows_if(url: str, wanted: Callable[[list[tuple[Any, ...]]], bool],
            ) -> list[tuple[Any, ...]] | None:
    rows = workers(url)
    return rows if wanted(rows) else None


def holders(url: str) -> list[int]:
    """The server-side pids of the sessions holding the coordinator's advisory lock."""
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND objid = %s", (0x5B_0003,)).fetchall()]


def status_answer(fake: FakeTelegram, timeout_s: float) -> str:
    """The admin sends /status; the text of the bot's answer (whichever worker gives it)."""
    before = len(fake.texts(ADMIN))
    fake.user_sends(ADMIN, "/status")
    return settle(lambda: next((t for t in fake.texts(ADMIN)[before:]
                                if t.startswith("Switchboard:")), None), timeout_s,
                  "an answer to /status")


def ready(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_two_workers_one_coordinator_and_a_takeover_after_sigkill(
        short_home: Path, database: str) -> None:
    sups: list[Supervisor] = []
    ports: dict[int, int] = {}  # supervisor pid -> its HTTP port
    with FakeTelegram() as fake:
        fake.add_chat(ADMIN, first_name="alice", username="alice")
        try:
            for name in ("w1", "w2"):
                home = short_home / name
                write_config(home, fake=True, database_url=database)
                port = free_port()
                sups.append(Supervisor(home, console=False, env={
                    "SWITCHBOARD_HTTP_PORT": str(port), "TELEGRAM_BOT_TOKEN": fake.token,
                    "TELEGRAM_API_BASE_URL": fake.url, "TELEGRAM_ADMIN_IDS": str(ADMIN)}))
                ports[sups[-1].proc.pid] = port
            run_two(sups, ports, fake, database)
        finally:
            for sup in sups:
                if sup.proc.poll() is None:
                    sup.proc.send_signal(signal.SIGTERM)
                    sup.proc.wait(30)
                sup.close()


def run_two(sups: list[Supervisor], ports: dict[int, int], fake: FakeTelegram,
            database: str) -> None:
    for sup in sups:
        sup.expect("switchboard running headless")
    pids = sorted(sup.proc.pid for sup in sups)
    rows = settle(lambda: rows_if(database, lambda r: [w[0] for w in r] == pids),
                  30, "both workers registered")
    assert sum(1 for r in rows if r[1]) == 1, rows  # exactly one coordinator
    assert len(holders(database)) == 1
    [coordinator_pid] = [r[0] for r in rows if r[1]]
    first = next(s for s in sups if s.proc.pid == coordinator_pid)
    other = next(s for s in sups if s is not first)
    assert any("coordinator role taken" in line for line in first.seen + first.rest(0))
    # The chat is the coordinator's: it answers; the other is ready, on standby.
    assert f"(pid {first.proc.pid}, coordinator, this one)" in status_answer(fake, 30)
    code, body = ready(ports[other.proc.pid])
    assert code == 200 and '"standby"' in body, body
    # Both heartbeats renew on the database's clock.
    time.sleep(HEARTBEAT_S + 1)
    assert all(r[2] < HEARTBEAT_S + 1 for r in workers(database)), workers(database)

    os.kill(coordinator_pid, signal.SIGKILL)
    killed_at = time.monotonic()
    other.expect("coordinator role taken", timeout=TAKEOVER_BOUND_S + 5)
    took = time.monotonic() - killed_at
    assert took < TAKEOVER_BOUND_S, f"took the role {took:.1f} s after the SIGKILL"
    # The new coordinator's row says so, and the dead one's no longer does.
    settle(lambda: rows_if(database, lambda r: [w[0] for w in r if w[1]] == [other.proc.pid]),
           5, "only the new coordinator's row flagged")
    assert len(holders(database)) == 1
    # The chat is served again, by the new coordinator.
    answer = status_answer(fake, TAKEOVER_BOUND_S + 10)
    assert f"(pid {other.proc.pid}, coordinator, this one)" in answer, answer
