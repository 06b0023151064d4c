"""`switchboard run` refuses a bad setting at start (issue 10), from the file or the environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAKE_CLAUDE
from tests.subproc import Supervisor

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def run(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SWITCHBOARD_", "ANTHROPIC_", "TELEGRAM_", "SLACK_"))
            and k != "PORT"}
    base.update({"SWITCHBOARD_HOME": str(home), "SWITCHBOARD_CLAUDE_CLI": str(FAKE_CLAUDE),
                 **env})
    return subprocess.run([sys.executable, "-m", "bot.cli", "run", "--headless"],
                          capture_output=True, text=True, env=base, cwd=ROOT, timeout=60,
                          stdin=subprocess.DEVNULL)


def assert_refused_at_start(out: subprocess.CompletedProcess[str], home: Path,
                            *needles: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert "switchboard: configuration error:" in out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr
    assert "running" not in out.stdout + out.stderr
    assert not (home / "run").exists() and not (home / "switchboard.db").exists()


@pytest.mark.parametrize("toml,needles", [
    ("max_agent = 5\n", ["max_agent is not a setting (did you mean max_agents?)"]),
    ("[limits]\nmax_agents = 2.9\n",
     ["SWITCHBOARD_MAX_AGENTS / limits.max_agents must be a whole number, got 2.9"]),
    ('console = "maybe"\n',
     ["SWITCHBOARD_CONSOLE / console must be true or false (also yes/no/on/off/1/0), "
      "got 'maybe'"]),
], ids=["misspelt key", "fractional integer", "unknown boolean word"])
def test_a_bad_settings_file_stops_run_at_start(tmp_path, toml, needles):
    home = tmp_path / "sb"
    home.mkdir()
    (home / "switchboard.toml").write_text(toml)
    out = run(home)
    assert_refused_at_start(out, home, *[f"{home / 'switchboard.toml'}: {n}" for n in needles])


@pytest.mark.parametrize("env,needles", [
    ({"SWITCHBOARD_MAX_AGENT": "5"},
     ["SWITCHBOARD_MAX_AGENT is not a setting (did you mean SWITCHBOARD_MAX_AGENTS?)"]),
    ({"SWITCHBOARD_MAX_AGENTS": "2.9"},
     ["SWITCHBOARD_MAX_AGENTS / limits.max_agents must be a whole number, got '2.9'"]),
    ({"SWITCHBOARD_CONSOLE": "maybe"},
     ["SWITCHBOARD_CONSOLE / console must be true or false (also yes/no/on/off/1/0), "
      "got 'maybe'"]),
    ({"PORT": "http"}, ["PORT / http_port must be a whole number, got 'http'"]),
], ids=["misspelt variable", "fractional integer", "unknown boolean word", "bad PORT"])
def test_a_bad_environment_variable_stops_run_at_start(tmp_path, env, needles):
    home = tmp_path / "sb"
    out = run(home, **env)
    assert_refused_at_start(out, home, *[f"environment: {n}" for n in needles])


def test_a_settings_file_in_sections_runs(short_home):
    home = short_home / "sb"
    home.mkdir()
    (home / "switchboard.toml").write_text(
        f'claude_cli = "{FAKE_CLAUDE}"\nkill_grace_s = 2\nconsole = "off"\n'
        "[limits]\nmax_agents = 4\n[gcs]\npoll_s = 30\n[telegram]\nadmin_ids = []\n")
    sup = Supervisor(home, console=False)
    try:
        sup.expect("running headless")
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(30) == 0
    finally:
        sup.close()


def test_a_port_in_use_stops_run_at_start_with_the_setting_to_change(tmp_path):
    import socket

    home = tmp_path / "sb"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run(home, SWITCHBOARD_HTTP_PORT=str(port))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"switchboard: cannot listen on 127.0.0.1:{port} for health and metrics" in out.stderr
    assert "set SWITCHBOARD_HTTP_PORT (or PORT) to a free port" in out.stderr
    assert "running headless" not in out.stderr
    assert not (home / "switchboard.db").exists()  # nothing after the listener started
