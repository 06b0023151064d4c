"""The `switchboard` command's first impression (issue 25): --version, a short bare usage,
"did you mean" for a mistyped subcommand, budgets with enough digits, and `make sandbox`
saying what it installs and explaining a held apt lock."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.cli import SUBCOMMANDS, USAGE, main
from supervisor.guard.watchdog import usd

ROOT = Path(__file__).resolve().parents[2]


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == "switchboard 0.1.0"


def test_bare_switchboard_prints_a_short_usage(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.strip() == USAGE
    assert len(out.splitlines()) <= 15
    for command in ("run", "demo", "status", "doctor", "kill", "backup"):
        assert f"\n  {command} " in out
    assert "--help" in out and "docs/commands.md" in out


@pytest.mark.parametrize(("typed", "meant"), [("rnu", "run"), ("doctr", "doctor"),
                                             ("stauts", "status"), ("demp", "demo")])
def test_a_mistyped_subcommand_suggests_the_closest(capsys, typed, meant):
    assert main([typed]) == 2
    err = capsys.readouterr().err
    assert f"{typed!r} is not a command. Did you mean `switchboard {meant}`?" in err
    assert ", ".join(SUBCOMMANDS) in err


def test_every_subcommand_has_help():
    for command in SUBCOMMANDS:
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0


@pytest.mark.parametrize(("amount", "text"), [(0.015, "$0.015"), (0.01, "$0.01"),
                                              (0.0195, "$0.0195"), (5, "$5.00"),
                                              (12.5, "$12.50"), (0.00004, "$0.00")])
def test_budgets_show_enough_digits(amount, text):
    assert usd(amount) == text


def fake_path(tmp_path: Path, apt_get: str) -> str:
    """A PATH with no bwrap, `id` saying root, and an apt-get that behaves as told."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("id", "echo 0"), ("apt-get", apt_get)):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    for tool in ("grep", "tail"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    return str(bin_dir)


def make_sandbox(path: str) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make") or "/usr/bin/make"
    env = {**os.environ, "PATH": path}
    return subprocess.run([make, "-s", "-C", str(ROOT), "sandbox", "APT_LOCK_WAIT_S=1"],
                          env=env, capture_output=True, text=True, timeout=30)


def test_make_sandbox_says_before_it_installs_and_explains_a_held_apt_lock(tmp_path):
    held = ('echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process '
            '4242 (apt-get)" >&2; exit 100')
    done = make_sandbox(fake_path(tmp_path, held))
    assert done.returncode == 0, done.stderr  # make run goes on
    first, second = done.stdout.splitlines()
    assert "installing the system package 'bubblewrap' with apt-get" in first
    assert second.startswith("apt is busy: another apt-get, dpkg or unattended-upgrades held "
                             "its lock for 1s.")
    assert "apt-get install bubblewrap" in second


def test_make_sandbox_reports_another_apt_failure(tmp_path):
    done = make_sandbox(fake_path(tmp_path, 'echo "E: Unable to locate package" >&2; exit 100'))
    assert done.returncode == 0
    assert "E: Unable to locate package" in done.stdout
    assert "Installing bubblewrap failed" in done.stdout
