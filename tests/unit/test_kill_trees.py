"""The kill switch's first two steps (supervisor/process/tree.py): `kill_trees` SIGKILLs each
known root once its tree is counted, and `sweep(dying=...)` waits for that tree instead of
signalling it again. A root whose SIGKILL does not end its tree (a process that is not a pid
namespace's init) must not leave a process behind."""

from __future__ import annotations

import os
import subprocess
import uuid

from supervisor import launcher
from supervisor.process.tree import kill_trees, sweep
from tests.conftest import processes_with_tag


def test_a_known_tree_its_root_does_not_end_is_still_ended_by_the_sweep() -> None:
    prefix = f"t-{uuid.uuid4().hex[:8]}/"
    env = {**os.environ, launcher.TAG_VAR: prefix + "agent-1"}
    # A parent that forks a child and waits: the child outlives a SIGKILL of its parent.
    parent = subprocess.Popen(["sh", "-c", "sleep 60 >/dev/null & echo x; wait"], env=env,
                              stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"x\n"
        [child] = [p for p in processes_with_tag(prefix) if p.pid != parent.pid]
        dying = kill_trees([parent.pid])
        assert dying == {parent.pid, child.pid}  # both counted, only the parent signalled
        parent.wait(5)
        ended = sweep(prefix, dying=dying)
        assert child.pid in ended
        assert processes_with_tag(prefix) == []
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        for p in processes_with_tag(prefix):
            p.kill()
