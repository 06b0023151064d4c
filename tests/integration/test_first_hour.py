"""The first hour (issue 25): with no credentials `switchboard run` says so and what to do, and
an agent's "Please run /login" is put in Switchboard's terms; `switchboard demo` shows the whole
flow with no key and no network; the kill switch shows in every status view; doctor names a bad
policy file and a Slack setup without a channel, every problem at once."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app import Switchboard
from bot.cli import cmd_kill, cmd_status, main
from bot.demo.model import REVIEWER_PROMPT, SCOUT_PROMPT, ScriptedModel, reply_for
from bot.doctor import cmd_doctor
from supervisor.config import Secret, Settings
from tests.conftest import make_settings, run, wait_for
from tests.subproc import Supervisor

ROOT = Path(__file__).resolve().parents[2]
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                   "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR")


def no_credentials_env(home: Path) -> dict[str, str]:
    """The test's environment with every credential gone and an empty home (no CLI login)."""
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARS
           and not k.startswith("SWITCHBOARD_") and k != "PORT"}
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    return env


# -- no credentials ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_run_without_credentials_warns_at_start_on_the_console_and_in_the_log(short_home):
    (short_home / "user").mkdir()
    # Supervisor adds to the test's environment; an empty variable counts as unset.
    sup = Supervisor(short_home / "sb", env={"HOME": str(short_home / "user"),
                                             **dict.fromkeys(CREDENTIAL_VARS, "")})
    try:
        line = sup.expect("no Claude credentials", 30)
        assert "ANTHROPIC_API_KEY" in line and "switchboard demo" in line, line
        sup.send("/quit")
        sup.proc.wait(30)
    finally:
        sup.close()
    log = (short_home / "sb" / "switchboard.log").read_text()
    assert "no Claude credentials" in log and '"level": "WARNING"' in log


@pytest.mark.real_cli
@pytest.mark.timeout(90)
async def test_not_logged_in_is_explained_in_switchboard_terms(short_home, mock_api):
    """The real CLI with no key and no login answers "Not logged in · Please run /login";
    the operator is told what to do here instead."""
    settings = make_settings(short_home, mock_api)
    env = {k: v for k, v in settings.agent_env.items() if k != "ANTHROPIC_API_KEY"}
    settings = settings.with_(agent_env=env)
    async with Switchboard(settings) as app:
        assert (await run(app, "/spawn nokey hello")).ok
        runner = await app.pool.fleet.get("nokey")

        async def ended() -> list[str]:
            return [t.error or "" for t in await app.store.turns.recent(runner.id, 5)
                    if t.status not in ("running", "ok")]

        await wait_for(ended, 60, "the turn's end")
        error = (await ended())[0]
        assert "/login" in error, error
        assert "/login is a command of the claude CLI's own terminal" in error
        assert "ANTHROPIC_API_KEY" in error and "switchboard doctor" in error
    assert mock_api.requests == []  # it never got as far as the API


# -- the demo -----------------------------------------------------------------------------------


def test_the_scripted_model_plays_the_whole_flow():
    def body(*messages: dict) -> dict:
        return {"messages": list(messages), "stream": True}

    scout = {"role": "user", "content": SCOUT_PROMPT}

    def tool_turn(n: int, result: str) -> list[dict]:
        return [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}",
                                                   "name": "x", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                              "content": result}]}]

    assert reply_for(body(scout))["tool"] == "Bash"
    steps = [scout, *tool_turn(1, "ok")]
    assert reply_for(body(*steps))["tool"] == "AskUserQuestion"
    steps += tool_turn(2, '"Which part?"="Docs"')
    sent = reply_for(body(*steps))
    assert sent["tool"] == "mcp__switchboard__send_message"
    assert sent["input"]["to"] == "reviewer" and "docs" in sent["input"]["body"]
    steps += tool_turn(3, "message #3; queued for reviewer")
    assert reply_for(body(*steps))["text"].startswith("## Scout's report (focus: Docs)")
    assert reply_for(body({"role": "user", "content": REVIEWER_PROMPT}))["text"]
    assert reply_for(body({"role": "user", "content": "a title, please"})) == {"text": "ok"}


