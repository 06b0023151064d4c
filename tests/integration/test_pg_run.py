"""`switchboard run` on PostgreSQL, one host (issue 30): a Switchboard on a real PostgreSQL
database with the fake CLI spawns, asks, pauses, resumes, kills and pulls the kill switch; the
halt flag is kept across a restart; no SQLite file is made. And the kill path when the database
does not answer (the server SIGSTOPped) or is gone (stopped): every agent process still ends."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bot.app import Switchboard
from store.kv import get_sync
from supervisor.guard.killswitch import HALT_KEY, write_local_trigger
from supervisor.persistence.offline import kill_from_shell
from tests.conftest import make_settings, processes_with_tag, run, wait_for
from tests.pg import Cluster, database, find_bin, pg_cluster, unavailable

__all__ = ["database", "pg_cluster"]
pytestmark = pytest.mark.timeout(180)
KILL_BOUND_S = 10.0


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A server of this test's own, which the test stops or freezes."""
    bin_dir = find_bin()
    if bin_dir is None:
        unavailable("no initdb found")
    assert bin_dir is not None
    cluster = Cluster(bin_dir)
    cluster.start()
    try:
        yield cluster
    finally:
        server_processes(cluster, signal.SIGCONT)
        with contextlib.suppress(RuntimeError):  # a test that failed with it halted
            cluster.stop()


def server_processes(cluster: Cluster, sig: signal.Signals) -> list[int]:
    """Send `sig` to the server's postmaster and every backend; their pids."""
    pid_file = cluster.data / "postmaster.pid"
    if not pid_file.exists():
        return []
    try:
        postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
        pids = [postmaster.pid, *(c.pid for c in postmaster.children(recursive=True))]
    except psutil.NoSuchProcess:  # the server ended meanwhile
        return []
    sent = []
    for pid in pids:
        # A backend may end between the listing and the signal (a client that went away).
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
            sent.append(pid)
    return sent


async def spawn_idle(app: Switchboard, names: list[str], text: str = "BG") -> None:
    assert app.pool is not None
    for name in names:
        reply = await run(app, f"/spawn {name} {text}")
        assert reply.ok, reply.plain()
    runners = [await app.pool.fleet.get(n) for n in names]
    await wait_for(lambda: all(r.state == "idle" for r in runners), 60, "idle agents")


