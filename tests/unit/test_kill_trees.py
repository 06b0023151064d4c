"""The kill switch's first two steps (supervisor/process/tree.py): `kill_trees` SIGKILLs each
known root and every process under it once its tree is counted, and `sweep(dying=...)` waits
for those instead of signalling them again. Neither may leave a process behind, even for a
root that is not a pid namespace's init, or a `dying` pid that nothing signalled."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from supervisor import launcher
from supervisor.process.tree import kill_trees, start_time, sweep
from tests.conftest import processes_with_tag


@contextmanager
def parent_and_child() -> Iterator[tuple[str, subprocess.Popen[bytes], int]]:
    """A tagged shell that forks a `sleep` and waits: the child outlives its parent's SIGKILL
    (no pid namespace here). Yields the tag's prefix, the parent and the child's pid."""
    prefix = f"t-{uuid.uuid4().hex[:8]}/"
    env = {**os.environ, launcher.TAG_VAR: prefix + "agent-1"}
    parent = subprocess.Popen(["sh", "-c", "sleep 60 >/dev/null & echo x; wait"], env=env,
                              stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"x\n"
        [child] = [p.pid for p in processes_with_tag(prefix) if p.pid != parent.pid]
        yield prefix, parent, child
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        for p in processes_with_tag(prefix):
            p.kill()


def test_kill_trees_ends_every_process_of_each_tree_not_only_its_root() -> None:
    with parent_and_child() as (prefix, parent, child):
        assert kill_trees([parent.pid]) == {parent.pid, child}
        parent.wait(5)
        deadline = time.monotonic() + 5  # a bound on its exit, not a speed goal
        while processes_with_tag(prefix) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert processes_with_tag(prefix) == []


def test_a_known_pid_that_is_no_longer_an_agents_is_not_killed() -> None:
    """The kill switch's known pids were learnt when the agents started: one that ended since
    may be another program's now, which started at another time. Its tree is left alone; an
    agent's, whose start time matches, is ended."""
    stranger = subprocess.Popen(["sleep", "60"])  # as if it had reused a known pid
    try:
        at = start_time(stranger.pid)
        assert at is not None
        with parent_and_child() as (prefix, parent, child):
            started = {stranger.pid: at - 1, parent.pid: start_time(parent.pid) or -1}
            ended = kill_trees([stranger.pid, parent.pid], started)
            assert ended == {parent.pid, child}
            assert stranger.poll() is None
        assert kill_trees([stranger.pid], {stranger.pid: at}) == {stranger.pid}
        assert stranger.wait(5) == -9
    finally:
        stranger.kill()
        stranger.wait()


def test_the_sweep_ends_a_dying_pid_that_nothing_signalled() -> None:
    with parent_and_child() as (prefix, parent, child):
        ended = sweep(prefix + "agent-1\0", dying={child})  # wrongly said to be dying
        assert {parent.pid, child} <= set(ended)
        assert processes_with_tag(prefix) == []
