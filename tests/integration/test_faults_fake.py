"""Faults and bad input against the supervisor, with the small fake claude CLI."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from bot.app import Switchboard
from tests.conftest import make_settings, processes_with_tag, run, wait_for
from tests.subproc import Supervisor, write_config

pytestmark = pytest.mark.timeout(60)


async def _idle(app, name: str, prompt: str = "hello"):
    assert (await run(app, f"/spawn {name} {prompt}")).ok
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 30, f"{name} idle")
    return runner


async def test_a_prompt_with_a_lone_surrogate_and_controls_gets_its_reply(fake_app):
    """Regression: a lone surrogate reached the store and the CLI's stdin, neither of which
    can encode it, and the turn vanished with no reply. The API cleans what reaches it."""
    runner = await _idle(fake_app, "uni")
    sent = await fake_app.api.ask("uni", "hi \ud800 there\x1b]52;c;Zm9v\x07 \u00e9\U0001f600\r\nok")
    assert sent.agent.name == "uni"
    await wait_for(lambda: runner.state == "idle" and not runner.busy and not runner.queued, 20)
    last = (await fake_app.store.turns.recent(runner.id, 1))[0]
    assert last.status == "ok"
    # The OSC 52 clipboard write goes whole (the one sanitiser, the front ends' too).
    assert last.result_text == "ECHO: hi \ufffd there \u00e9\U0001f600\nok"


def _turns(home, agent: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{home / 'switchboard.db'}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT t.prompt, t.status FROM turns t JOIN agents a ON a.id = t.agent_id"
            " WHERE a.name = ? ORDER BY t.id", (agent,)).fetchall()
    finally:
        conn.close()


@pytest.mark.timeout(120)
def test_sigkill_mid_turn_is_reported_after_restart_and_reruns_on_one_answer(short_home):
    """Regression: a turn running when the supervisor was SIGKILLed was silently closed as
    "interrupted" on the next start: never re-run, never reported. Now the next start asks the
    operator (a question that survives restarts) and one answer runs it again."""
    home = short_home / "sb"
    write_config(home, fake=True)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn slow SLEEP 60")
        sup.expect("→ working")
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
    finally:
        sup.close()
    assert _turns(home, "slow") == [("SLEEP 60", "running")]
    sup2 = Supervisor(home)
    try:
        line = sup2.expect("slow: a turn was interrupted")
        esc_id = re.search(r"\b([a-z2-9]{4,8}) · ", line) or re.search(
            r"/answer ([a-z2-9]{4,8})", sup2.expect("/answer"))
        assert esc_id, sup2.seen
        assert _turns(home, "slow") == [("SLEEP 60", "interrupted")]  # not re-run unasked
        sup2.send(f"/answer {esc_id.group(1)} 1")
        sup2.expect("the interrupted turn runs again")
        deadline = time.monotonic() + 20
        while _turns(home, "slow")[-1:] != [("SLEEP 60", "running")]:
            assert time.monotonic() < deadline, _turns(home, "slow")
            time.sleep(0.05)
        os.kill(sup2.proc.pid, signal.SIGKILL)  # the re-run is interrupted in its turn
        sup2.proc.wait(10)
    finally:
        sup2.close()
    sup3 = Supervisor(home)  # reports it again, sweeps what was left, and shuts down cleanly
    try:
        sup3.expect("slow: a turn was interrupted")
        assert [s for _, s in _turns(home, "slow")] == ["interrupted", "interrupted"]
        sup3.send("/quit")
        sup3.proc.wait(30)
        assert sup3.proc.returncode == 0
    finally:
        sup3.close()


# -- storage trouble -------------------------------------------------------------------------------


@pytest.fixture
def tiny_fs():
    """A small tmpfs of its own (as root), removed afterwards: a disk that can really fill."""
    mnt = Path(tempfile.mkdtemp(prefix="sbfs", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        os.rmdir(mnt)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        os.rmdir(mnt)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * size)
    return filler


async def _titles(app, frontend: str = "test-view") -> list[str]:
    stored = [r.title for r in await app.store.escalations.undelivered(frontend, 1000)]
    return stored + [r.title for r in app.pool.escalations.held(frontend)]


async def test_a_full_disk_refuses_new_work_tells_the_operator_and_recovers(tiny_fs):
    """Regression: with the disk full, /ask answered "Sent; it runs now" and the turn was lost
    without a word. Now the failed write is noticed, the operator is told (from memory: the
    outbox cannot take the notice), new work is refused with what to do, and all of it clears
    once there is room again."""
    settings = make_settings(tiny_fs, fake=True)
    async with Switchboard(settings) as app:
        runner = await _idle(app, "a")
        filler = _fill(tiny_fs)
        big = await run(app, "/spawn b " + "x" * 90_000)  # a write that needs new space
        assert not big.ok and "full" in big.plain()
        refused = await run(app, "/ask a hello")
        text = refused.plain()
        assert not refused.ok and "Sent" not in text, text
        assert "disk holding the database is full" in text and "Free space" in text, text
        assert any(t.startswith("⚠ Storage trouble: the disk holding the database is full")
                   for t in await _titles(app))
        filler.unlink()
        await app.pool.storage.check()  # what the guard's loop does every few seconds
        assert "✅ Storage works again" in await _titles(app)
        assert (await run(app, "/ask a hello")).ok
        await wait_for(lambda: runner.state == "idle" and not runner.busy and not runner.queued)


async def test_a_read_only_database_refuses_new_work_and_says_so(fake_app):
    """A database that takes no writes (here SQLite's own read-only switch on the writer
    connection: a file system remounted read-only cannot be had with the file open) is
    reported and refuses new work until writes work again."""
    app = fake_app
    await _idle(app, "a")
    writer = app.store.db._w()
    await writer.execute("PRAGMA query_only = 1")
    reply = await run(app, "/ask a hello")
    assert not reply.ok and "it is read-only" in reply.plain(), reply.plain()
    assert "writable for the user Switchboard runs as" in reply.plain()
    assert any(t.startswith("⚠ Storage trouble: the database cannot be written")
               for t in await _titles(app))
    await writer.execute("PRAGMA query_only = 0")
    await app.pool.storage.check()
    assert app.pool.storage.problem is None
    assert (await run(app, "/ask a hello")).ok


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_the_database_file_deleted_or_replaced_is_noticed_and_rescued(fake_settings, how):
    """Regression: with the database file deleted while running, Switchboard went on, nobody
    was told, and after a restart every agent was gone. Now the check notices, saves a copy of
    the open database beside it, tells the operator how to put it back, and refuses new work;
    the copy is saved again at shutdown and a restart on it has every agent."""
    db = fake_settings.db_path
    async with Switchboard(fake_settings) as app:
        await _idle(app, "keeper")
        if how == "deleted":
            db.unlink()
        else:
            other = db.with_name("other.db")
            sqlite3.connect(other).close()
            other.replace(db)
        await app.pool.storage.check()
        rescued = db.with_name(db.name + ".rescued")
        assert rescued.exists()
        got = await _titles(app)
        assert any(t.startswith(f"⚠ Storage trouble: the database file was {how}")
                   for t in got), got
        reply = await run(app, "/ask keeper hello")
        assert not reply.ok and f"/quit, move {rescued} to {db}" in reply.plain()
        assert not (await run(app, "/spawn newbie hi")).ok
    rescued.replace(db)
    async with Switchboard(fake_settings) as app:
        assert [r.name for r in app.pool.fleet.live()] == ["keeper"]


async def test_a_start_after_the_database_was_deleted_refuses_and_says_what_to_do(
        fake_settings):
    """Issue 25: after the database file was deleted while running (and a copy rescued), the
    next start silently began with an empty database beside the rescued copy."""
    from supervisor.errors import ConfigError

    db = fake_settings.db_path
    async with Switchboard(fake_settings) as app:
        await _idle(app, "keeper")
        db.unlink()
        await app.pool.storage.check()
    rescued = db.with_name(db.name + ".rescued")
    assert rescued.exists() and not db.exists()
    with pytest.raises(ConfigError) as refused:
        async with Switchboard(fake_settings):
            pass
    assert f"mv {rescued} {db}" in str(refused.value)
    assert not db.exists()  # no empty database made beside the copy
    rescued.replace(db)
    async with Switchboard(fake_settings) as app:
        assert [r.name for r in app.pool.fleet.live()] == ["keeper"]


# -- passing API errors ------------------------------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.parametrize("status", [529, 500])
async def test_a_passing_api_error_burst_is_retried_alike_for_529_and_500(permissive_settings,
                                                                          mock_api, status):
    """Regression: a 529 (overloaded) burst the CLI's own retries did not outlast failed the
    turn. Every passing API error status is treated alike: the runner continues the turn in
    the same session after a wait. (The tests' CLI runs with CLAUDE_CODE_MAX_RETRIES=0, so
    the mock API's error reaches the runner.)"""
    failures = iter(range(1))

    def on_request(body):
        if "OVERLOAD" in str(body.get("messages", ""))[-2000:] and next(failures, None) is not None:
            return {"error": status}
        return None

    mock_api.on_request = on_request
    async with Switchboard(permissive_settings) as app:
        assert (await run(app, "/spawn busy OVERLOAD then reply")).ok
        runner = await app.pool.fleet.get("busy")
        await wait_for(lambda: runner.state == "idle" and not runner.busy, 60, "busy idle")
        [turn] = await app.store.turns.recent(runner.id, 5)
        assert turn.status == "ok", turn
        assert "Continue the task" in (turn.result_text or "")
        retries = [e for e in await app.store.events.tail(runner.id, 100) if e.kind == "retry"]
        assert [e.summary.split(";")[0] for e in retries] == [f"API error {status}"]


async def test_the_kill_switch_works_and_says_so_when_the_database_takes_no_writes(fake_app):
    """Regression: with the store refusing writes, the kill switch SIGKILLed every agent and
    then answered "The state database failed ... nothing was changed" (its bookkeeping
    write raised). Now the kill is reported as done, with what could not be recorded."""
    app = fake_app
    runner = await _idle(app, "victim")
    tag = runner.tag + "\0"
    assert processes_with_tag(tag)
    await app.store.db._w().execute("PRAGMA query_only = 1")
    try:
        reply = await run(app, "/killall confirm")
        assert reply.ok, reply.plain()
        assert "1 agent(s) killed" in reply.plain()
        assert processes_with_tag(tag) == []
        assert app.api.halted
    finally:
        await app.store.db._w().execute("PRAGMA query_only = 0")


async def test_kill_and_pause_tell_the_truth_when_the_database_takes_no_writes(fake_app):
    """Regression: /kill SIGKILLed the agent, then answered "The state database failed ...
    nothing was changed"; /pause left the processes frozen behind the same answer. Now a kill
    is done and said so (the database's ignorance reported), and a pause that cannot be
    recorded is undone, so that "nothing was changed" is true."""
    app = fake_app
    sleeper = await _idle(app, "sleeper")
    victim = await _idle(app, "victim")
    halted = await _idle(app, "halted")
    await app.store.db._w().execute("PRAGMA query_only = 1")
    try:
        paused = await run(app, "/pause sleeper")
        assert not paused.ok and "nothing was changed" in paused.plain()
        assert sleeper.state == "idle"
        assert not any(p.status() == psutil.STATUS_STOPPED
                       for p in processes_with_tag(sleeper.tag + "\0"))
        killed = await run(app, "/kill victim")
        assert killed.ok, killed.plain()
        assert victim.state == "killed" and processes_with_tag(victim.tag + "\0") == []
        assert any("victim is killed, but the database could not record it" in t
                   for t in await _titles(app))
        stopped = await run(app, "/stop halted")
        assert stopped.ok and halted.state == "stopped", stopped.plain()
        assert processes_with_tag(halted.tag + "\0") == []
    finally:
        await app.store.db._w().execute("PRAGMA query_only = 0")