async def test_a_switchboard_on_postgresql_runs_agents_and_keeps_the_halt_across_a_restart(
        short_home: Path, database: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings(short_home, fake=True, database_url=database)
    tag = settings.instance_id + "/"
    async with Switchboard(settings) as app:
        assert app.store is not None and app.store.db.dialect == "postgresql"
        assert app.persistence is None
        assert "the parts about the SQLite file are off" in caplog.text  # the start log says
        assert app.coordinator.held  # the only worker
        await spawn_idle(app, ["a", "b"])
        reply = await run(app, "/ask a hello there")
        assert reply.ok, reply.plain()
        agent_a = await app.pool.fleet.get("a")

        async def answered() -> bool:
            lines = await app.store.turns.totals_by_agent(agent_a.id)
            return bool(lines) and lines[0].turns == 2 and agent_a.state == "idle"

        await wait_for(answered, 30, "the second turn recorded and a idle")
        assert (await run(app, "/pause b")).ok
        assert (await run(app, "/resume b")).ok
        assert (await run(app, "/kill b")).ok
        assert (await app.pool.fleet.get("b")).state == "killed"
        status = (await run(app, "/status")).plain()
        assert "Switchboard: 1 idle." in status and ", coordinator, this one): 1 agent(s)" in status
        reply = await run(app, "/killall confirm")
        assert reply.ok, reply.plain()
        assert "Warning" not in reply.plain()  # the flag was stored
        await wait_for(lambda: not processes_with_tag(tag), KILL_BOUND_S, "no agent process")
        assert get_sync(database, HALT_KEY)["via"]  # written by the private connection
        assert "killswitch" in [a.action for a in await app.store.audit.recent(50)]
    async with Switchboard(settings) as app:  # a restart on the same database keeps it
        assert app.pool is not None and app.pool.killswitch.halted
        refused = await run(app, "/spawn again hi")
        assert not refused.ok and "kill switch is on" in refused.plain()
        off = await run(app, "/killswitch off confirm")
        assert off.ok, off.plain()
        await spawn_idle(app, ["again"], "hi")
    assert get_sync(database, HALT_KEY) is None
    assert not settings.db_path.exists()  # no SQLite file was made on the way


async def test_the_kill_switch_ends_every_agent_while_postgresql_does_not_answer(
        short_home: Path, own_cluster: Cluster) -> None:
    """The server frozen (SIGSTOP: connections accepted by the kernel, never answered): the
    file trigger's watcher ends every agent process; the flag's write waits in its own
    thread, bounded, and is reported."""
    own_cluster.admin("CREATE DATABASE frozen")
    url = own_cluster.url("frozen")
    settings = make_settings(short_home, fake=True, database_url=url)
    tag = settings.instance_id + "/"
    async with Switchboard(settings) as app:
        await spawn_idle(app, ["x", "y", "z"])
        assert len(processes_with_tag(tag)) >= 6  # each CLI and its background sleep
        assert server_processes(own_cluster, signal.SIGSTOP)
        started = time.monotonic()
        write_local_trigger(settings, "ops", "frozen database")
        await wait_for(lambda: not processes_with_tag(tag), KILL_BOUND_S,
                       "every agent process gone with the database frozen")
        took = time.monotonic() - started
        # Measured 0.05 to 0.26 s; writing the flag before the sweep took 5.0 s here.
        assert took < 2.0, f"the kill waited for the database ({took:.1f} s)"
        assert app.pool is not None and app.pool.killswitch.halted
        server_processes(own_cluster, signal.SIGCONT)
        await wait_for(lambda: get_sync(url, HALT_KEY) is not None, 30,
                       "the flag written once the server answers")


async def test_switchboard_kill_ends_every_agent_with_the_server_stopped(
        short_home: Path, own_cluster: Cluster) -> None:
    own_cluster.admin("CREATE DATABASE gone")
    settings = make_settings(short_home, fake=True, database_url=own_cluster.url("gone"))
    tag = settings.instance_id + "/"
    async with Switchboard(settings) as app:
        await spawn_idle(app, ["p", "q"])
        running = {p.pid for p in processes_with_tag(tag)}
        own_cluster.halt()
        done = await asyncio.to_thread(kill_from_shell, settings, "ops@cli", "db down")
        assert not processes_with_tag(tag)
        assert running <= set(done.killed)
        assert any("halt flag" in p for p in done.problems), done.problems
        # The server back, so the supervisor's shutdown can record the agents' ends.
        own_cluster.serve()


async def test_a_kill_switch_pulled_anywhere_reaches_every_worker_on_the_database(
        short_home: Path, database: str) -> None:
    """Two workers on one database, each with an agent; `switchboard kill` run from a third
    data directory (another host: no trigger file the workers could see) writes the flag into
    the database, and each worker's watcher ends its own agents."""
    first = make_settings(short_home / "a", fake=True, database_url=database)
    second = make_settings(short_home / "b", fake=True, database_url=database)
    elsewhere = make_settings(short_home / "c", fake=True, database_url=database)
    async with Switchboard(first) as a, Switchboard(second) as b:
        assert a.coordinator.held and not b.coordinator.held  # one coordinator of two
        await spawn_idle(a, ["on-a"])
        await spawn_idle(b, ["on-b"])
        tags = [s.instance_id + "/" for s in (first, second)]
        assert all(processes_with_tag(t) for t in tags)
        started = time.monotonic()
        done = await asyncio.to_thread(kill_from_shell, elsewhere, "ops@cli", "from afar")
        assert done.problems == () and done.killed == ()  # nothing of its own to kill
        await wait_for(lambda: not any(processes_with_tag(t) for t in tags), KILL_BOUND_S,
                       "every worker's agents ended")
        took = time.monotonic() - started
        assert a.pool is not None and b.pool is not None
        assert a.pool.killswitch.halted and b.pool.killswitch.halted
        refused = await run(b, "/spawn more hi")
        assert not refused.ok and "kill switch is on" in refused.plain()
        await wait_for(lambda: a.store.kv.get(HALT_KEY), 5, "the flag")
        flag = get_sync(database, HALT_KEY)
        assert flag["by"] == "ops@cli" and flag["via"] == "cli"  # the first writer's, kept
        await wait_for(lambda: {"on-a", "on-b"} <= set(
            (get_sync(database, HALT_KEY) or {}).get("agents", [])), 10, "both listed")
    assert took < 5, took
