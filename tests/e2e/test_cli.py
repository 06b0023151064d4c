"""The `switchboard` command itself: --help, status, doctor, headless run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commands.dispatcher import REGISTRY
from supervisor.config import Settings
from supervisor.process.cpugroup import doctor_text
from tests.conftest import FAKE_CLAUDE
from tests.subproc import Supervisor, write_config

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def sb(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SWITCHBOARD_", "ANTHROPIC_")) and k != "PORT"}
    base.update({"SWITCHBOARD_HOME": str(home), **env})
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, env=base, cwd=ROOT, timeout=90)


def test_help_describes_every_command(tmp_path):
    out = sb(["--help"], tmp_path)
    assert out.returncode == 0
    for sub in ("run", "status", "doctor"):
        assert sub in out.stdout
    for cmd in REGISTRY:
        assert f"/{cmd.name}" in out.stdout, cmd.name


def test_status_on_a_fresh_data_dir(tmp_path):
    out = sb(["status"], tmp_path / "fresh")
    assert out.returncode == 0
    assert "not running" in out.stdout and "no agents yet" in out.stdout


def test_doctor_reports_missing_credentials_in_plain_words(tmp_path):
    out = sb(["doctor"], tmp_path / "d", SWITCHBOARD_CLAUDE_CLI=str(FAKE_CLAUDE),
             CLAUDE_CONFIG_DIR=str(tmp_path / "nocreds"), PORT="8080")
    assert out.returncode == 1
    assert "PROBLEM" in out.stdout and "ANTHROPIC_API_KEY" in out.stdout
    assert "claude CLI" in out.stdout and "2.1.332" in out.stdout
    assert "http listener (/healthz /readyz /metrics): http://127.0.0.1:8080" in out.stdout


def test_doctor_with_an_api_key_and_the_bundled_cli(tmp_path, mock_api):
    out = sb(["doctor"], tmp_path / "d", ANTHROPIC_API_KEY="sk-test-not-real",
             ANTHROPIC_BASE_URL=mock_api.url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ANTHROPIC_API_KEY is set" in out.stdout
    assert "(Claude Code)" in out.stdout
    assert "sk-test-not-real" not in out.stdout + out.stderr
    # Whether the key is accepted: one request, that uses no tokens, said as such.
    assert mock_api.model_list_auth == ["sk-test-not-real"] and mock_api.requests == []
    assert (f"[ok] model API: one request (GET /v1/models, uses no tokens) to "
            f"127.0.0.1:{mock_api.port}: the ANTHROPIC_API_KEY is accepted (200)") in out.stdout
    # Which arrangement holds the agents' CPU below the supervisor, and why (issue 32).
    ok, cpu = doctor_text("auto", Settings.model_fields["agent_nice"].default)
    assert f"[{'ok' if ok else 'PROBLEM'}] {cpu}" in out.stdout, out.stdout


def test_doctor_says_when_the_model_api_refuses_the_key_or_cannot_be_reached(tmp_path, mock_api):
    mock_api.accepted_keys = {"sk-the-right-one"}
    out = sb(["doctor"], tmp_path / "d", ANTHROPIC_AUTH_TOKEN="tok-revoked-0123",
             ANTHROPIC_BASE_URL=mock_api.url)
    assert out.returncode == 1, out.stdout + out.stderr
    assert mock_api.model_list_auth == ["tok-revoked-0123"]  # sent as a bearer token
    line = next(ln for ln in out.stdout.splitlines() if "model API" in ln)
    assert line.startswith("[PROBLEM] model API: one request"), line
    assert "the ANTHROPIC_AUTH_TOKEN was refused (401: invalid x-api-key)" in line, line
    assert "tok-revoked-0123" not in out.stdout + out.stderr

    mock_api.stop()  # nothing listens there now
    out = sb(["doctor"], tmp_path / "d", ANTHROPIC_API_KEY="sk-test-not-real",
             ANTHROPIC_BASE_URL=mock_api.url)
    assert out.returncode == 1
    line = next(ln for ln in out.stdout.splitlines() if "model API" in ln)
    assert line.startswith("[PROBLEM]") and "cannot reach it" in line, line
    assert "ANTHROPIC_BASE_URL" in line


def test_doctor_does_not_ask_the_api_for_the_clis_own_login(tmp_path):
    out = sb(["doctor"], tmp_path / "d", SWITCHBOARD_CLAUDE_CLI=str(FAKE_CLAUDE),
             CLAUDE_CONFIG_DIR=str(tmp_path / "nocreds"))
    assert "model API: not asked (the CLI presents its own login" in out.stdout, out.stdout


def test_doctor_prints_no_secret(tmp_path):
    secrets = {"ANTHROPIC_API_KEY": "sk-ant-doctor-key-0123456789",
               "TELEGRAM_BOT_TOKEN": "123456789:AAFakeTelegramTokenForDoctor_0123456789",
               "SLACK_BOT_TOKEN": "xoxb-doctor-slack-bot", "SLACK_APP_TOKEN": "xapp-doctor-app",
               "AWS_SECRET_ACCESS_KEY": "doctor-aws-secret-key"}
    out = sb(["doctor"], tmp_path / "d", **secrets,
             ANTHROPIC_BASE_URL="https://proxy-user:proxy-pass-77@llm.example.invalid/")
    text = out.stdout + out.stderr
    assert "ANTHROPIC_API_KEY is set" in text and "telegram (token set)" in text
    assert "https://proxy-user:***@llm.example.invalid/" in text
    assert [k for k, v in secrets.items() if v in text] == [] and "proxy-pass-77" not in text


def test_bad_config_is_a_clear_error(tmp_path):
    home = tmp_path / "bad"
    home.mkdir()
    (home / "switchboard.toml").write_text("kill_grace_s = 'soon'\n")
    out = sb(["status"], home)
    assert out.returncode == 2
    assert "kill_grace_s" in out.stderr and "number" in out.stderr


def test_headless_run_and_status_while_running(short_home):
    home = short_home / "sb"
    write_config(home, fake=True)
    sup = Supervisor(home, console=False)
    try:
        sup.expect("running headless")
        out = sb(["status"], home)
        assert "running, pid" in out.stdout
        second = sb(["run", "--headless"], home)
        assert second.returncode == 2 and "already running" in second.stderr
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(30) == 0
    finally:
        sup.close()
    time.sleep(0.1)
    assert "not running" in sb(["status"], home).stdout


def test_status_into_a_pipe_closed_early_is_quiet(tmp_path):
    """Regression (issue 9): the health check's `status | grep -q` closed the pipe at the
    first match, and status logged a BrokenPipeError traceback every 30 s."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before status writes a line
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_",))}
    try:
        out = subprocess.run([sys.executable, "-m", "bot.cli", "status"], stdout=write_end,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=90,
                             env={**base, "SWITCHBOARD_HOME": str(tmp_path / "h")})
    finally:
        os.close(write_end)
    assert out.returncode == 0 and out.stderr == ""
    check = sb(["status", "--check"], tmp_path / "h")
    assert (check.returncode, check.stdout) == (1, "supervisor: not running\n")
    # The image's health check: /healthz, else `status --check`; never a pipe into grep -q.
    text = (ROOT / "Dockerfile").read_text()
    health = text[text.index("HEALTHCHECK"):].split("\n\n", 1)[0]
    assert "switchboard status --check" in health and "grep" not in health, health


def test_the_command_itself_imports_no_agent_sdk():
    """`switchboard --version`, `status`, `kill` and `doctor` start without the claude-agent-sdk
    (and the mcp it brings: 0.7 CPU-s): only `run` and `demo` need it, and import it then."""
    probe = ("import sys, bot.cli; heavy = [m for m in ('claude_agent_sdk', 'mcp', 'telegram', "
             "'slack_bolt', 'google.cloud.storage') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
