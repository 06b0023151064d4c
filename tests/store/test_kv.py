"""Conformance of KvStore: small persistent settings, key to JSON value."""

from __future__ import annotations

from typing import Any

import pytest

from store import Store
from store.kv import get_sync, set_sync
from store.protocols import KvStore
from tests.store.conftest import T0, FakeNow


@pytest.fixture
def kv(store: Store) -> KvStore:
    return store.kv


async def test_a_missing_key_reads_as_none(kv: KvStore) -> None:
    assert await kv.get("absent") is None


@pytest.mark.parametrize("value", [
    {"halted": True, "by": "ann", "nested": {"n": [1, 2.5, None]}},
    ["a", 1, False], "text", 42, 2.5, True, 0,
])
async def test_values_round_trip_as_json(kv: KvStore, value: Any) -> None:
    await kv.set("k", value)
    assert await kv.get("k") == value
    assert type(await kv.get("k")) is type(value)


async def test_set_overwrites_and_delete_removes(kv: KvStore) -> None:
    await kv.set("k", 1)
    await kv.set("k", {"v": 2})
    await kv.set("other", "kept")
    assert await kv.get("k") == {"v": 2}
    await kv.delete("k")
    assert await kv.get("k") is None
    assert await kv.get("other") == "kept"
    await kv.delete("k")  # deleting what is gone is harmless
    await kv.delete("never-there")


async def test_touch_writes_the_store_clock_time_and_returns_it(kv: KvStore,
                                                                clock: FakeNow) -> None:
    assert await kv.touch("probe") == T0
    assert await kv.get("probe") == T0
    clock.advance(60)
    assert await kv.touch("probe") == T0 + 60
    assert await kv.get("probe") == T0 + 60


async def test_set_stamps_updated_at_with_the_store_clock(store: Store, kv: KvStore,
                                                          clock: FakeNow) -> None:
    await kv.set("k", "v")
    clock.advance(5)
    await kv.set("k", "w")
    row = await store.db.fetchone("SELECT updated_at FROM kv WHERE key = 'k'")
    assert row is not None and row[0] == T0 + 5


async def test_the_sync_helpers_share_the_table(store: Store, kv: KvStore) -> None:
    """The kill switch's thread writes and reads with private connections (store/private.py),
    to the SQLite file or the PostgreSQL database: whatever the store's own pool is doing."""
    set_sync(store.db.writer_target, "halt", {"on": True}, now=lambda: T0 + 1)
    assert await kv.get("halt") == {"on": True}
    await kv.set("cursor", 17)
    assert get_sync(store.db.writer_target, "cursor") == 17
    assert get_sync(store.db.writer_target, "absent") is None
    row = await store.db.fetchone("SELECT updated_at FROM kv WHERE key = 'halt'")
    assert row is not None and row[0] == T0 + 1
