"""The supervisor core against the real bundled claude CLI and the mock Anthropic API:
pause/resume of every process mid-tool, kill with an escaped background command, a crash
mid-turn, and a restart that resumes the same session."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil
import pytest

from bot.app import Switchboard
from tests.conftest import processes_with_tag, run, wait_for


@pytest.fixture
def real_settings(permissive_settings):
    return permissive_settings


pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

BACKGROUND = "BASH: (sh -c 'sleep 1000' &); echo started"


async def _spawn_idle(app, name, prompt, cwd=None):
    where = f" --cwd {cwd}" if cwd else ""
    reply = await run(app, f"/spawn {name}{where} {prompt}")
    assert reply.ok, reply.plain()
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle", 90, f"{name} idle")
    return runner


async def test_pause_freezes_every_process_including_the_running_tool(real_app, tmp_path):
    reply = await run(real_app, f"/spawn pz --cwd {tmp_path} BASH: sleep 3; echo done > p.txt")
    assert reply.ok
    runner = await real_app.pool.fleet.get("pz")

    def tool_running():
        return any(p.name() == "sleep" for p in processes_with_tag(runner.tag))

    await wait_for(tool_running, 60, "the Bash tool's sleep to start")
    reply = await run(real_app, "/pause pz")
    assert reply.ok, reply.plain()
    assert runner.state == "paused"
    procs = processes_with_tag(runner.tag)
    assert len(procs) >= 3  # launcher, CLI, the tool's shell and sleep
    assert {p.status() for p in procs} == {psutil.STATUS_STOPPED}, [
        (p.pid, p.name(), p.status()) for p in procs
    ]
    await asyncio.sleep(4)  # longer than the sleep: a frozen tool cannot finish
    assert not (tmp_path / "p.txt").exists()
    assert {p.status() for p in processes_with_tag(runner.tag)} == {psutil.STATUS_STOPPED}
    reply = await run(real_app, "/resume pz")
    assert reply.ok, reply.plain()
    await wait_for(lambda: runner.state == "idle", 60, "turn to finish after resume")
    assert (tmp_path / "p.txt").read_text().strip() == "done"
    assert all(p.status() != psutil.STATUS_STOPPED for p in processes_with_tag(runner.tag))
    states = [t.to_state for t in await real_app.store.agents.transitions(runner.id)]
    assert states[:1] == ["starting"] and "paused" in states and states[-1] == "idle"


async def test_kill_leaves_no_process_even_an_escaped_background_command(real_app):
    runner = await _spawn_idle(real_app, "bg", BACKGROUND)
    # The turn can end before the detached shell has exec'd its sleep.
    await wait_for(lambda: any(p.name() == "sleep" for p in processes_with_tag(runner.tag)), 10,
                   "the background command to be running")
    procs = processes_with_tag(runner.tag)
    sleeper = [p for p in procs if p.name() == "sleep"]
    # It left the CLI's session: a process-group kill of the CLI would miss it.
    cli_sid = os.getsid(runner.process.cli_pid)
    assert os.getsid(sleeper[0].pid) != cli_sid
    reply = await run(real_app, "/kill bg")
    assert reply.ok, reply.plain()
    assert runner.state == "killed"
    assert processes_with_tag(runner.tag) == []
    for p in procs:
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE


async def test_cli_crash_mid_turn_is_reported_failed(real_app, mock_api):
    reply = await run(real_app, "/spawn crashy SLEEP 30: too late")
    assert reply.ok
    runner = await real_app.pool.fleet.get("crashy")
    await wait_for(lambda: runner.state == "working" and mock_api.requests, 60, "turn under way")
    await wait_for(lambda: runner.process and runner.process.cli_pid, 10)
    os.kill(runner.process.cli_pid, signal.SIGKILL)
    await wait_for(lambda: runner.state == "failed", 30, "failed state")
    assert "exit code" in runner.last_error
    status = await run(real_app, "/status crashy")
    assert "last error" in status.plain()
    assert processes_with_tag(runner.tag) == []
    turns = await real_app.store.turns.recent(runner.id)
    assert turns[0].status == "failed"


async def test_restart_resumes_the_same_session(real_settings, mock_api):
    async with Switchboard(real_settings) as app:
        runner = await _spawn_idle(app, "keeper", "TEXT: remembered")
        session = runner.session_id
        assert session
        first_pid = runner.process.cli_pid
    assert not psutil.pid_exists(first_pid) or psutil.Process(first_pid).status() == "zombie"
    async with Switchboard(real_settings) as app:
        runner = await app.pool.fleet.get("keeper")
        assert runner.state == "idle"
        assert runner.process is None  # lazily resumed on the next message
        before = len(mock_api.requests)
        reply = await run(app, "/ask keeper RECALL")
        assert reply.ok
        await wait_for(lambda: len(mock_api.requests) > before and runner.state == "idle", 90)
        assert runner.session_id == session
        turns = await app.store.turns.recent(runner.id)
        # The first turn after the restart says so, then the message.
        remembered, note, recall = (turns[0].result_text or "").split(" | ")
        assert (remembered, recall) == ("HISTORY: TEXT: remembered", "RECALL")
        assert note.startswith("[Switchboard] The supervisor was restarted at ")
        assert "Your last turn had finished" in note
        # The mock saw the earlier conversation, including the first answer.
        last = mock_api.requests[-1]
        texts = str(last["messages"])
        assert "remembered" in texts


async def test_stop_then_ask_restarts_on_the_same_session(real_app, mock_api):
    runner = await _spawn_idle(real_app, "stoppy", "TEXT: one")
    session = runner.session_id
    reply = await run(real_app, "/stop stoppy")
    assert reply.ok, reply.plain()
    assert runner.state == "stopped"
    assert processes_with_tag(runner.tag) == []
    reply = await run(real_app, "/ask stoppy RECALL")
    assert reply.ok
    await wait_for(lambda: runner.state == "idle", 90)
    assert runner.session_id == session
    turns = await real_app.store.turns.recent(runner.id)
    assert turns[0].result_text == "HISTORY: TEXT: one | RECALL"


async def test_agent_environment_is_an_allowlist(real_settings, mock_api, monkeypatch):
    secrets = {
        "TELEGRAM_BOT_TOKEN": "tg-secret-123",
        "SLACK_BOT_TOKEN": "xoxb-secret-456",
        "GOOGLE_APPLICATION_CREDENTIALS": "/secret/gcp.json",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-789",
        "SWITCHBOARD_ADMIN_TOKEN": "sb-secret-000",
    }
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    async with Switchboard(real_settings) as app:
        runner = await _spawn_idle(app, "envy", "BASH: env")
        turns = await app.store.turns.recent(runner.id)
        printed = turns[0].result_text
        assert "PATH=" in printed and "ANTHROPIC_API_KEY=" in printed  # it did print its env
        for value in secrets.values():
            assert value not in printed
        for proc in processes_with_tag(runner.tag):
            with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                raw = fh.read().decode(errors="replace")
            for value in secrets.values():
                assert value not in raw, (proc.name(), value)
