"""Faults in the supervisor's core: cancellation in the kill path and in close, what the API
lets reach an agent, the kill-switch watcher surviving its own errors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest
from claude_agent_sdk import ClaudeAgentOptions

from supervisor.process.agent import TAG_VAR, AgentProcess
from supervisor.sanitize import clean

pytestmark = pytest.mark.timeout(30)


def _stubborn(tag: str) -> subprocess.Popen[bytes]:
    """A tagged process that ignores SIGTERM, as a wedged CLI would."""
    env = {**os.environ, TAG_VAR: tag}
    return subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 1; done"], env=env,
                            start_new_session=True)


def _ignores_term(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as fh:
        mask = next(line for line in fh if line.startswith("SigIgn:")).split()[1]
    return bool(int(mask, 16) & (1 << (15 - 1)))  # SIGTERM is signal 15


async def _until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_kill_cancelled_during_its_grace_wait_still_kills():
    """Regression: kill() cancelled while it waited out the SIGTERM grace period returned
    with the process alive (the SIGKILL after the wait never ran)."""
    tag = f"test-{os.getpid()}/cancelled-kill"
    child = _stubborn(tag)
    try:
        proc = AgentProcess(tag=tag, options=ClaudeAgentOptions(env={}))
        proc.launcher_pid = child.pid
        await _until(lambda: _ignores_term(child.pid))
        task = asyncio.create_task(proc.kill(grace_s=20))
        for _ in range(3):
            await asyncio.sleep(0)  # SIGTERM sent; now in the grace wait
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _until(lambda: child.poll() is not None)  # the cancelled kill killed it
        assert proc.members() == []
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


@pytest.mark.parametrize(("raw", "cleaned"), [
    ("plain text", "plain text"),
    ("lone \ud800 high, lone \udfff low", "lone \ufffd high, lone \ufffd low"),
    ("pair \ud83d\ude00 joined", "pair \U0001f600 joined"),
    # Escape sequences go whole (the one sanitiser strips them): "\x9b d" is a C1 CSI.
    ("bell\x07 esc\x1b[2J csi\x9b del\x7f nul\x00", "bell esc csiel nul"),
    ("keeps\ttabs\nand lines\r\nand CR\ralone", "keeps\ttabs\nand lines\nand CR\nalone"),
    ("émoji 😀 日本語", "émoji 😀 日本語"),
])
def test_clean_replaces_surrogates_and_drops_controls(raw, cleaned):
    out = clean(raw).text
    assert out == cleaned
    out.encode("utf-8")  # always encodable


async def test_a_cancel_landing_as_close_finishes_is_never_lost():
    """Regression: close() bounded the SDK's disconnect with asyncio.wait_for, which on 3.11
    returns normally when the cancel lands just as the disconnect finishes. The runner's loop
    then carried on through shutdown (hundreds of "agent loop did not stop" per bench run)."""
    lost = []
    for yields in range(8):  # the cancel lands at each step of close() in turn
        proc = AgentProcess(tag=f"test-{os.getpid()}/close-{yields}",
                            options=ClaudeAgentOptions(env={}))
        task = asyncio.create_task(proc.close(kill=False))
        for _ in range(yields):
            await asyncio.sleep(0)
        if not task.cancel():
            continue  # it had finished: nothing to lose
        try:
            await task
        except asyncio.CancelledError:
            continue
        lost.append(yields)
    assert lost == []


async def test_a_notice_the_store_refuses_is_held_and_delivered_to_every_front_end(tmp_path):
    """The notice that reports storage trouble cannot go through the store that has it: it is
    held in memory, follow() delivers it to each front end, and ack() retires it per front
    end, touching no database."""
    from store import open_store
    from supervisor.events import EventHub
    from supervisor.guard.escalations import Escalations, Timeouts

    store = await open_store(tmp_path / "db.sqlite")
    try:
        esc = Escalations(store, EventHub(), Timeouts())
        await store.db._w().execute("PRAGMA query_only = 1")
        row = await esc.notify(None, "⚠ Storage trouble: full", "free space")
        for frontend in ("telegram", "console"):
            follower = esc.follow(frontend)
            got = await asyncio.wait_for(anext(follower), 5)
            assert (got.id, got.title) == (row.id, "⚠ Storage trouble: full")
            await esc.ack(row.id, frontend)
            await follower.aclose()
        assert esc.held("telegram") == [] and esc.held("slack") == [row]
        await store.db._w().execute("PRAGMA query_only = 0")
        assert await store.escalations.undelivered("telegram") == []  # never in the store
    finally:
        await store.db.close()


async def test_a_delivery_the_store_cannot_record_does_not_stop_delivery(tmp_path):
    """Regression: acknowledging a delivered row raised when the store took no writes, and a
    front end's delivery loop (which acknowledges outside its error handling) ended for good,
    just when the storage-trouble notice needed delivering."""
    from store import open_store
    from supervisor.events import EventHub
    from supervisor.guard.escalations import Escalations, Timeouts

    store = await open_store(tmp_path / "db.sqlite")
    try:
        esc = Escalations(store, EventHub(), Timeouts())
        before = await esc.notify(None, "stored before the trouble")
        await store.db._w().execute("PRAGMA query_only = 1")
        follower = esc.follow("telegram")
        assert (await asyncio.wait_for(anext(follower), 5)).id == before.id
        await esc.ack(before.id, "telegram")  # raised StoreFailed underneath before
        trouble = await esc.notify(None, "⚠ Storage trouble")
        got = await asyncio.wait_for(anext(follower), 5)
        assert got.id == trouble.id  # the stored row is not sent again
        await follower.aclose()
        await store.db._w().execute("PRAGMA query_only = 0")
    finally:
        await store.db.close()
