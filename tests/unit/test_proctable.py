"""Shared /proc snapshots (supervisor/process/proctable.py): many agents asking at once share a
scan, and each caller's scan began after it asked."""

from __future__ import annotations

import asyncio
import os
import subprocess

from supervisor import launcher
from supervisor.process.proctable import ProcTable


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
