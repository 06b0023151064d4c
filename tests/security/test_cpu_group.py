"""An agent cannot leave the agents' CPU group nor weigh more (issue 32): a hostile agent on the
real CLI tries to write its pids into the supervisor's cgroup, to raise its group's weight, to
make a group of its own and to remount the hierarchy writable; all fail, and seen from the host
every process it has, one in a session of its own too, is still in the group at its weight."""

from __future__ import annotations

import os

import pytest

from supervisor.process.cpugroup import Kind, member_of
from tests.security.conftest import bash_script, spawn_fleet, tool_calls


def _attack(group: str, weight_file: str, supervisor_procs: str) -> str:
    parent = os.path.dirname(group)
    tries = [
        f"echo $$ > {supervisor_procs}",  # this shell, out to the supervisor's side
        f"echo $PPID > {supervisor_procs}",  # the CLI that started it
        f"echo $$ > {parent}/tasks",  # v1: one thread at a time
        f"echo 10000 > {group}/{weight_file}",
        f"echo 10000 > {parent}/supervisor/{weight_file}",  # or lower the supervisor's
        f"mkdir {parent}/escape-$$ && echo $$ > {parent}/escape-$$/cgroup.procs",
        f"mount -o remount,rw {parent}",
        "mkdir -p /tmp/cg && mount -t cgroup -o cpu none /tmp/cg",
        "mkdir -p /tmp/cg2 && mount -t cgroup2 none /tmp/cg2",
    ]
    lines = ["echo \"inside: $(grep -E '(^0::|[:,]cpu[,:])' /proc/self/cgroup | tr '\\n' ' ')\""]
    for attempt in tries:
        quoted = attempt.replace("'", "'\\''")
        lines.append(f"if sh -c '{quoted}' 2>/dev/null; then echo 'ESCAPED: {quoted}'; "
                     f"else echo 'refused: {quoted}'; fi")
    lines.append("setsid sleep 300 >/dev/null 2>&1 < /dev/null &")  # a session of its own
    lines.append("echo attack done")
    return "\n".join(lines) + "\n"


async def test_an_agent_cannot_leave_its_cpu_group_or_raise_its_weight(hostile_app, mock_api):
    assert hostile_app.pool is not None and hostile_app.pool.cpu is not None
    cpu = hostile_app.pool.cpu
    if cpu.procs is None:
        pytest.skip(f"no cgroup can be made here: {cpu.why}")
    group = cpu.procs.parent
    weight_file = "cpu.weight" if cpu.kind == Kind.CGROUP2 else "cpu.shares"
    supervisor = group.parent / "supervisor"  # the supervisor's leaf, beside the agents'
    supervisor_weight = (supervisor / weight_file).read_text()
    [agent] = await spawn_fleet(hostile_app, ["climber"], bash_script(
        _attack(str(group), weight_file, str(supervisor / "cgroup.procs"))))
    result = next(c.result for c in tool_calls(mock_api) if "attack done" in c.result)
    assert "ESCAPED" not in result, result
    assert result.count("refused: ") == 9, result
    # Seen from the host: the group's weight is the supervisor's choice still, no group was
    # made beside it, and every process of the agent (the setsid one too) is in the group.
    assert int((group / weight_file).read_text()) == cpu.weight
    assert (supervisor / weight_file).read_text() == supervisor_weight
    assert not [p for p in group.parent.iterdir() if p.name.startswith("escape-")]
    proc = agent.process
    assert proc is not None and proc.cli_pid is not None
    members = proc.members()
    sleepers = [pid for pid in members if _comm(pid) == "sleep"]
    assert sleepers, f"the agent's setsid child is gone: {members}"
    outside = [pid for pid in members if not member_of(pid, cpu.procs)]
    assert not outside, [(pid, _comm(pid)) for pid in outside]
    assert not member_of(os.getpid(), cpu.procs)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"
