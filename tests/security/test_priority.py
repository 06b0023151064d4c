"""Agents run at a lower CPU priority than the supervisor, and cannot raise it: a busy fleet
must not starve the supervisor's event loop (issue 11)."""

from __future__ import annotations

import os

import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

DEFAULT_NICE = Settings.model_fields["agent_nice"].default


@pytest.fixture
async def niced_app(hostile_settings):
    """The default priority (the other tests run agents at the supervisor's, see conftest)."""
    async with Switchboard(hostile_settings.with_(agent_nice=DEFAULT_NICE)) as app:
        yield app


def _nice(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read()
    return int(raw[raw.rfind(b")") + 2:].split()[16])


def _autogroup(pid: int) -> tuple[str, int]:
    """(name, nice) of the autogroup of `pid`. A process whose session never called setsid()
    since boot (a container's init and what it starts) is in the root group, for which the
    kernel prints nothing: it weighs as nice 0."""
    with open(f"/proc/{pid}/autogroup") as fh:
        fields = fh.read().split()
    return (fields[0], int(fields[-1])) if fields else ("", 0)


async def test_an_agent_runs_below_the_supervisor_and_cannot_raise_itself(niced_app, mock_api):
    attack = ('echo "nice=$(nice) $(cat /proc/self/autogroup)"\n'
              'renice -n -5 -p $$ >/dev/null 2>&1; echo "renice rc=$?"\n'
              'echo -5 2>/dev/null > /proc/self/autogroup; echo "autogroup rc=$?"\n'
              'python3 -c "import os; os.nice(-1)" 2>/dev/null; echo "os.nice rc=$?"\n'
              'echo "after: nice=$(nice) $(cat /proc/self/autogroup)"\n')
    [agent] = await spawn_fleet(niced_app, ["low"], bash_script(attack))
    result = next(c.result for c in tool_calls(mock_api) if "renice rc=" in c.result)
    step = niced_app.settings.agent_nice
    assert step == DEFAULT_NICE == 10
    proc = agent.process
    assert proc is not None and proc.cli_pid and proc.init_pid
    # The shell the Bash tool started inherited the nice value. Its autogroup is not the CLI's:
    # the CLI starts each command in a session of its own, and a new session gets a new
    # autogroup at nice 0 (the kernel has no inheritance for it); see docs/benchmarks.md.
    assert f"nice={step} " in result, result
    for probe in ("renice", "autogroup", "os.nice"):
        assert f"{probe} rc=0" not in result, result
    assert f"after: nice={step} " in result, result
    # Seen from the host: the CLI and the sandbox's init run niced, in an autogroup of their
    # own that is niced too; the supervisor is untouched.
    me_nice, (me_group, me_group_nice) = _nice(os.getpid()), _autogroup(os.getpid())
    for pid in (proc.cli_pid, proc.init_pid):
        group, group_nice = _autogroup(pid)
        assert _nice(pid) == min(19, me_nice + step)
        assert group != me_group and group_nice == min(19, me_group_nice + step)
