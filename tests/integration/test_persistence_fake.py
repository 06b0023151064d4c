"""A replaced container on the fake CLI: a supervisor with agents, an open escalation and bus
messages stops; its data directory is deleted; a new one on the same bucket has every row back
and its agents running. Two supervisors on one bucket never drive one agent."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from supervisor.persistence.leases import Leases
from supervisor.persistence.remote import GcsRemote
from tests.conftest import run, wait_for
from tests.fakes.gcs import Emulator

pytestmark = [pytest.mark.timeout(120)]

TABLES = {
    "escalations": "SELECT id FROM escalations",
    "messages": "SELECT id FROM bus_messages",
    "turns": "SELECT id, cost_usd FROM turns",
    "audit": "SELECT id FROM audit",
    "agents": "SELECT id, name FROM agents",
    "schedules": "SELECT id, spec, tz, target, prompt, enabled FROM schedules",
}


def _rows(db: Path) -> dict[str, set[tuple[object, ...]]]:
    conn = sqlite3.connect(db)
    try:
        return {k: set(conn.execute(q).fetchall()) for k, q in TABLES.items()}
    finally:
        conn.close()


async def _idle(app: Switchboard, name: str) -> None:
    """Idle with nothing open for it on the bus: a leased message whose turn has not begun yet
    shows as idle with nothing queued, and would be cut by the stop and run after the restore."""
    r = await app.pool.fleet.get(name)  # type: ignore[union-attr]
    store = app.store
    assert store is not None

    async def settled() -> bool:
        row = await store.db.fetchone(
            "SELECT COUNT(*) FROM bus_deliveries WHERE recipient_id = ? AND state IN "
            "('queued', 'leased')", (r.id,))
        return r.state == "idle" and not r.busy and r.queued == 0 and row[0] == 0

    await wait_for(settled, 30, f"{name} idle")


@pytest.fixture
def bucket_settings(fake_settings: Settings, gcs: Emulator) -> Settings:
    return fake_settings.with_(gcs_bucket="sb", storage_emulator_host=gcs.host)


async def test_a_new_data_directory_comes_back_from_the_bucket(bucket_settings: Settings) -> None:
    """Acceptance 1, on the fake CLI: every escalation, message, cost and audit row is back,
    and the agents with it."""
    settings = bucket_settings
    async with Switchboard(settings) as app:
        assert (await run(app, "/spawn a hello")).ok and (await run(app, "/spawn b hi")).ok
        await _idle(app, "a")
        await _idle(app, "b")
        assert (await run(app, '/ask a MCP send_message {"to": "b", "type": "task", '
                               '"body": "review it"}')).ok
        assert (await run(app, '/ask b MCP send_message {"to": "operator", '
                               '"type": "question", "body": "merge now?"}')).ok

        async def asked() -> bool:
            return any(e.body == "merge now?" for e in await app.api.pending())  # type: ignore[union-attr]

        await wait_for(asked, 30, "the open question")
        await _idle(app, "a")
        await _idle(app, "b")  # its turn ends after the question is sent: idle when restored
    before = _rows(settings.db_path)
    assert before["escalations"] and before["messages"] and before["audit"]
    assert sum(float(c) for _, c in before["turns"]) > 0  # type: ignore[arg-type]

    shutil.rmtree(settings.home)  # the container is gone, the bucket stays
    async with Switchboard(settings) as app:
        assert app.persistence is not None and app.persistence.restored is not None
        assert app.persistence.restored.decision.action == "restore"
        after = _rows(settings.db_path)
        for table, rows in before.items():
            assert rows <= after[table], f"{table}: {rows - after[table]} missing"
        # The agents are back, alive, each to resume its session on its next message. b's
        # question died with the old supervisor: b is told so at once, a turn that resumes
        # its session. The fake CLI keeps no transcript, so that resume fails, and says why
        # (the real CLI's resume is test_persistence_real.py's).
        pool = app.pool
        assert pool is not None
        await wait_for(lambda: {(r.name, r.state) for r in pool.fleet.everyone()}
                       == {("a", "idle"), ("b", "resume_failed")}, 30,
                       "a back and idle, b's resume refused")
        b = await pool.fleet.get("b")
        assert "neither on this disk nor in the bucket" in (b.last_error or "")
        status = await run(app, "/status")
        assert "Last snapshot: generation" in status.plain()


async def test_two_supervisors_on_one_bucket_never_drive_one_agent(
        bucket_settings: Settings, gcs: Emulator, tmp_path: Path) -> None:
    async with Switchboard(bucket_settings) as app:
        assert (await run(app, "/spawn a hello")).ok
        await _idle(app, "a")
        agent_id = (await app.pool.fleet.get("a")).id  # type: ignore[union-attr]
        # Another supervisor (another instance id) on the same bucket wants the same agent.
        other = Leases(GcsRemote("sb", client_kwargs=bucket_settings.gcs_client_kwargs()),
                       "other-supervisor", settle_s=0.05)
        taken, refused = other.acquire([agent_id])
        assert not taken and refused and refused[0].holder == app.persistence.holder  # type: ignore[union-attr]
        held = app.persistence.leases.held[agent_id]  # type: ignore[union-attr]
        # Seen from a clock past the expiry (this supervisor stopped renewing, say), the other
        # takes it over; at its next renewal this one finds that and ends a's process here.
        runner = await app.pool.fleet.get("a")  # type: ignore[union-attr]
        assert runner.process is not None
        late = Leases(other.remote, "other-supervisor", settle_s=0.05,
                      now=lambda: time.time() + 3600)
        assert late.acquire([agent_id])[0]
        snap = app.persistence.snapshots  # type: ignore[union-attr]
        await asyncio.to_thread(snap._renew)  # the thread's renewal, run once
        await wait_for(lambda: runner.process is None, 20, "a's process ended here")
        assert agent_id not in app.persistence.leases.held  # type: ignore[union-attr]
    # The fencing token only grew: 1 here, 2 for the other's take-over, 3 for its next take
    # (a supervisor that holds it for long).
    alive = Leases(other.remote, "other-supervisor", ttl_s=3600, settle_s=0.05)
    taken, refused = alive.acquire([agent_id])
    assert taken and not refused and taken[0].token == held.token + 2
    # While the other holds it, a supervisor restored from the bucket does not start agent a.
    shutil.rmtree(bucket_settings.home)
    async with Switchboard(bucket_settings) as app:
        reply = await run(app, "/ask a still there?")
        assert reply.ok
        r = await app.pool.fleet.get("a")  # type: ignore[union-attr]
        await wait_for(lambda: r.state == "failed", 30, "a refused")
        assert "driven by another supervisor (other-supervisor)" in (r.last_error or "")
        assert r.process is None
        # A holder that died without giving the lease back (a SIGKILLed container): its
        # lease ends within one TTL, and the agent waits that out once instead of failing.
        alive.release()
        dead = Leases(other.remote, "dead-supervisor", ttl_s=1.0, settle_s=0.05)
        assert dead.acquire([agent_id])[0]
        assert (await run(app, "/ask a after the wait")).ok
        leases = app.persistence.leases  # type: ignore[union-attr]
        await wait_for(lambda: agent_id in leases.held, 30, "the lease, after the wait")
        assert leases.held[agent_id].token == held.token + 4
        # Let through to the session's resume (which the fake CLI, keeping no transcript,
        # cannot do: that is the transcripts' part).
        await wait_for(lambda: r.state == "resume_failed", 30, "a past the lease")

async def test_a_turn_end_uploads_a_snapshot_soon_after(bucket_settings: Settings,
                                                        gcs: Emulator) -> None:
    """After turns end (debounced), not only at shutdown or on the schedule."""
    settings = bucket_settings.with_(snapshot_debounce_s=0.2, snapshot_interval_s=3600.0)
    async with Switchboard(settings) as app:
        assert (await run(app, "/spawn a hello")).ok
        await _idle(app, "a")
        snap = app.persistence.snapshots  # type: ignore[union-attr]
        await wait_for(lambda: snap.last is not None, 20, "the snapshot after the turn")
        first = snap.last.generation
        assert (await run(app, "/ask a again")).ok
        await wait_for(lambda: snap.last.generation > first, 20, "one more after the next turn")
        manifest = gcs.bucket("sb").blob("db/manifest.json").download_as_bytes()
        assert f'"generation": {snap.last.generation}'.encode() in manifest
