"""The layered kill switch: 30 agents with escaped grandchildren killed at once, the halt flag
refusing spawns and deliveries across a restart, deactivation without a restart, the local file
trigger while the event loop is busy, the GCS trigger against the emulator, and the CLI."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.app import Switchboard
from supervisor.guard import killswitch
from supervisor.guard.killswitch import BOOK_SLICE, write_local_trigger
from tests.conftest import processes_with_tag, run, wait_for
from tests.subproc import Supervisor, write_config

pytestmark = pytest.mark.timeout(180)
KILL_BOUND_S = 10.0


async def spawn_fleet(app, n, prefix="f"):
    for i in range(n):
        reply = await run(app, f"/spawn {prefix}{i} BG")
        assert reply.ok, reply.plain()
    runners = [await app.pool.fleet.get(f"{prefix}{i}") for i in range(n)]
    await wait_for(lambda: all(r.state == "idle" for r in runners), 90, f"{n} idle agents")
    tag = app.settings.instance_id + "/"

    def sleepers() -> int:
        return len([p for p in processes_with_tag(tag) if p.name() == "sleep"])

    # A turn can end before its detached shell has exec'd the sleep: give it a moment.
    await wait_for(lambda: sleepers() >= n, 10, f"{n} background sleepers")
    assert sleepers() == n  # each agent left a background grandchild in its own session
    return runners


async def test_thirty_agents_killed_halt_survives_restart_then_deactivation(fake_settings):
    tag = fake_settings.instance_id + "/"
    async with Switchboard(fake_settings) as app:
        runners = await spawn_fleet(app, 30)
        confirm = await run(app, "/killall")
        assert confirm.ok and confirm.buttons and processes_with_tag(tag)  # asks first
        started = time.monotonic()
        reply = await run(app, "/killall confirm")
        assert reply.ok, reply.plain()
        while processes_with_tag(tag) and time.monotonic() - started < KILL_BOUND_S:
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - started
        assert processes_with_tag(tag) == [], f"processes left after {elapsed:.1f}s"
        assert "30 agent(s) killed" in reply.plain()
        assert all(r.state == "killed" for r in runners)
        refused = await run(app, "/spawn again hi")
        assert not refused.ok and "kill switch is on" in refused.plain()
        refused = await run(app, "/ask f0 hello")
        assert not refused.ok and "kill switch is on" in refused.plain()
        assert (await run(app, "/agents")).ok  # looking still works
        audit = [a.action for a in await app.store.audit.recent(50)]
        assert "killswitch" in audit
    async with Switchboard(fake_settings) as app:  # a restart keeps the halt
        assert app.pool.killswitch.halted
        refused = await run(app, "/spawn again hi")
        assert not refused.ok and "kill switch is on" in refused.plain()
        assert "ON" in (await run(app, "/killswitch")).plain()
        off = await run(app, "/killswitch off confirm")
        assert off.ok and "30 agent(s)" in off.plain(), off.plain()
        await spawn_ok_and_idle(app, "/spawn again hi", "again")


async def spawn_ok_and_idle(app, line, name):
    reply = await run(app, line)
    assert reply.ok, reply.plain()
    r = await app.pool.fleet.get(name)
    await wait_for(lambda: r.state == "idle", 30)


async def test_deactivation_restores_spawns_without_restart(fake_app):
    await spawn_fleet(fake_app, 2)
    assert (await run(fake_app, "/killall confirm")).ok
    assert not (await run(fake_app, "/spawn x hi")).ok
    warn = await run(fake_app, "/killswitch off")
    assert warn.ok and "confirm" in warn.plain()
    assert fake_app.pool.killswitch.halted  # not without the confirm
    off = await run(fake_app, "/killswitch off confirm")
    assert "2 agent(s)" in off.plain()
    await spawn_ok_and_idle(fake_app, "/spawn x hi", "x")


async def test_local_file_trigger_works_while_the_event_loop_is_busy(fake_app):
    await spawn_fleet(fake_app, 5)
    tag = fake_app.settings.instance_id + "/"
    write_local_trigger(fake_app.settings, "tester", "loop is wedged")
    # Block the event loop: nothing async can run; the watcher thread must act alone.
    deadline = time.monotonic() + KILL_BOUND_S
    while processes_with_tag(tag) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_with_tag(tag) == []
    assert fake_app.pool.killswitch.halted
    await wait_for(lambda: all(r.state == "killed" for r in fake_app.pool.fleet.everyone()), 10,
                   "bookkeeping once the loop is free")
    assert not (await run(fake_app, "/spawn late hi")).ok
    await run(fake_app, "/killswitch off confirm")
    assert not (fake_app.settings.home / "kill-switch.json").exists()
    await spawn_ok_and_idle(fake_app, "/spawn late hi", "late")


async def test_gcs_object_triggers_the_switch_without_chat_front_ends(fake_settings,
                                                                     gcs_emulator):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="test", credentials=AnonymousCredentials())
    bucket = client.create_bucket("sb-kill")
    settings = fake_settings.with_(gcs_bucket="sb-kill", storage_emulator_host=gcs_emulator,
                                   kill_poll_s=0.2)
    tag = settings.instance_id + "/"
    async with Switchboard(settings) as app:
        await spawn_fleet(app, 3)
        await asyncio.to_thread(bucket.blob("kill-switch.json").upload_from_string,
                                '{"by": "ops-console", "reason": "runaway spend"}')
        await wait_for(lambda: app.pool.killswitch.halted and not processes_with_tag(tag), 20,
                       "the GCS trigger")
        assert app.pool.killswitch.halt["via"] == "gcs"
        assert app.pool.killswitch.halt["by"] == "ops-console"
        await wait_for(lambda: all(r.state == "killed" for r in app.pool.fleet.everyone()), 10)
        assert (await run(app, "/killswitch off confirm")).ok
        await asyncio.sleep(1.0)  # the same object, already acted on, does not re-trigger
        assert not app.pool.killswitch.halted
        await spawn_ok_and_idle(app, "/spawn after hi", "after")


def test_switchboard_kill_from_the_command_line(short_home):
    home = short_home / "sb"
    write_config(home, fake=True)
    from supervisor.config import Settings

    tag = Settings(home=home).instance_id + "/"
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        for i in range(3):
            sup.send(f"/spawn c{i} BG")
        sup.expect_all([f"[c{i}] ✓ turn finished" for i in range(3)])
        assert len(processes_with_tag(tag)) >= 9
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        env["SWITCHBOARD_HOME"] = str(home)
        # With the agent SDK unimportable: the kill switch from a shell needs none of it.
        broken_sdk = ("import sys; sys.modules['claude_agent_sdk'] = None; "
                      "from bot.cli import main; sys.exit(main())")
        out = subprocess.run([sys.executable, "-c", broken_sdk, "kill", "--reason", "test"],
                             capture_output=True, text=True, env=env, timeout=60,
                             cwd=Path(__file__).resolve().parents[2])
        assert out.returncode == 0, out.stderr
        assert "kill switch on" in out.stdout
        assert processes_with_tag(tag) == []
        import sqlite3

        with sqlite3.connect(Settings(home=home).db_path) as conn:
            rows = conn.execute(
                "SELECT platform, action FROM audit WHERE platform='cli'").fetchall()
        assert rows == [("cli", "killswitch")]
        sup.expect("Kill switch triggered", 30)
        sup.send("/spawn late hi")
        sup.expect("kill switch is on")
        sup.send("/quit")
        sup.proc.wait(30)
    finally:
        sup.close()


async def test_kill_switch_revokes_invites_and_pending_requests(fake_app):
    ops = fake_app.store.operators
    await ops.create_invite("CODE1", "operator", "test", 3600)
    row = await fake_app.pool.escalations.open(agent_id=None, kind="permission", title="t",
                                               body="b")
    reply = await run(fake_app, "/killall confirm")
    assert "1 open request(s) denied, 1 invite code(s)" in reply.plain()
    assert (await fake_app.store.escalations.get(row.id)).status == "cancelled"
    assert await ops.redeem_invite("CODE1", "telegram:5") is None


@pytest.mark.parametrize("via", ["command", "file"])
async def test_the_report_counts_every_request_denied_and_every_process_ended(fake_app, via):
    """Issue 25: with two agents each waiting on a permission request, /killall said "0 open
    request(s) denied" (marking the agents killed cancels their requests before they were
    counted) and "0 processes SIGKILLed" (a sandbox's members die with its init, out of the
    sweep's sight)."""
    import json
    import re

    app = fake_app
    tool = json.dumps({"command": "touch /etc/issue25"})
    for name in ("w1", "w2"):
        assert (await run(app, f"/spawn {name} ASKTOOL Bash {tool}")).ok, name

    async def waiting() -> bool:
        return len(await app.store.escalations.open_rows()) == 2

    await wait_for(waiting, 30, "two open permission requests")
    tag = app.settings.instance_id + "/"
    running = len(processes_with_tag(tag))
    assert running >= 2
    if via == "command":
        reply = await run(app, "/killall confirm")
        assert reply.ok, reply.plain()
        text = reply.plain()
    else:  # the watcher thread's path (the GCS object takes the same one)
        write_local_trigger(app.settings, "tester", "issue 25")

        async def notice() -> list:
            return [e.body for e in await app.store.escalations.undelivered("t")
                    if e.title == "🛑 Kill switch triggered"]

        await wait_for(notice, 30, "the kill switch's notice")
        [text] = await notice()
    assert "2 agent(s) killed" in text and "2 open request(s) denied" in text, text
    ended = int(re.search(r"\((\d+) processes SIGKILLed", text).group(1))
    assert ended >= running, text
    assert processes_with_tag(tag) == []


async def test_trigger_returns_once_all_are_gone_and_the_books_still_close(fake_app):
    """Issue 32: trigger() returns as soon as every process is gone and the flag is stored;
    the bookkeeping follows in slices. It must still cover every agent (more than one slice
    of them): each recorded killed in the store, the flag's agent list, the audit row, the
    notice. Nothing here is timed: only what holds when trigger() returns, and after."""
    app = fake_app
    n = BOOK_SLICE + 4
    runners = await spawn_fleet(app, n)
    tag = app.settings.instance_id + "/"
    ks = app.pool.killswitch
    report = await ks.trigger("tester", "test", "issue 32")
    assert processes_with_tag(tag) == []  # every process gone before it returned
    assert report.pending and len(report.agents) == n
    assert "being revoked" in report.text()
    assert (await app.store.kv.get("halt"))["by"] == "tester"  # layer 1 stored already
    full = await ks.settled()
    assert full is not None and not full.pending and len(full.agents) == n
    assert f"{n} agent(s) killed" in full.text() and "open request(s) denied" in full.text()
    assert all(r.state == "killed" for r in runners)
    for r in runners:
        assert (await app.store.agents.get(r.id)).state == "killed", r.name
        assert (await app.store.agents.transitions(r.id))[-1].to_state == "killed", r.name
    halt = await app.store.kv.get("halt")
    assert sorted(halt["agents"]) == sorted(r.name for r in runners)
    audit = [a for a in await app.store.audit.recent() if a.action == "killswitch"]
    assert audit and audit[0].args == "on" and f"{n} agent(s) killed" in audit[0].result
    notices = [e.body for e in await app.store.escalations.undelivered("t")
               if e.title == "🛑 Kill switch triggered"]
    assert notices and f"{n} agent(s) killed" in notices[-1]


async def test_turning_it_off_right_after_an_early_return_waits_for_the_books(fake_app):
    """Deactivation straight after trigger() returned: the bookkeeping (which writes the
    flag's agent list) finishes first, so the flag does not come back after it is deleted
    (a halt at the next start that nobody asked for) and the report names every agent."""
    app = fake_app
    runners = await spawn_fleet(app, 3)
    ks = app.pool.killswitch
    report = await ks.trigger("tester", "test")
    assert report.pending
    text = await ks.deactivate("tester", "test")
    assert "it stopped 3 agent(s)" in text, text
    assert not ks.halted and await app.store.kv.get("halt") is None
    assert all(r.state == "killed" for r in runners)
    await spawn_ok_and_idle(app, "/spawn after hi", "after")


async def test_an_agent_whose_records_hang_holds_up_no_other_and_is_named(fake_app,
                                                                          monkeypatch):
    """A hung agent: its state lock held (a turn stuck writing to the store). Its records
    after the kill give up at their bound; the other agents' (in the next slice too), the
    audit row and the notice are still done, and the report names the one left out."""
    monkeypatch.setattr(killswitch, "MARK_KILLED_S", 0.5)
    app = fake_app
    runners = await spawn_fleet(app, BOOK_SLICE + 2)
    stuck = runners[0]
    await stuck._state_lock.acquire()
    try:
        report = await app.pool.killswitch.trigger("tester", "test", settle=True)
    finally:
        stuck._state_lock.release()
    assert processes_with_tag(app.settings.instance_id + "/") == []
    assert not report.pending
    assert f"1 agent(s) could not be recorded as killed ({stuck.name})" in report.text()
    assert all(r.state == "killed" for r in runners[1:])
    for r in runners[1:]:
        assert (await app.store.agents.get(r.id)).state == "killed", r.name
    audit = [a for a in await app.store.audit.recent() if a.action == "killswitch"]
    assert audit and stuck.name in audit[0].result


async def test_trigger_kills_while_every_worker_thread_of_the_loop_is_stuck(fake_app):
    """Everything else broken: every thread of the loop's default executor is stuck (a read
    that never returns, a bucket that never answers). trigger() runs its kill, and its
    bookkeeping its last sweep, in threads of their own, so neither queues behind them."""
    app = fake_app
    await spawn_fleet(app, 3)
    stuck = threading.Event()
    executor = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="stuck")
    asyncio.get_running_loop().set_default_executor(executor)
    entered: list[str] = []

    def wait() -> None:
        entered.append(threading.current_thread().name)
        stuck.wait()

    blocked = [asyncio.ensure_future(asyncio.to_thread(wait)) for _ in range(2)]
    await wait_for(lambda: len(entered) == 2, 10, "both threads stuck")
    try:
        async with asyncio.timeout(KILL_BOUND_S):  # a bound on a hang, not a speed goal
            report = await app.pool.killswitch.trigger("tester", "test")
        assert processes_with_tag(app.settings.instance_id + "/") == []
        assert len(report.agents) == 3
        full = await app.pool.killswitch.settled(KILL_BOUND_S)  # the records, too
        assert full is not None and len(full.agents) == 3 and not full.problems
    finally:
        stuck.set()
        await asyncio.gather(*blocked)
