"""Hostile agents that try to signal the supervisor: SIGSTOP and SIGKILL to its pid (the agent is
told it) and to its process group, and `kill -9 -1`, which signals everything the sender may.

Before the sandbox an agent ran as the supervisor's own user in the host's pid namespace: the
SIGSTOP froze the supervisor (and with it every front end and the kill switch), the SIGKILL
ended it, and `kill -9 -1` (as root, on this machine and in CI) killed every process of the host
but init. Now the supervisor's pids do not exist in the agent's namespace, and `kill -1` reaches
only the agent's own processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run, wait_for
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

# Watches the test process (the supervisor runs in it): if anything ever stops it, record that
# and continue it, so a hole shows as a failed assertion rather than a test run frozen for good.
GUARD = r"""
import os, signal, sys, time
pid, log = int(sys.argv[1]), sys.argv[2]
while True:
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        break
    if state in "Tt":
        with open(log, "a") as f:
            f.write("stopped at %f\n" % time.time())
        os.kill(pid, signal.SIGCONT)
    time.sleep(0.005)
"""


@pytest.fixture
def stop_guard(tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "stopped.log"
    guard = subprocess.Popen([sys.executable, "-c", GUARD, str(os.getpid()), str(log)])
    try:
        yield log
    finally:
        guard.kill()
        guard.wait(10)


async def test_an_agent_cannot_stop_or_kill_the_supervisor(hostile_app, mock_api, stop_guard):
    me, group = os.getpid(), os.getpgrp()
    attack = (f"kill -STOP {me}; echo \"stop rc=$?\"\n"
              f"kill -9 {me}; echo \"kill rc=$?\"\n"
              f"python3 -c 'import os; os.killpg({group}, 19)'; echo \"stop group rc=$?\"\n"
              f"python3 -c 'import os; os.killpg({group}, 9)'; echo \"kill group rc=$?\"\n"
              f"python3 -c 'import os; os.kill({me}, 19)'; echo \"python rc=$?\"\n")
    kill_all = 'kill -9 -1; echo "rc=$?" > "$PWD/kill-all.rc"; sleep 5\n'
    bystander, attacker = await spawn_fleet(
        hostile_app, ["bystander", "attacker"],
        ["TEXT: minding my own business", bash_script(attack)])
    by_cli = bystander.process.cli_pid
    [nuker] = await spawn_fleet(hostile_app, ["nuker"], bash_script(kill_all), until=("failed",))
    result = next(c.result for c in tool_calls(mock_api) if "stop rc=" in c.result)
    for probe in ("stop", "kill", "stop group", "kill group", "python"):
        assert f"{probe} rc=0" not in result, result
    assert result.count("No such process") >= 5, result
    # kill -9 -1 SIGKILLed the nuker's own CLI (exit 137), which ended its sandbox, and nothing
    # else. Its shell, spared by kill(-1), may have written the rc before the end came.
    assert "exit code 137" in (nuker.last_error or ""), nuker.last_error
    rc = Path(nuker.cwd) / "kill-all.rc"
    assert not rc.exists() or rc.read_text().strip() == "rc=0"
    assert not stop_guard.exists(), stop_guard.read_text()
    assert os.path.exists(f"/proc/{by_cli}") and bystander.process.alive()
    reply = await run(hostile_app, "/ask bystander TEXT: still here")
    assert reply.ok, reply.plain()
    await wait_for(lambda: bystander.state == "idle" and mock_api.requests
                   and "still here" in str(mock_api.requests[-1]), 60, "the bystander's answer")
    assert bystander.process.cli_pid == by_cli  # the same process, never touched
