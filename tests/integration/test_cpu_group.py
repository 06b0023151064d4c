"""The agents' CPU as one group below the supervisor (issue 32): real cgroups where this host has
them (as root on a hybrid host: the v1 cpu hierarchy), the autogroup arrangement where none can
be made (a cgroup root that holds nothing, given by parameter), and what `doctor` says."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from supervisor.errors import ConfigError
from supervisor.process.cpugroup import (
    STALE_AFTER_S,
    Kind,
    arrange,
    doctor_text,
    member_of,
    plan,
    weight_v1,
    weight_v2,
)
from tests.conftest import make_settings, wait_for

DEFAULT_NICE = Settings.model_fields["agent_nice"].default


def _weight(procs: Path) -> int:
    group = procs.parent
    path = group / "cpu.weight" if (group / "cpu.weight").exists() else group / "cpu.shares"
    return int(path.read_text())


def _expected(kind: Kind, nice: int) -> int:
    return weight_v2(nice) if kind == Kind.CGROUP2 else weight_v1(nice)


async def test_an_agent_and_all_it_starts_run_in_the_agents_group(short_home):
    settings = make_settings(short_home, fake=True, agent_nice=DEFAULT_NICE)
    before = Path("/proc/self/cgroup").read_text()
    async with Switchboard(settings) as app:
        assert app.pool is not None and app.pool.cpu is not None
        cpu = app.pool.cpu
        if cpu.procs is None:
            pytest.skip(f"no cgroup can be made here: {cpu.why}")
        runner = await app.pool.spawn("grouped", "BG")  # the fake CLI starts a setsid child
        await wait_for(lambda: runner.state == "idle", 60, "the agent's first turn")
        proc = runner.process
        assert proc is not None and proc.cli_pid is not None
        members = proc.members()
        # bwrap (or the launcher), the init, the CLI, and the child in a session of its own.
        assert len(members) >= (5 if proc.sandboxed else 3), members
        assert all(member_of(pid, cpu.procs) for pid in members), members
        assert not member_of(os.getpid(), cpu.procs)  # the supervisor is not below itself
        assert member_of(os.getpid(), cpu.procs.parent.parent / "supervisor" / "cgroup.procs")
        assert _weight(cpu.procs) == _expected(cpu.kind, DEFAULT_NICE) == cpu.weight
        made = cpu.made
    assert not any(g.exists() for g in made), "the groups are removed at shutdown"
    assert Path("/proc/self/cgroup").read_text() == before, "the supervisor is back"


async def test_an_unsandboxed_agent_is_in_the_group_too(short_home):
    """allow_unisolated_agents on a host without bwrap: the launcher joins the group before it
    starts the CLI."""
    settings = make_settings(short_home, fake=True).with_(
        bwrap_path=short_home / "no-bwrap-here", allow_unisolated_agents=True)
    async with Switchboard(settings) as app:
        assert app.pool is not None and app.pool.cpu is not None
        cpu = app.pool.cpu
        if cpu.procs is None:
            pytest.skip(f"no cgroup can be made here: {cpu.why}")
        runner = await app.pool.spawn("bare", "BG")
        await wait_for(lambda: runner.state == "idle", 60, "the agent's first turn")
        proc = runner.process
        assert proc is not None and not proc.sandboxed and proc.cli_pid is not None
        members = proc.members()
        assert len(members) >= 3, members  # the launcher, the CLI, its setsid child (and sh)
        assert all(member_of(pid, cpu.procs) for pid in members), members


async def test_a_group_a_crashed_run_left_is_reused_and_then_removed(short_home):
    settings = make_settings(short_home, fake=True, agent_nice=DEFAULT_NICE)
    # What a supervisor killed with -9 leaves: its group, at the weight it had set (nice 0).
    stale = arrange("auto", 0, settings.instance_id, settings.max_agents)
    if stale.procs is None:
        pytest.skip(f"no cgroup can be made here: {stale.why}")
    async with Switchboard(settings) as app:
        assert app.pool is not None and app.pool.cpu is not None
        assert app.pool.cpu.procs == stale.procs
        assert _weight(stale.procs) == _expected(stale.kind, DEFAULT_NICE)
        assert not member_of(os.getpid(), stale.procs)
    assert not any(g.exists() for g in stale.made)


async def test_the_empty_group_of_another_data_directory_is_cleaned(short_home):
    """A supervisor of another data directory killed with -9: its group stays, empty (its
    leaf lost its only process). The next start of any supervisor removes it."""
    gone = arrange("auto", 0, "0badc0ffee00", 10)
    if gone.procs is None or gone.home is None:
        pytest.skip(f"no cgroup can be made here: {gone.why}")
    (gone.home / "cgroup.procs").write_text(str(os.getpid()))  # as if it had died
    # A group made a moment ago with no process in it yet (or whose process runs a second
    # Switchboard) is not taken for a dead one's.
    young = arrange("auto", 0, "0badc0ffee01", 10)
    assert young.home is not None
    (young.home / "cgroup.procs").write_text(str(os.getpid()))
    old = time.time() - STALE_AFTER_S - 1
    for group in gone.made:
        os.utime(group, (old, old))
    settings = make_settings(short_home, fake=True)
    try:
        async with Switchboard(settings):
            assert not any(g.exists() for g in gone.made)
            assert all(g.exists() for g in young.made)
    finally:
        young.release()
    assert not any(g.exists() for g in young.made)


async def test_agent_cpu_group_autogroup_leaves_agents_where_the_supervisor_is(short_home):
    settings = make_settings(short_home, fake=True).with_(agent_cpu_group="autogroup")
    async with Switchboard(settings) as app:
        assert app.pool is not None and app.pool.cpu is not None
        assert app.pool.cpu.kind == Kind.AUTOGROUP and app.pool.cpu.procs is None
        runner = await app.pool.spawn("plain", "hello")
        await wait_for(lambda: runner.state == "idle", 60, "the agent's first turn")
        assert runner.process is not None and runner.process.cli_pid is not None
        mine = Path("/proc/self/cgroup").read_text().splitlines()
        its = Path(f"/proc/{runner.process.cli_pid}/cgroup").read_text().splitlines()
        cpu = [line for line in mine if "cpu" in line.split(":")[1].split(",") or
               line.startswith("0::")]
        assert cpu and set(cpu) <= set(its), (cpu, its)


def test_where_no_cgroup_can_be_made_the_autogroups_hold_the_agents(tmp_path):
    nothing = tmp_path / "empty"
    nothing.mkdir()
    got = arrange("auto", DEFAULT_NICE, "x", 10, root=nothing)
    assert got.kind == Kind.AUTOGROUP and got.procs is None
    assert "no cgroup v2 hierarchy here" in got.why and "no cgroup v1 cpu hierarchy" in got.why
    # A cgroup v2 whose cpu controller is not offered to us (what a container gets without
    # --cgroupns=private, or a systemd service without Delegate=).
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("memory pids\n")
    me = tmp_path / "self-cgroup"
    me.write_text("0::/\n")
    got = arrange("auto", DEFAULT_NICE, "x", 10, root=v2, self_cgroup=me)
    assert got.kind == Kind.AUTOGROUP
    assert "the cpu controller is not offered to our cgroup /" in got.why
    with pytest.raises(ConfigError) as refused:
        arrange("cgroup", DEFAULT_NICE, "x", 10, root=v2, self_cgroup=me)
    assert "set agent_cpu_group = auto" in str(refused.value)
    assert "Delegate=cpu" in str(refused.value)
    assert not list(v2.iterdir())[1:], "nothing made there"


def test_doctor_says_which_arrangement_is_in_use_and_why(tmp_path):
    ok, text = doctor_text("auto", DEFAULT_NICE, root=tmp_path)
    assert ok and text.startswith("agents' CPU: autogroup arrangement"), text
    assert "no cgroup v1 cpu hierarchy here" in text and "Delegate=cpu" in text
    ok, text = doctor_text("cgroup", DEFAULT_NICE, root=tmp_path)
    assert not ok, text
    ok, text = doctor_text("autogroup", DEFAULT_NICE)
    assert ok and "(agent_cpu_group = autogroup)" in text, text
    # This host, as it is.
    kind, where, why = plan("auto")
    ok, text = doctor_text("auto", DEFAULT_NICE)
    assert ok
    if where is not None:
        assert text.startswith(f"agents' CPU: one {kind} group in {where}"), text
    else:
        assert text.startswith("agents' CPU: autogroup arrangement") and why in text, text