@pytest.mark.real_cli
@pytest.mark.timeout(240)
def test_switchboard_demo_completes_with_no_key_and_no_network(short_home):
    """`switchboard demo` as the README shows it, with no credentials anywhere and every
    proxy pointed at nothing: the model is the demo's own loopback script."""
    env = no_credentials_env(short_home / "user")
    env.update({"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
                "NO_PROXY": "127.0.0.1,localhost"})
    done = subprocess.run([sys.executable, "-m", "bot.cli", "demo"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=220)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "🔐" in out and "wants to use Bash" in out and "> /approve " in out  # approval
    assert "Which part of the project" in out and "> /answer " in out  # question
    assert "scout → reviewer · task" in out  # the bus message, in /messages
    assert "[reviewer] Reviewer here: got the scout's brief" in out
    assert "[scout] ## Scout's report (focus: Tests)" in out  # the long answer
    assert out.count("[scout] ") > 30
    assert "Done: a permission request approved" in out


def test_the_model_serves_the_cli_on_loopback_only():
    with ScriptedModel() as model:
        assert model.url.startswith("http://127.0.0.1:")


# -- the kill switch in every status view, and doctor ---------------------------------------


@pytest.mark.timeout(90)
def test_the_kill_switch_shows_in_every_status_view(short_home, capsys):
    settings = make_settings(short_home, fake=True)
    assert cmd_status(settings) == 0
    assert "kill switch: off" in capsys.readouterr().out
    assert cmd_kill(settings, "testing the views") == 0
    capsys.readouterr()
    assert cmd_status(settings) == 0
    status = capsys.readouterr().out
    assert "kill switch: ON" in status and "testing the views" in status
    assert "/killswitch off confirm" in status
    cmd_doctor(settings)
    doctor = capsys.readouterr().out
    assert "kill switch: ON" in doctor and "testing the views" in doctor

    async def in_the_app() -> None:
        async with Switchboard(settings) as app:  # the chat front ends share this reply
            # With no database yet, `switchboard kill` left only the trigger file, which the
            # supervisor's watcher acts on within its poll interval.
            await wait_for(lambda: app.api.halted, 10, "the trigger file acted on")
            reply = await run(app, "/status")
            assert "Kill switch: ON" in reply.plain() and "testing the views" in reply.plain(), \
                reply.plain()
            assert (await run(app, "/killswitch off confirm")).ok
            assert "Kill switch: off." in (await run(app, "/status")).plain()

    asyncio.run(in_the_app())
    assert cmd_status(settings) == 0
    assert "kill switch: off" in capsys.readouterr().out


@pytest.mark.timeout(90)
def test_doctor_names_a_bad_policy_and_a_slack_setup_without_a_channel(short_home, capsys):
    policy = short_home / "policy.toml"
    policy.write_text('[[rules]]\ntool = "Bash"\naction = "maybe"\n')
    settings = make_settings(short_home, fake=True, policy_file=policy,
                             slack_bot_token=Secret("xoxb-1-2-doctor"),
                             slack_app_token=Secret("xapp-1-doctor"))
    assert cmd_doctor(settings) == 1
    out = capsys.readouterr().out
    problems = [line for line in out.splitlines() if line.startswith("[PROBLEM]")]
    assert any(line.startswith(f"[PROBLEM] policy: {policy}") for line in problems), out
    assert any("SLACK_CHANNEL is not set" in line for line in problems), out
    assert "xoxb-1-2-doctor" not in out
    # `run` refuses the same policy file: doctor said so first.
    env = no_credentials_env(short_home / "user")
    env.update({"SWITCHBOARD_HOME": str(short_home / "run"), "SWITCHBOARD_POLICY": str(policy)})
    done = subprocess.run([sys.executable, "-m", "bot.cli", "run", "--headless"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and str(policy) in done.stderr, done.stderr


def test_doctor_passes_a_good_slack_setup(short_home, capsys):
    settings = make_settings(short_home, fake=True, slack_bot_token=Secret("xoxb-1-2-ok"),
                             slack_app_token=Secret("xapp-1-ok"), slack_channel="C123")
    cmd_doctor(settings)
    out = capsys.readouterr().out
    assert "slack:" not in out.replace("slack (Socket Mode, channel C123)", ""), out


def test_every_settings_problem_in_one_round(short_home, monkeypatch, capsys):
    (short_home / "switchboard.toml").write_text('bogus_key = 1\n[slack]\nmode = "weird"\n')
    monkeypatch.setenv("SWITCHBOARD_HOME", str(short_home))
    monkeypatch.setenv("SWITCHBOARD_MAX_AGENTS", "many")
    monkeypatch.setenv("SWITCHBOARD_TYPO", "1")
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert "4 problems" in err, err
    for fragment in ("SWITCHBOARD_TYPO is not a setting", "bogus_key is not a setting",
                     "slack.mode must be one of", "limits.max_agents must be a whole number"):
        assert fragment in err, err


def test_settings_load_is_unchanged_for_good_settings(short_home):
    assert Settings.load({"SWITCHBOARD_HOME": str(short_home)}).home == short_home


# -- what the operator did on purpose is no error -----------------------------------------------


@pytest.mark.timeout(60)
async def test_kill_and_stop_log_no_error(fake_app, caplog):
    caplog.set_level(logging.INFO)
    for name in ("stopped", "killed"):
        assert (await run(fake_app, f"/spawn {name} SLEEP 30")).ok
    for name in ("stopped", "killed"):
        runner = await fake_app.pool.fleet.get(name)
        await wait_for(lambda r=runner: r.state == "working", 15, f"{name} working")
    assert (await run(fake_app, "/stop stopped")).ok
    assert (await run(fake_app, "/kill killed")).ok
    await asyncio.sleep(1)  # what the runners log as their processes end
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [f"{r.name}: {r.getMessage()}" for r in errors]
