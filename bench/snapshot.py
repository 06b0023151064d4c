"""Snapshots to the bucket: their time and bytes, and a cold start from the bucket.

Run from the repository root:  .venv/bin/python bench/snapshot.py  (or `make bench`)

Against the GCS emulator (tests/fakes/gcs.py: gcp-storage-emulator, the real
google-cloud-storage client) and fake claude agents (tests/fakes/fake_claude.py):

* snapshot: a Switchboard with a bucket and AGENTS agents, each having answered one turn, plus
  EVENTS agent events (rows like a tool call's: kind, summary and a JSON body of about 300
  bytes) written into its database. Timed: one snapshot by the snapshot thread's own run-once
  (`Snapshotter.run_once`: the backup API's copy, gzip, sha256, the upload, the manifest), its
  compressed and raw bytes, and a second run-once with nothing changed (the data_version check
  that makes a scheduled snapshot free when nothing happened).
* cold start: the same data directory, stopped; then started twice to "every agent ready"
  (every agent has answered one message, so its process runs): once with the data on local disk,
  once with the data directory deleted, so the start restores the database from the bucket
  first (and takes every agent's lease again). Each timed from the start of `Switchboard(...)`
  to the last of the AGENTS turns done; ROUNDS of each, alternated, the best of each kept (the
  host is shared: the best is the least disturbed).

The fake CLI keeps no session transcript, so here an agent's transcript is not brought back
from the bucket before its resume (the fake resumes any session id): the cold start measured is
the database's restore and the fleet's start, without the transcripts' download (one listing and
one read per agent: see docs/persistence.md#transcripts).

Prints each figure with its goal and the ratio cold / local. About two minutes on 2 CPUs.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import supervisor.agents.runner as runner_module  # noqa: E402
from bench._common import quiet_logging, result, scratch_dir, smoke, wait_until  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from supervisor.config import Settings  # noqa: E402
from supervisor.persistence.remote import open_remote  # noqa: E402
from supervisor.persistence.snapshots import restore_on_start  # noqa: E402
from tests.conftest import make_settings  # noqa: E402
from tests.fakes.gcs import Emulator  # noqa: E402

AGENTS = 10 if smoke() else 100
EVENTS = 10_000 if smoke() else 100_000
READY_TIMEOUT_S = 300.0
SNAPSHOT_GOAL_S = 5.0
UNCHANGED_GOAL_MS = 50.0
COLD_GOAL_RATIO = 2.0
ROUNDS = 2


def _add_events(db: Path, agent_ids: list[str]) -> None:
    conn = sqlite3.connect(db, timeout=30)
    body = json.dumps({"tool": "Bash", "input": {"command": "pytest -q tests/unit/test_x.py"},
                       "output": "." * 200})
    rows = ((agent_ids[i % len(agent_ids)], None, "tool_use", f"Bash: pytest -q #{i}", body,
             time.time()) for i in range(EVENTS))
    with conn:
        conn.executemany("INSERT INTO agent_events (agent_id, turn_id, kind, summary, data, at)"
                         " VALUES (?,?,?,?,?,?)", rows)
    conn.close()


async def _ready(app: Switchboard, prompt: str) -> None:
    assert app.store is not None
    for r in app.pool.fleet.live():  # type: ignore[union-attr]
        reply = await app.run_command(_admin(), f"/ask {r.id} {prompt}")
        assert reply.ok, reply.plain()
    store = app.store

    async def count() -> int:
        row = await store.db.fetchone("SELECT COUNT(*) AS n FROM turns WHERE prompt = ? AND "
                                      "status = 'ok'", (prompt,))
        return int(row["n"]) if row else 0

    deadline = time.monotonic() + READY_TIMEOUT_S
    while await count() < AGENTS:
        if time.monotonic() > deadline:
            raise TimeoutError("agents not ready")
        await asyncio.sleep(0.05)


def _admin():  # type: ignore[no-untyped-def]
    from tests.conftest import ADMIN

    return ADMIN


async def _timed_start(settings: Settings, prompt: str) -> float:
    t0 = time.monotonic()
    async with Switchboard(settings) as app:
        await _ready(app, prompt)
        took = time.monotonic() - t0
    return took


async def _no_transcript(*_args: object) -> None:
    return None  # the fake CLI has none to bring back, and resumes without one


async def main() -> int:
    quiet_logging()
    runner_module.bring_back = _no_transcript  # type: ignore[assignment]
    with scratch_dir("sbsn") as d:
        emu = Emulator(d / "gcs")
        emu.start()
        try:
            emu.bucket("sb")
            settings = make_settings(d, fake=True).with_(
                gcs_bucket="sb", storage_emulator_host=emu.host, max_agents=AGENTS + 5,
                snapshot_interval_s=3600.0, spawns_per_minute=10_000,
                commands_per_minute=10_000)
            async with Switchboard(settings) as app:
                for i in range(AGENTS):
                    reply = await app.run_command(_admin(), f"/spawn a{i} hello")
                    assert reply.ok, reply.plain()
                runners = app.pool.fleet.live()  # type: ignore[union-attr]
                await wait_until(lambda: all(r.state == "idle" and not r.busy
                                             for r in runners), READY_TIMEOUT_S,
                                 "every agent idle", interval=0.05)
                await asyncio.to_thread(_add_events, settings.db_path, [r.id for r in runners])
                snap = app.persistence.snapshots  # type: ignore[union-attr]
                assert snap is not None
                t0 = time.monotonic()
                assert await asyncio.to_thread(snap.run_once, "bench") == "uploaded"
                snap_s = time.monotonic() - t0
                assert snap.last is not None
                size = snap.last.size
                raw = settings.db_path.stat().st_size
                t0 = time.monotonic()
                unchanged = await asyncio.to_thread(snap.run_once, "bench")
                unchanged_ms = (time.monotonic() - t0) * 1000
            local, cold = [], []
            for n in range(ROUNDS):  # alternated, so a busy moment on the host hits both
                local.append(await _timed_start(settings, f"ready on local disk {n}"))
                shutil.rmtree(settings.home)
                cold.append(await _timed_start(settings, f"ready after a restore {n}"))
            local_s, cold_s = min(local), min(cold)
            # The restore alone, into a data directory of its own: manifest, download,
            # checksum, integrity check, install.
            probe = settings.with_(home=d / "probe")
            remote = open_remote(probe)
            assert remote is not None
            t0 = time.monotonic()
            restored = await asyncio.to_thread(restore_on_start, probe, remote)
            restore_s = time.monotonic() - t0
            assert restored.generation is not None
        finally:
            emu.stop()
    ratio = cold_s / local_s
    print(f"snapshot: {AGENTS} agents, {EVENTS:,} events")
    print(f"one snapshot (backup API, gzip, upload, manifest): {snap_s:.2f} s "
          f"(goal <= {SNAPSHOT_GOAL_S:g} s: {'met' if snap_s <= SNAPSHOT_GOAL_S else 'NOT met'})")
    print(f"bytes uploaded: {size / 1e6:.1f} MB from a {raw / 1e6:.1f} MB database "
          f"({size / raw:.0%})")
    print(f"nothing changed ({unchanged}): {unchanged_ms:.1f} ms (goal <= "
          f"{UNCHANGED_GOAL_MS:g} ms: {'met' if unchanged_ms <= UNCHANGED_GOAL_MS else 'NOT met'})")
    print(f"start to every agent ready, data on local disk: {local_s:.1f} s "
          f"(best of {', '.join(f'{t:.1f}' for t in local)})")
    print(f"start to every agent ready, empty disk, restored from the bucket: {cold_s:.1f} s "
          f"(best of {', '.join(f'{t:.1f}' for t in cold)})")
    print(f"of which the restore alone (download, checks, install): {restore_s:.2f} s")
    print(f"ratio cold / local: {ratio:.2f}x (goal <= {COLD_GOAL_RATIO:g}x: "
          f"{'met' if ratio <= COLD_GOAL_RATIO else 'NOT met'})")
    result(f"one snapshot, {AGENTS} agents and {EVENTS:,} events", snap_s, "s",
           goal=f"<= {SNAPSHOT_GOAL_S:g} s", passed=snap_s <= SNAPSHOT_GOAL_S,
           note=f"{size / 1e6:.1f} MB uploaded from {raw / 1e6:.1f} MB")
    result("snapshot with nothing changed", unchanged_ms, "ms",
           goal=f"<= {UNCHANGED_GOAL_MS:g} ms", passed=unchanged_ms <= UNCHANGED_GOAL_MS)
    result(f"cold start from the bucket to {AGENTS} agents ready, vs data on local disk",
           cold_s, "s", goal=f"<= {COLD_GOAL_RATIO:g}x", baseline=local_s, ratio=ratio,
           passed=ratio <= COLD_GOAL_RATIO)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
