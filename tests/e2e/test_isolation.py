"""What `switchboard doctor` and a running Switchboard say about agent isolation, on this host
and on one that cannot build a sandbox (the refusal, and the explicit override)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAKE_CLAUDE
from tests.subproc import Supervisor, write_config

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed"),
]
ROOT = Path(__file__).resolve().parents[2]
# A host that cannot isolate: a user namespace of our own in which nobody may create another
# one, and a process there with no capability left, so bwrap's unshare() is refused as it is
# under a container's default seccomp profile.
NO_NAMESPACES = (
    "unshare", "--user", "--map-root-user", "sh", "-c",
    'echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set -all '
    '--inh-caps -all --ambient-caps -all "$@"', "no-namespaces",
)


def can_simulate() -> bool:
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        return False
    probe = subprocess.run([*NO_NAMESPACES, "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


def doctor(home: Path, prefix: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("SWITCHBOARD_", "ANTHROPIC_"))}
    base.update({"SWITCHBOARD_HOME": str(home), "ANTHROPIC_API_KEY": "sk-test-not-real",
                 "SWITCHBOARD_CLAUDE_CLI": str(FAKE_CLAUDE), **env})
    return subprocess.run([*prefix, sys.executable, "-m", "bot.cli", "doctor"],
                          capture_output=True, text=True, env=base, cwd=ROOT, timeout=120)


def test_doctor_reports_the_sandbox_in_use(tmp_path):
    out = doctor(tmp_path / "d")
    line = next(ln for ln in out.stdout.splitlines() if "isolation" in ln)
    assert line.startswith("[ok] isolation: bubblewrap"), out.stdout
    assert "pid" in line and "hidden" in line
    if os.geteuid() == 0:
        assert "agents run as uid" in line


@pytest.mark.skipif(not can_simulate(), reason="cannot simulate a host without namespaces")
def test_without_namespaces_agents_are_refused_and_everyone_is_told(short_home):
    out = doctor(short_home / "d", NO_NAMESPACES)
    line = next(ln for ln in out.stdout.splitlines() if "isolation" in ln)
    assert line.startswith("[PROBLEM] isolation: NONE"), out.stdout
    assert "bwrap cannot build a sandbox here" in line and "Agents are refused" in line
    assert "seccomp=deploy/seccomp-sandbox.json" in line
    assert "allow_unisolated_agents = true" in line
    assert out.returncode == 1

    home = short_home / "sb"
    write_config(home, fake=True)
    sup = Supervisor(home, prefix=NO_NAMESPACES)
    try:
        sup.expect("Agents are refused: this host cannot isolate them")
        sup.send("/spawn alpha hello")
        refusal = sup.expect("agents are not started")
        assert "cannot isolate them" in refusal
        sup.expect("allow_unisolated_agents = true")  # what to do instead
        sup.send("/agents")
        sup.expect("No agents running")
    finally:
        sup.close()


@pytest.mark.skipif(not can_simulate(), reason="cannot simulate a host without namespaces")
def test_the_explicit_override_runs_agents_unisolated_and_says_so(short_home):
    out = doctor(short_home / "d", NO_NAMESPACES, SWITCHBOARD_ALLOW_UNISOLATED_AGENTS="true")
    line = next(ln for ln in out.stdout.splitlines() if "isolation" in ln)
    assert line.startswith("[ok] isolation: NONE"), out.stdout
    assert "allow_unisolated_agents = true, so agents run without a sandbox" in line

    home = short_home / "sb"
    write_config(home, fake=True, allow_unisolated_agents=True)
    sup = Supervisor(home, prefix=NO_NAMESPACES)
    try:
        sup.expect("Agents run WITHOUT isolation")
        sup.send("/spawn alpha hello")
        sup.expect("ECHO: hello")
    finally:
        sup.close()


def test_a_misspelt_override_value_is_refused(tmp_path):
    out = doctor(tmp_path / "d", SWITCHBOARD_ALLOW_UNISOLATED_AGENTS="sure")
    assert out.returncode == 2
    assert "allow_unisolated_agents" in out.stderr and "true or false" in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the agent uid differs from ours only as root")
def test_the_probe_sees_what_an_agent_sees_of_a_checkout_in_a_private_directory(tmp_path):
    """Regression: with the checkout in a 0700 directory under /tmp (as `mktemp -d` makes),
    the probe looked at the host's /tmp, found the CLI out of the agent uid's reach and refused
    every agent, although an agent's sandbox binds the CLI back into a /tmp of its own."""
    import tempfile

    from supervisor.config import Settings
    from supervisor.process.sandbox import probe

    private = Path(tempfile.mkdtemp(dir="/tmp"))  # 0700, root's
    try:
        cli = private / "bin" / "claude"
        cli.parent.mkdir()
        cli.write_text("#!/bin/sh\necho fake\n")
        cli.chmod(0o755)
        iso = probe(Settings(home=tmp_path / "sb"), cli)
        assert iso.ok, iso.problem
    finally:
        shutil.rmtree(private, ignore_errors=True)
