"""A kill returns once its processes have really exited: a process in the middle of exiting
has dropped its memory (its tag reads empty, a scan no longer finds it) but is still there;
supervisor/process/tree.py waits for such pids, bounded, until they are gone or zombies, and
the event loop through pidfds (supervisor/process/agent.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from supervisor.process import tree as process
from supervisor.process.agent import _pid_exit


def test_a_live_process_is_exiting_until_it_is_a_zombie_or_gone() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert process._exiting([proc.pid]) == {proc.pid}
        os.kill(proc.pid, signal.SIGKILL)
        # Not reaped yet: a zombie, which has finished exiting.
        deadline = time.monotonic() + 10
        process._wait_dead({proc.pid}, deadline)
        assert process._exiting([proc.pid]) == set()
        assert time.monotonic() < deadline
    finally:
        proc.kill()
        proc.wait()
    assert process._exiting([proc.pid]) == set()  # reaped: gone


def test_the_wait_is_bounded_when_a_pid_stays() -> None:
    """A pid that stays (reused meanwhile, or a process that will not die) cannot hold a kill
    up past the bound."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        process._wait_dead({proc.pid}, time.monotonic() + 0.05)
        assert process._exiting([proc.pid]) == {proc.pid}
    finally:
        proc.kill()
        proc.wait()


def test_the_wait_goes_a_batch_of_pidfds_at_a_time_and_returns_what_stays() -> None:
    """Killed processes are waited for through pidfds, a batch at a time; what is still there at
    the deadline comes back, and nothing gone does."""
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(5)]
    try:
        for proc in procs[:4]:
            proc.kill()
        left = process._wait_dead([p.pid for p in procs], time.monotonic() + 0.5, batch=2)
        assert left == [procs[4].pid]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_without_a_free_file_descriptor_the_wait_reads_proc() -> None:
    """At the open-files limit no pidfd can be opened: each pid is then looked at through
    /proc, and the wait still ends when the processes have exited (a child interpreter with a
    limit it has filled)."""
    script = textwrap.dedent("""
        import os, resource, signal, subprocess, time
        from supervisor.process import tree
        procs = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 4, used + 4))
        try:
            while True:
                os.open("/dev/null", os.O_RDONLY)  # every descriptor taken
        except OSError:
            pass
        try:
            os.pidfd_open(procs[0].pid)
        except OSError as exc:
            print("no pidfd:", exc.strerror)
        for p in procs:
            p.send_signal(signal.SIGKILL)
        left = tree._wait_dead([p.pid for p in procs], time.monotonic() + 10)
        print("left:", left)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "no pidfd: Too many open files" in out and "left: []" in out, out


async def test_the_loop_is_woken_by_an_exit_through_a_pidfd_not_a_proc_read() -> None:
    """`_pid_exit` (supervisor/process/agent.py): False while the process runs, True once it
    is a zombie (not reaped: its pidfd is readable all the same) or gone."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert not await _pid_exit(proc.pid, 0.05)  # still running: the bound ends the wait
        os.kill(proc.pid, signal.SIGKILL)
        assert await _pid_exit(proc.pid, 10)
        assert process._exiting([proc.pid]) == set()  # a zombie, not yet reaped
    finally:
        proc.kill()
        proc.wait()
    assert await _pid_exit(proc.pid, 10)  # reaped: gone
