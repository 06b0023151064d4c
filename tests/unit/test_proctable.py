"""Shared /proc snapshots (supervisor/process/proctable.py): many agents asking at once share a
scan, and each caller's scan began after it asked."""

from __future__ import annotations

import asyncio
import os
import subprocess

from supervisor import launcher
from supervisor.process.proctable import ProcTable, Snapshot


async def test_callers_asking_at_once_share_scans_taken_after_they_asked() -> None:
    table = ProcTable()
    env = {**os.environ, launcher.TAG_VAR: "inst/agent-1"}
    child = subprocess.Popen(["sleep", "60"], env=env)
    try:
        snaps = await asyncio.gather(*(table.snapshot() for _ in range(100)))
        assert table.scans <= 2, table.scans  # not one per caller
        assert all(child.pid in s.live for s in snaps)
        assert snaps[0].family(b"inst/") == {child.pid}
        assert snaps[0].family(b"inst/agent-1\0") == {child.pid}
        assert snaps[0].family(b"inst/agent-\0") == set()  # an exact tag is exact
        child.kill()
        child.wait()
        # Asked after the kill: the scan began after it, so it cannot show the dead child.
        assert child.pid not in (await table.snapshot()).live
    finally:
        child.kill()
        child.wait()


def test_an_exact_tag_finds_its_processes_and_their_trees_only() -> None:
    """The exact lookup goes through an index (300 agents each look theirs up in the same
    snapshot at shutdown): it must find what the pass over every tag found, and no more."""
    snap = Snapshot(children={10: [11], 11: [12], 20: [21]},
                    tags={10: b"i/a", 20: b"i/ab", 30: b"i/a"}, live={10, 11, 12, 20, 21, 30})
    assert snap.family(b"i/a\0") == {10, 11, 12, 30}
    assert snap.family(b"i/ab\0") == {20, 21}
    assert snap.family(b"i/b\0") == set()
    assert snap.family(b"i/a") == {10, 11, 12, 20, 21, 30}  # a prefix: every tag under it
