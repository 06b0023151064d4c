"""SIGKILL of the supervisor with open escalations: none is lost, each is closed as interrupted with
a notice, the agent is told on resume, and a front end that reconnects gets every undelivered
row exactly once by id."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from store import open_store
from supervisor.config import Settings
from tests.conftest import agent_dir, files_under
from tests.subproc import Supervisor, write_config

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]


async def _rows(home):
    store = await open_store(Settings(home=home).db_path, read_only=True)
    try:
        return {r.id: r for r in await store.escalations.undelivered("phone", limit=1000)}
    finally:
        await store.db.close()


def _transcripts(home) -> list[str]:
    """The agents' session files (in their private config directories) that hold a tool call."""
    found = []
    for path in files_under(home, ".jsonl"):
        try:
            if '"tool_use"' in path.read_text(errors="replace"):
                found.append(str(path))
        except OSError:
            continue
    return found


def test_open_escalations_survive_a_supervisor_sigkill(short_home, mock_api, tmp_path):
    home = short_home / "sb"
    write_config(home, mock_api)
    for name in ("w1", "w2"):
        agent_dir(tmp_path / name)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send(f"/spawn w1 --cwd {tmp_path / 'w1'} BASH: touch one.txt")
        sup.expect("w1 wants to use Bash")
        sup.send(f"/spawn w2 --cwd {tmp_path / 'w2'} BASH: touch two.txt")
        sup.expect("w2 wants to use Bash")
        # Each CLI has written its session (with the tool call waiting for the answer) before
        # the kill: the CLI writes it on its own time, and one killed first has none to resume
        # (that case is resume_failed: tests/integration/test_transcripts_real.py).
        deadline = time.monotonic() + 30
        while len(_transcripts(home)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_transcripts(home)) == 2, _transcripts(home)
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
    finally:
        sup.close()
    before = asyncio.run(_rows(home))
    asked = {i for i, r in before.items() if r.kind == "permission"}
    assert len(asked) == 2 and all(before[i].status == "open" for i in asked)

    sup2 = Supervisor(home)
    try:
        sup2.expect("Switchboard console")
        sup2.expect("Interrupted: w1 wants to use Bash")
        sup2.expect("Interrupted: w2 wants to use Bash")
        # The agents resume with a note that their request went unanswered.
        sup2.expect("not answered because the supervisor restarted", 90)
        # What waits now is the operator's choice about each interrupted turn, not replayed.
        sup2.send("/pending")
        sup2.expect("== 2 waiting ==")
        sup2.expect_all(["w1: a turn was interrupted", "w2: a turn was interrupted"])
        sup2.send("/quit")
        sup2.proc.wait(60)
    finally:
        sup2.close()
    assert not (tmp_path / "w1" / "one.txt").exists()
    after = asyncio.run(_rows(home))
    assert all(after[i].status == "interrupted" for i in asked)
    # A phone front end that never saw any of this gets each row once, nothing lost or doubled.
    assert set(before) <= set(after)
    ids = list(after)
    assert len(ids) == len(set(ids))
    assert any(r.title.startswith("Interrupted:") for r in after.values())
