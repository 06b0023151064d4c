"""Database and shared-context snapshots against the GCS emulator, with the real client:
publish and restore, the manifest written last, checksums, the newer generation winning,
retries and the operator's notice, and an upload cut off halfway by the emulator going away."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from store import open_store
from supervisor.config import Settings
from supervisor.persistence import context_sync, snapshot
from supervisor.persistence.remote import DirRemote, GcsRemote, open_remote
from supervisor.persistence.snapshots import (
    REPORT_AFTER,
    Snapshotter,
    context_dir,
    restore_on_start,
)
from tests.fakes.gcs import Emulator


def _settings(home: Path, **kw: object) -> Settings:
    return Settings(home=home, gcs_bucket="sb", storage_emulator_host="set",
                    **kw)  # type: ignore[arg-type]


async def _db_with(home: Path, marker: str) -> None:
    store = await open_store(home / "switchboard.db")
    try:
        await store.kv.set("marker", marker)
    finally:
        await store.db.close()


def _marker(db: Path) -> str | None:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key='marker'").fetchone()
        return json.loads(row[0]) if row else None
    finally:
        conn.close()


def _remote(settings: Settings) -> GcsRemote:
    remote = open_remote(settings)
    assert isinstance(remote, GcsRemote)
    return remote


async def test_snapshot_round_trip_and_unchanged_is_skipped(gcs: Emulator, tmp_path: Path) -> None:
    a = _settings(tmp_path / "a")
    await _db_with(a.home, "one")
    snap = Snapshotter(a, _remote(a))
    snap.prepare()
    assert snap.run_once() == "uploaded"
    assert snap.run_once() == "unchanged"  # nothing changed: no upload
    await _db_with(a.home, "two")  # another connection writes: data_version moves
    assert snap.run_once() == "uploaded"
    assert snap.last is not None and snap.last.generation == 2
    snap.close(final=False)

    b = _settings(tmp_path / "b")  # an empty data directory on the same bucket
    restored = restore_on_start(b, _remote(b))
    assert restored.decision.action == "restore" and restored.generation == 2
    assert _marker(b.db_path) == "two"
    assert snapshot.local_generation(b.db_path) == 2
    # The bucket keeps a compressed copy whose checksum the manifest records.
    manifest = json.loads(gcs.bucket("sb").blob(snapshot.MANIFEST).download_as_bytes())
    assert manifest["generation"] == 2 and len(manifest["history"]) == 2
    assert manifest["size"] < manifest["raw_size"]


async def test_newer_generation_wins_and_is_logged(gcs: Emulator, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    a = _settings(tmp_path / "a")
    await _db_with(a.home, "old")
    snap = Snapshotter(a, _remote(a))
    snap.prepare()
    snap.run_once()  # generation 1 in the bucket and in a's database
    await _db_with(a.home, "newer-local")
    snap.run_once()  # generation 2
    snap.close(final=False)
    # A second data directory restored at generation 2 and writes on; a's disk is stale.
    b = _settings(tmp_path / "b")
    restore_on_start(b, _remote(b))
    await _db_with(b.home, "from-b")
    snap_b = Snapshotter(b, _remote(b))
    snap_b.prepare()
    snap_b.run_once()  # generation 3
    snap_b.close(final=False)
    # a's database says 2, the bucket 3: the bucket wins, a's file is kept aside.
    caplog.set_level("WARNING", logger="supervisor.persistence.snapshots")
    restored = restore_on_start(a, _remote(a))
    assert restored.decision.action == "restore" and restored.generation == 3
    assert _marker(a.db_path) == "from-b" and restored.kept is not None
    assert _marker(restored.kept) == "newer-local"
    assert any("snapshot decision action=restore local=2 remote=3" in r.message
               for r in caplog.records)
    # b holds 3, the bucket 3: the local one is kept (a tie never overwrites local writes).
    again = restore_on_start(b, _remote(b))
    assert again.decision.action == "local" and again.generation is None


async def test_corrupt_snapshot_is_never_restored(gcs: Emulator, tmp_path: Path) -> None:
    a = _settings(tmp_path / "a")
    await _db_with(a.home, "good")
    snap = Snapshotter(a, _remote(a))
    snap.prepare()
    snap.run_once()
    await _db_with(a.home, "newest")
    snap.run_once()
    snap.close(final=False)
    # The newest object is damaged in the bucket: it fails its checksum, the previous is used.
    gcs.bucket("sb").blob(snapshot.object_name(2)).upload_from_string(b"garbage")
    b = _settings(tmp_path / "b")
    restored = restore_on_start(b, _remote(b))
    assert restored.generation == 1 and _marker(b.db_path) == "good"
    # Every listed snapshot damaged: nothing is restored and the local database stays.
    gcs.bucket("sb").blob(snapshot.object_name(1)).upload_from_string(
        gzip.compress(b"not a database"))
    c = _settings(tmp_path / "c")
    await _db_with(c.home, "mine")
    assert snapshot.local_generation(c.db_path) == 0  # older than the bucket's
    kept = restore_on_start(c, _remote(c))
    assert kept.generation is None and kept.decision.action == "local"
    assert _marker(c.db_path) == "mine"  # the local database, untouched
    # With no local database, there is nothing good to start from: the start is refused.
    d = _settings(tmp_path / "d")
    with pytest.raises(snapshot.SnapshotError, match="no snapshot"):
        restore_on_start(d, _remote(d))
    assert not d.db_path.exists()


async def test_upload_interrupted_halfway_restores_last_complete(gcs: Emulator,
                                                                 tmp_path: Path) -> None:
    """Acceptance 3 (database half): the emulator stops in the middle of a resumable upload;
    the next start restores the last snapshot whose manifest was written."""
    a = _settings(tmp_path / "a")
    await _db_with(a.home, "complete")
    remote = _remote(a)
    remote.chunk_bytes = 1024 * 1024  # resumable, in chunks
    snap = Snapshotter(a, remote)
    snap.prepare()
    assert snap.run_once() == "uploaded"
    # The next snapshot over 8 MiB (the client's limit for one-shot uploads), so resumable:
    # random bytes do not compress.
    conn = sqlite3.connect(a.db_path)
    conn.execute("CREATE TABLE filler (b BLOB)")
    conn.executemany("INSERT INTO filler VALUES (randomblob(100000))", [()] * 90)
    conn.execute("INSERT INTO kv (key, value, updated_at) VALUES ('marker', '\"partial\"', 0) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value")
    conn.commit()
    conn.close()
    chunks = 0
    stopped = threading.Event()
    real_put_file = remote.put_file

    def cut_off(name: str, path: Path, **kw: object) -> int:
        # The emulator is killed once the upload has sent its first chunk.
        from google.cloud.storage._media.requests import ResumableUpload

        original = ResumableUpload.transmit_next_chunk

        def transmit(self: ResumableUpload, *args: object, **kwargs: object) -> object:
            nonlocal chunks
            chunks += 1
            if chunks == 3:
                gcs.stop()
                stopped.set()
            return original(self, *args, **kwargs)

        ResumableUpload.transmit_next_chunk = transmit  # type: ignore[method-assign]
        try:
            return real_put_file(name, path, **kw)  # type: ignore[arg-type]
        finally:
            ResumableUpload.transmit_next_chunk = original  # type: ignore[method-assign]

    remote.put_file = cut_off  # type: ignore[method-assign]
    remote.retry = False  # one try: the client would retry a dead connection for minutes
    assert snap.run_once() == "failed" and stopped.is_set()
    assert snap.failures == 1 and snap.last is not None and snap.last.generation == 1
    snap.close(final=False)
    gcs.start()  # the bucket is back, with whatever the cut-off upload left
    b = _settings(tmp_path / "b")
    restored = restore_on_start(b, _remote(b))
    assert restored.generation == 1 and _marker(b.db_path) == "complete"


async def test_failing_uploads_back_off_and_are_reported(tmp_path: Path) -> None:
    home = tmp_path / "h"
    await _db_with(home, "x")
    settings = Settings(home=home)
    target = tmp_path / "remote-file"
    target.write_text("a file where a directory should be: every upload fails")
    notices: list[tuple[str, str]] = []
    snap = Snapshotter(settings, DirRemote(target), notify=lambda t, b: notices.append((t, b)))
    snap.prepare()
    for _ in range(REPORT_AFTER + 1):
        assert snap.run_once() == "failed"
    assert len(notices) == 1 and "failing" in notices[0][0]
    assert snap._retry_at is not None  # the thread retries with backoff
    target.unlink()
    assert snap.run_once() == "uploaded"
    assert len(notices) == 2 and "work again" in notices[1][0]
    assert snap.failures == 0
    snap.close(final=False)


async def test_context_directory_syncs_incrementally(gcs: Emulator, tmp_path: Path) -> None:
    a = _settings(tmp_path / "a")
    await _db_with(a.home, "x")
    ctx = context_dir(a)
    ctx.mkdir(parents=True)
    (ctx / "plan.md").write_text("# Plan\n")
    (ctx / "notes").mkdir()
    (ctx / "notes" / "api.md").write_text("the API\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not upload")
    (ctx / "leak.md").symlink_to(secret)  # an agent's link to something of ours: not followed
    remote = _remote(a)
    done, digest = context_sync.upload(remote, ctx, 1, None)
    assert done is not None and done.files == 2 and done.uploaded == 2
    again, _ = context_sync.upload(remote, ctx, 2, digest)
    assert again is None  # unchanged: nothing sent
    (ctx / "plan.md").write_text("# Plan\nstep 2\n")
    third, _ = context_sync.upload(remote, ctx, 3, digest)
    assert third is not None and third.uploaded == 1  # only the changed file's content
    blobs = [b.download_as_bytes() for b in gcs.bucket("sb").list_blobs(prefix="context/")]
    assert not any(b"do not upload" in b for b in blobs)
    b = _settings(tmp_path / "b")
    assert context_sync.restore(_remote(b), context_dir(b)) == 2
    assert (context_dir(b) / "plan.md").read_text() == "# Plan\nstep 2\n"
    assert (context_dir(b) / "notes" / "api.md").read_text() == "the API\n"


async def test_a_bucket_that_is_not_there_fails_writes_not_silently(gcs: Emulator,
                                                                    tmp_path: Path) -> None:
    """Regression: a write to a missing bucket (GCS answers 404) was taken for "not found,
    nothing to do": the lease looked written, then read back as someone else's."""
    from supervisor.persistence.remote import RemoteError

    settings = _settings(tmp_path / "a").with_(gcs_bucket="no-such-bucket")
    remote = _remote(settings)
    assert remote.get_bytes("x") is None  # a read: nothing there
    with pytest.raises(RemoteError, match="not found"):
        remote.put_bytes("x", b"data")
    await _db_with(settings.home, "x")
    snap = Snapshotter(settings, remote)
    snap.prepare()
    assert snap.run_once() == "failed" and "not found" in (snap.last_error or "")
    snap.close(final=False)
