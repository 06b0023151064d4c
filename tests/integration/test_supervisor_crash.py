"""SIGKILL of the supervisor itself: the next start finds and ends every process left behind.
The supervisor runs as a real `switchboard run` subprocess driven through its console."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from supervisor.config import Settings
from tests.conftest import processes_with_tag, settle
from tests.subproc import Supervisor, write_config

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]


@pytest.mark.parametrize("also_kill_launchers", [False, True], ids=["supervisor", "sup+launcher"])
def test_sigkill_of_supervisor_then_next_start_cleans_up(short_home, mock_api,
                                                         also_kill_launchers):
    home = short_home / "sb"
    write_config(home, mock_api, permissive=True)
    prefix = Settings(home=home).instance_id + "/"
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn bgkid BASH: (sh -c 'sleep 1000' &); echo started")
        sup.expect("[bgkid] ✓ turn finished")
        # The turn can end before the background sh has exec'd its sleep (the echo returns at
        # once): wait, bounded, for the sleep, the process this test is about.
        def with_sleep() -> list[psutil.Process] | None:
            procs = processes_with_tag(prefix)
            return procs if any(p.name() == "sleep" for p in procs) else None

        procs = settle(with_sleep, 20, "the background sleep")
        victims = [sup.proc.pid]
        if also_kill_launchers:
            victims += [p.ppid() for p in procs if p.name() == "claude"]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        sup.proc.wait(10)
    finally:
        sup.close()
    time.sleep(1.0)
    left = processes_with_tag(prefix)
    if also_kill_launchers:
        # The CLI's parent is the init of the agent's pid namespace: with it, the kernel ended
        # every process of the sandbox at once, background ones included. (Unsandboxed, the
        # orphans survived until the next start swept them by their tag.)
        assert not any(p.name() == "sleep" and p.is_running()
                       and p.status() != psutil.STATUS_ZOMBIE for p in left)
    sup2 = Supervisor(home)
    try:
        sup2.expect("Switchboard console")
        # ... until the next start sweeps them by their tag.
        deadline = time.monotonic() + 20
        while processes_with_tag(prefix) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with_tag(prefix) == []
        for p in left:
            assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
        sup2.send("/agents")
        sup2.expect("bgkid")
        sup2.send("/quit")
        sup2.proc.wait(30)
        assert sup2.proc.returncode == 0
    finally:
        sup2.close()
