"""Transcripts in the bucket with the real CLI (mock API, GCS emulator): a supervisor SIGKILLed
in the middle of a Bash tool call, its data directory and the CLI's config directory gone, comes
back on the same bucket; the agent resumes its own session, the API accepts the next request (the
mock refuses an unpaired tool_use, as the real API does) and the agent is told its turn was
interrupted."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from supervisor.events import AgentState
from tests.conftest import processes_with_tag, run, wait_for
from tests.subproc import Supervisor, write_config

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

SLEEPER = "import time; time.sleep(120)"


def _bucket(host: str):
    from google.cloud import storage

    settings = Settings(home="/nonexistent", storage_emulator_host=host)
    return storage.Client(**settings.gcs_client_kwargs()).create_bucket("sb-transcripts")


def _poll(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _sleepers() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if SLEEPER in " ".join(p.info["cmdline"] or []):
            found.append(p)
    return found


def _mirrored_tool_use(bucket) -> str | None:
    """The Bash tool_use's id, once its line is in the bucket."""
    for blob in bucket.client.list_blobs(bucket, prefix="sessions/"):
        for line in blob.download_as_bytes().decode().splitlines():
            entry = json.loads(line)
            for block in (entry.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    return str(block["id"])
    return None


def _new_container(home: Path) -> None:
    """What a replaced container has: the database back (a stand-in for the snapshot restore,
    which is not this test's subject), and nothing else of the data directory or of the CLI's
    config directory."""
    saved = {p.name: p.read_bytes() for p in home.glob("switchboard.db*")}
    shutil.rmtree(home)
    shutil.rmtree(home.parent / "claude", ignore_errors=True)
    home.mkdir()
    for name, data in saved.items():
        (home / name).write_bytes(data)


def _snapshot_knows_the_running_session(bucket) -> bool:
    """The newest complete snapshot in the bucket has the turn under way and the session id of
    its agent (which the CLI tells once the turn has begun: Persistence.session_known)."""
    blob = bucket.blob("db/manifest.json")
    if not blob.exists():
        return False
    manifest = json.loads(blob.download_as_bytes())
    data = gzip.decompress(bucket.blob(manifest["object"]).download_as_bytes())
    with tempfile.NamedTemporaryFile(suffix=".db") as fh:
        fh.write(data)
        fh.flush()
        conn = sqlite3.connect(fh.name)
        try:
            return conn.execute(
                "SELECT 1 FROM turns JOIN agents ON agents.id = turns.agent_id"
                " WHERE turns.status = 'running' AND agents.session_id IS NOT NULL"
            ).fetchone() is not None
        finally:
            conn.close()


def test_sigkill_in_a_bash_call_then_a_new_container_resumes_the_session(
        short_home, mock_api, gcs_emulator):
    bucket = _bucket(gcs_emulator)
    home = short_home / "sb"
    # A short lease: the SIGKILLed supervisor never gives its agents' leases back, and the
    # new one waits them out (supervisor/persistence/bucket.py).
    write_config(home, mock_api, permissive=True, gcs_bucket="sb-transcripts", lease_ttl_s=3,
                 snapshot_debounce_s=0.2)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send(f"/spawn w BASH: python3 -c '{SLEEPER}'")
        _poll(_sleepers, 60, "the Bash command to run")
        tool_id = _poll(lambda: _mirrored_tool_use(bucket), 30, "the tool_use in the bucket")
        # The turn's start and the session id's arrival made snapshots: the bucket's database
        # knows the turn is running, and in which session.
        _poll(lambda: _snapshot_knows_the_running_session(bucket), 30,
              "a snapshot with the running turn and its session")
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
    finally:
        sup.close()
    # The container is gone, and its processes with it (the old CLI must not post the killed
    # command's result to the mock while the new supervisor starts).
    for p in processes_with_tag(f"{Settings(home=home).instance_id}/") + _sleepers():
        with contextlib.suppress(psutil.Error):
            p.kill()
    _poll(lambda: not _sleepers(), 10, "the old agent's processes to end")
    # A new container: nothing of the data directory (the database comes back from the
    # bucket's snapshot) nor of the CLI's config directory (the transcript comes from the
    # bucket's session store).
    shutil.rmtree(home)
    shutil.rmtree(home.parent / "claude", ignore_errors=True)
    # A short lease: the SIGKILLed supervisor never gives its agents' leases back, and the
    # new one waits them out (supervisor/persistence/bucket.py).
    write_config(home, mock_api, permissive=True, gcs_bucket="sb-transcripts", lease_ttl_s=3)
    before = len(mock_api.requests)

    sup2 = Supervisor(home)
    try:
        sup2.expect("Switchboard console")
        sup2.expect("w: a turn was interrupted")  # reported, not replayed
        sup2.send("/ask w TEXT: resumed-ok")
        sup2.expect("[w] resumed-ok")
        sup2.send("/quit")
        sup2.proc.wait(60)
    finally:
        sup2.close()
    assert mock_api.unpaired == []  # the API accepted every request after the resume
    asked = mock_api.requests[before:]
    assert len(asked) == 1
    messages = asked[0]["messages"]
    # Its own session: the earlier conversation is sent again, the cut tool call closed.
    flat = json.dumps(messages)
    assert SLEEPER in flat
    uses = [i for i, m in enumerate(messages) if any(
        b.get("type") == "tool_use" and b.get("id") == tool_id
        for b in m["content"] if isinstance(m["content"], list))]
    assert len(uses) == 1
    answer = messages[uses[0] + 1]
    assert any(b.get("type") == "tool_result" and b.get("tool_use_id") == tool_id
               for b in answer["content"])
    # Told it was restarted and that its last turn was interrupted, with the new message last.
    last_texts = [b["text"] for b in messages[-1]["content"] if b.get("type") == "text"]
    assert last_texts[-1] == "TEXT: resumed-ok"
    assert any("The supervisor was restarted at" in t and "last turn was interrupted" in t
               for t in last_texts)


def test_a_deleted_transcript_gives_resume_failed_and_one_question_not_a_fresh_session(
        short_home, mock_api, gcs_emulator):
    bucket = _bucket(gcs_emulator)
    home = short_home / "sb"
    write_config(home, mock_api, permissive=True, gcs_bucket="sb-transcripts")
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn w TEXT: first-done")
        sup.expect("[w] first-done")
        _poll(lambda: list(bucket.client.list_blobs(bucket, prefix="sessions/")), 30,
              "the transcript in the bucket")
        sup.send("/quit")
        sup.proc.wait(60)
    finally:
        sup.close()
    for blob in bucket.client.list_blobs(bucket, prefix="sessions/"):
        blob.delete()
    _new_container(home)
    write_config(home, mock_api, permissive=True, gcs_bucket="sb-transcripts")
    before = len(mock_api.requests)

    sup2 = Supervisor(home)
    try:
        sup2.expect("Switchboard console")
        sup2.send("/ask w TEXT: second")
        sup2.expect("starting → resume_failed")
        question = sup2.expect("w: its session could not be resumed")
        esc_id = question.split("❓", 1)[1].split("·", 1)[0].strip()
        # Deterministic: nothing retries it, and another message is refused, saying why.
        sup2.send("/ask w TEXT: third")
        sup2.expect("w's session could not be resumed")
        assert len(mock_api.requests) == before  # no fresh session behind the operator's back
        # The operator's choice: a fresh session whose first message is a summary.
        sup2.send(f"/answer {esc_id} 1")
        sup2.expect("[w] second")
        sup2.send("/quit")
        sup2.proc.wait(60)
    finally:
        sup2.close()
    fresh = mock_api.requests[before:]
    assert len(fresh) == 1 and "first-done" not in json.dumps(fresh[0]["messages"][:-1])
    texts = [b["text"] for b in fresh[0]["messages"][-1]["content"] if b.get("type") == "text"]
    assert texts[-1] == "TEXT: second"
    assert any("could not be resumed" in t and "TEXT: first-done" in t for t in texts)


async def test_without_a_bucket_a_lost_transcript_is_resume_failed_not_a_crash_loop(
        permissive_settings, short_home, mock_api):
    async with Switchboard(permissive_settings) as app:
        await run(app, "/spawn w TEXT: one")
        runner = await app.pool.fleet.get("w")
        await wait_for(lambda: runner.state == AgentState.IDLE and runner.session_id, 60,
                       "the first turn")
        sid = runner.session_id
    lost = list(short_home.rglob(f"{sid}.jsonl"))
    assert lost
    for f in lost:
        f.unlink()
    before = len(mock_api.requests)
    async with Switchboard(permissive_settings) as app:
        await run(app, "/ask w TEXT: two")
        runner = await app.pool.fleet.get("w")
        await wait_for(lambda: runner.state == AgentState.RESUME_FAILED, 60, "resume_failed")
        # The question is opened just after the state is stored: wait for it, not for a moment.
        await wait_for(lambda: app.pool.escalations.pending(runner.id), 30, "the question")
        [question] = await app.pool.escalations.pending(runner.id)
        assert question.title == "w: its session could not be resumed"
        reply = await run(app, "/ask w TEXT: three")
        assert "could not be resumed" in reply.plain()
        assert [e.id for e in await app.pool.escalations.pending(runner.id)] == [question.id]
        # "Leave it", then another message: refused again, and the choice offered again.
        assert (await run(app, f"/answer {question.id} 2")).ok
        assert await app.pool.escalations.pending(runner.id) == []
        assert "could not be resumed" in (await run(app, "/ask w TEXT: four")).plain()
        assert [e.title for e in await app.pool.escalations.pending(runner.id)] == [
            "w: its session could not be resumed"]
        assert runner.state == AgentState.RESUME_FAILED
        assert (runner.last_error or "").startswith("resume failed: the claude CLI found no "
                                                    "conversation")
    assert len(mock_api.requests) == before  # never a fresh session in its place


async def test_batches_the_bucket_refuses_are_kept_logged_and_told_once(
        permissive_settings, gcs_emulator, caplog):
    settings = permissive_settings.with_(gcs_bucket="no-such-bucket",
                                         storage_emulator_host=gcs_emulator, kill_poll_s=3600.0)
    title = "w: its transcript is not fully in the bucket"

    async def told(app: Switchboard) -> list[str]:
        rows = await app.store.escalations.undelivered("test", limit=1000)
        return [r.title for r in rows if r.title == title]

    async with Switchboard(settings) as app:
        await run(app, "/spawn w TEXT: one")
        await wait_for(lambda: told(app), 60, "the mirror-error notice")
        await run(app, "/ask w TEXT: two")
        runner = await app.pool.fleet.get("w")
        await wait_for(lambda: runner.state == AgentState.IDLE and not runner.busy, 60,
                       "the second turn")
        assert any("transcript mirror failed" in r.getMessage() for r in caplog.records)
        # One notice: the outage's later batches wait behind the first, kept, not reported.
        assert len(await told(app)) == 1
        assert app.pool.session_store.waiting > 1
