"""GcsSessionStore against the GCS emulator with the real google-cloud-storage client: the SDK's
own conformance suite, batches never overwritten, repeated entries dropped, ordering."""

from __future__ import annotations

import uuid

import pytest
from claude_agent_sdk.testing import run_session_store_conformance

from store.gcs_sessions import GcsSessionStore
from supervisor.config import Settings


@pytest.fixture
def bucket(gcs_emulator):
    from google.cloud import storage

    settings = Settings(home="/nonexistent", storage_emulator_host=gcs_emulator)
    client = storage.Client(**settings.gcs_client_kwargs())
    return client.create_bucket("sb-sessions")


async def test_conformance_suite_passes_on_the_emulator(bucket):
    stores: list[GcsSessionStore] = []

    def make() -> GcsSessionStore:  # a fresh prefix per contract: each runs on an empty store
        stores.append(GcsSessionStore(bucket, f"conf-{uuid.uuid4().hex}"))
        return stores[-1]

    try:
        await run_session_store_conformance(make)
    finally:
        for s in stores:
            s.close()


async def test_each_batch_is_its_own_object_and_repeats_are_dropped(bucket):
    store = GcsSessionStore(bucket, "t")
    key = {"project_key": "-w-a", "session_id": "s1"}
    try:
        await store.append(key, [{"type": "user", "uuid": "u1", "n": 1}])
        # A retried batch that had landed in part: u1 again, then new lines.
        await store.append(key, [{"type": "user", "uuid": "u1", "n": 1},
                                 {"type": "assistant", "uuid": "u2", "n": 2},
                                 {"type": "title", "n": 3}, {"type": "title", "n": 3}])
        names = [b.name for b in bucket.client.list_blobs(bucket, prefix="t/")]
        assert len(names) == 2 and all(n.startswith("t/-w-a/s1/m/") for n in names)
        assert await store.load(key) == [
            {"type": "user", "uuid": "u1", "n": 1}, {"type": "assistant", "uuid": "u2", "n": 2},
            {"type": "title", "n": 3}, {"type": "title", "n": 3}]  # no uuid: kept as written
        # A second writer (another container) with its own counter: nothing is overwritten.
        other = GcsSessionStore(bucket, "t")
        await other.append(key, [{"type": "user", "uuid": "u3"}])
        other.close()
        loaded = await store.load(key)
        assert loaded is not None and [e.get("uuid") for e in loaded][-1] == "u3"
        assert len(list(bucket.client.list_blobs(bucket, prefix="t/"))) == 3
    finally:
        store.close()


async def test_key_parts_with_slashes_do_not_nest(bucket):
    store = GcsSessionStore(bucket, "t2")
    try:
        await store.append({"project_key": "a/b", "session_id": "s"}, [{"type": "x", "v": 1}])
        await store.append({"project_key": "a", "session_id": "b/s"}, [{"type": "x", "v": 2}])
        assert await store.load({"project_key": "a/b", "session_id": "s"}) == [
            {"type": "x", "v": 1}]
        assert [s["session_id"] for s in await store.list_sessions("a")] == ["b/s"]
    finally:
        store.close()


async def test_refused_batches_wait_in_order_and_go_up_when_the_bucket_is_back(
        gcs_emulator, monkeypatch):
    from google.api_core.exceptions import NotFound
    from google.cloud import storage

    import store.gcs_sessions as mod

    monkeypatch.setattr(mod, "RETRY_S", 0.0)
    client = storage.Client(**Settings(home="/nonexistent",
                                       storage_emulator_host=gcs_emulator).gcs_client_kwargs())
    store = GcsSessionStore(client.bucket("made-later"), "t")
    key = {"project_key": "p", "session_id": "s"}
    try:
        with pytest.raises(NotFound):  # the first failure of an outage: the SDK reports it
            await store.append(key, [{"type": "user", "uuid": "1"}])
        await store.append(key, [{"type": "user", "uuid": "2"}])  # queued behind it, silently
        assert store.waiting == 2
        client.create_bucket("made-later")
        await store.append(key, [{"type": "user", "uuid": "1"}])  # the SDK's retry of batch 1
        await store.append(key, [{"type": "user", "uuid": "3"}])
        assert store.waiting == 0
        loaded = await store.load(key)
        assert [e["uuid"] for e in loaded or []] == ["1", "2", "3"]
        assert len(list(client.list_blobs("made-later"))) == 3  # no hole, no second copy
    finally:
        store.close()


async def test_no_gcs_client_is_reported_and_agents_still_run(fake_settings, tmp_path,
                                                              monkeypatch):
    from bot.app import Switchboard
    from tests.conftest import run, wait_for

    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-key.json"))
    settings = fake_settings.with_(gcs_bucket="sb-x", kill_poll_s=3600.0)
    async with Switchboard(settings) as app:
        assert app.pool.session_store is None
        notices = [r.title for r in await app.store.escalations.undelivered("t", limit=100)]
        assert "⚠ Session transcripts are not copied to the bucket" in notices
        await run(app, "/spawn w TEXT: hi")
        runner = await app.pool.fleet.get("w")
        await wait_for(lambda: runner.session_id is not None and not runner.busy, 30, "a turn")
