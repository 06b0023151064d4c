"""Pool behaviour at fleet scale with the small fake claude CLI: subtrees, crashes, shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import psutil
import pytest

from bot.app import Switchboard
from supervisor.events import StateChanged
from tests.conftest import processes_with_tag, run, wait_for
from tests.subproc import Supervisor, write_config

pytestmark = pytest.mark.timeout(120)


async def _idle(app, name):
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle", 30, f"{name} idle")
    return runner


@pytest.fixture
async def deep_app(fake_settings):
    async with Switchboard(fake_settings.with_(max_depth=5)) as app:
        yield app


async def test_killing_a_parent_kills_the_whole_subtree(deep_app):
    fake_app = deep_app
    assert (await run(fake_app, "/spawn root BG")).ok
    await _idle(fake_app, "root")
    parent = "root"
    for depth in range(1, 4):  # a chain three deep, plus a sibling at each level
        for suffix in ("a", "b"):
            reply = await run(fake_app, f"/spawn d{depth}{suffix} --parent {parent} BG")
            assert reply.ok, reply.plain()
            await _idle(fake_app, f"d{depth}{suffix}")
        parent = f"d{depth}a"
    bystander = await _idle_spawn(fake_app, "bystander")
    # Its pids are stored while the CLI answers its first message (not before it is sent),
    # and in any case by the end of the turn.
    stored = await fake_app.store.agents.get(bystander.id)
    assert bystander.process is not None and bystander.process.launcher_pid
    assert (stored.launcher_pid, stored.cli_pid) == (bystander.process.launcher_pid,
                                                     bystander.process.cli_pid)
    family = [r for r in fake_app.pool.fleet.live() if r.name != "bystander"]
    assert len(family) == 7
    for r in family:
        # The turn can end before its background sh has exec'd the sleep: wait for it.
        await wait_for(lambda r=r: any(p.name() == "sleep"
                                       for p in processes_with_tag(r.tag + "\0")),
                       20, f"{r.name}'s background sleep")
    reply = await run(fake_app, "/kill root")
    assert reply.ok and "Killed 7 agent(s)" in reply.plain(), reply.plain()
    for r in family:
        assert r.state == "killed"
        assert processes_with_tag(r.tag + "\0") == []
    assert bystander.state == "idle" and processes_with_tag(bystander.tag + "\0")
    row = await fake_app.store.agents.find("d3b")
    assert row.parent_id == (await fake_app.pool.fleet.get("d2a")).id


async def _idle_spawn(app, name, prompt="hello"):
    assert (await run(app, f"/spawn {name} {prompt}")).ok
    return await _idle(app, name)


async def test_crash_mid_turn_reports_failed_with_stderr_tail(fake_app):
    events = []

    async def collect():
        async for e in fake_app.hub.stream():
            events.append(e)

    task = asyncio.create_task(collect())
    try:
        runner = await _idle_spawn(fake_app, "crasher")
        assert (await run(fake_app, "/ask crasher CRASH")).ok
        await wait_for(lambda: runner.state == "failed", 30, "failed")
        assert "fake crash: boom" in runner.last_error
        assert "exit code 3" in runner.last_error or "exit_code" in runner.last_error or \
            "3" in runner.last_error
        failed = [e for e in events if isinstance(e, StateChanged) and e.new == "failed"]
        assert failed and "fake crash: boom" in failed[0].reason
        assert processes_with_tag(runner.tag + "\0") == []
        # A failed agent keeps its session; a new message restarts it on that session.
        session = runner.session_id
        assert (await run(fake_app, "/ask crasher again")).ok
        await wait_for(lambda: runner.state == "idle", 30)
        assert runner.session_id == session
    finally:
        task.cancel()


async def test_cli_dying_while_idle_is_noticed(fake_app):
    runner = await _idle_spawn(fake_app, "quiet")
    os.kill(runner.process.cli_pid, signal.SIGKILL)
    await wait_for(lambda: runner.state == "failed", 10, "failed after idle death")
    assert "exited" in runner.last_error


async def test_cost_is_stored_as_per_turn_deltas(fake_app):
    runner = await _idle_spawn(fake_app, "spender")
    for _ in range(2):
        assert (await run(fake_app, "/ask spender more")).ok
        await asyncio.sleep(0.05)
        await wait_for(lambda: runner.state == "idle" and not runner.queued and not runner.busy)
    turns = await fake_app.store.turns.recent(runner.id, 10)
    assert [round(t.cost_usd, 6) for t in turns] == [0.001, 0.001, 0.001]
    by_model = await fake_app.store.turns.totals_by_model(runner.id)
    assert round(sum(c.cost_usd for c in by_model), 6) == 0.003
    reply = await run(fake_app, "/cost spender")
    assert "$0.0030" in reply.plain()


async def test_twenty_agents_then_clean_shutdown(fake_settings):
    async with Switchboard(fake_settings) as app:
        for i in range(20):
            assert (await run(app, f"/spawn f{i} BG")).ok
        runners = [await app.pool.fleet.get(f"f{i}") for i in range(20)]
        await wait_for(lambda: all(r.state == "idle" for r in runners), 60, "20 idle agents")
        prefix = fake_settings.instance_id + "/"
        # The turn can end before the background sh has exec'd its sleep: wait for all 20.
        await wait_for(lambda: len([p for p in processes_with_tag(prefix)
                                    if p.name() == "sleep"]) == 20, 20, "20 background sleeps")
    assert processes_with_tag(prefix) == []
    async with Switchboard(fake_settings) as app:
        assert len(app.pool.fleet.live()) == 20
        assert {r.state for r in app.pool.fleet.live()} == {"idle"}


def test_sigterm_lets_running_turns_finish(short_home):
    home = short_home / "sb"
    write_config(home, fake=True, shutdown_grace_s=20)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn slow SLEEP 3")
        sup.expect("[slow] starting → working")
        started = time.monotonic()
        sup.proc.send_signal(signal.SIGTERM)
        sup.expect("[slow] ✓ turn finished", 30)
        assert sup.proc.wait(30) == 0
        assert time.monotonic() - started < 20
    finally:
        sup.close()


def test_second_sigint_forces_shutdown(short_home):
    home = short_home / "sb"
    write_config(home, fake=True, shutdown_grace_s=60)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn forever SLEEP 300")
        sup.expect("[forever] starting → working")
        from supervisor.config import Settings
        prefix = Settings(home=home).instance_id + "/"
        assert processes_with_tag(prefix)
        started = time.monotonic()
        sup.proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert sup.proc.poll() is None  # draining: waiting for the turn
        sup.proc.send_signal(signal.SIGINT)
        assert sup.proc.wait(30) == 0
        assert time.monotonic() - started < 30
        assert processes_with_tag(prefix) == []
    finally:
        sup.close()
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "SLEEP 300" in " ".join(p.info["cmdline"] or [])]


async def test_no_agent_process_shares_the_supervisors_group_or_session(fake_app):
    """Regression: bwrap was started in the supervisor's process group and session, so a
    Ctrl-C at the console (sent to the foreground group) killed bwrap and with it every agent,
    before the grace period; a killpg of an agent's group would have hit the supervisor."""
    assert (await run(fake_app, "/spawn a hello")).ok
    r = await fake_app.pool.fleet.get("a")
    await wait_for(lambda: r.state == "idle" and r.process is not None, 30, "first turn")
    assert r.process is not None
    members = r.process.members()
    assert members
    for pid in members:
        assert os.getpgid(pid) != os.getpgrp(), pid
        assert os.getsid(pid) != os.getsid(0), pid


async def test_an_interrupt_before_the_cli_begins_the_turn_still_interrupts_it(fake_app):
    """The CLI takes its time to begin a turn (under load); an interrupt written meanwhile
    would find no turn running and do nothing, so the runner holds it until the turn has
    begun (its system/init) and sends it then."""
    await _idle_spawn(fake_app, "late")
    runner = await fake_app.pool.fleet.get("late")
    assert (await run(fake_app, "/ask late SLOWSTART 0.5: SLEEP 60")).ok
    await wait_for(lambda: runner.busy, 30, "late busy")
    reply = await run(fake_app, "/send --type interrupt late stop now")
    assert reply.ok, reply.plain()
    await wait_for(lambda: runner.state == "idle" and not runner.busy and not runner.queued, 30,
                   "the interrupted turn and the interrupt's own turn ending")
    turns = await fake_app.store.turns.recent(runner.id, 10)
    slow = next(t for t in turns if t.prompt.startswith("SLOWSTART"))
    assert slow.status == "interrupted", slow
