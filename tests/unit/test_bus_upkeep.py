"""The bus's upkeep beyond delivery: expired messages are found and their senders told even when
nobody reads the inbox, and the bus's own connection is watched by the storage guard."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import Store, open_store
from store.errors import StoreError
from supervisor.bus.core import EXPIRY_SWEEP_S, OPERATOR_SENDER, Bus, Sender
from supervisor.clock import FakeClock
from supervisor.config import Settings
from supervisor.guard.storage import Trouble, classify
from tests.unit.test_bus import FakeMembers


async def _nothing(*_: object) -> None:
    return None


@pytest.fixture
async def rig(tmp_path: Path, migrated_db: Path) -> AsyncIterator[tuple[Bus, Store, FakeClock]]:
    db = tmp_path / "sb.db"
    shutil.copyfile(migrated_db, db)
    store = await open_store(db)
    clock = FakeClock()
    bus = Bus(store, Settings(home=tmp_path, bus_message_ttl_s=600), FakeMembers("a", "b"),
              notify=_nothing, clock=clock)
    await bus.start()
    try:
        yield bus, store, clock
    finally:
        await bus.close()
        await store.db.close()


async def test_an_expired_message_nobody_reads_is_ended_and_its_sender_told(rig) -> None:
    bus, store, clock = rig
    sent = await bus.send(Sender("id-a", "a"), "b", "task", "read me soon")
    assert sent.message_id is not None and len(bus.inbox("id-b")) == 1
    clock.advance(601)  # past the message's life; b never takes its inbox
    for _ in range(3):  # the sweep and the lease keeper sleep on the same clock
        await clock.wait_sleep_calls(2)
        clock.advance(EXPIRY_SWEEP_S)
    told = await bus.inbox("id-a").take(2)
    assert told is not None and f"#{sent.message_id}" in told.text
    assert "expired before it was read" in told.text
    _, rows = await bus.status(sent.message_id)
    assert [(r.state, r.reason) for r in rows] == [("expired", "expired unread")]
    assert len(bus.inbox("id-b")) == 0


async def test_a_failed_write_on_the_bus_connection_reaches_the_storage_guard(rig) -> None:
    """Regression: the bus writer's own connection was not watched; a read-only or full disk
    failed its writes without the storage guard hearing of it."""
    bus, store, _ = rig
    heard: list[str] = []
    store.db.write_error_listeners.append(heard.append)
    conn = bus.writer.conn
    # The disk turns read-only under the bus's connection (as a remount would).
    await conn.call(lambda: conn._conn.execute("PRAGMA query_only=1"))  # type: ignore[union-attr]
    with pytest.raises(StoreError):
        await bus.send(OPERATOR_SENDER, "b", "task", "not stored")
    await asyncio.sleep(0)
    assert heard and classify(heard[0]) == Trouble.READ_ONLY
