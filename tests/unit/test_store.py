"""The store's database: WAL, migrations, read-only opens, reads beside writes, rollback, full
disk. Each repository's behaviour contract is in tests/store."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import Store, open_store
from store.db import Database
from store.errors import MigrationError, StoreError, StoreUnavailable
from store.migrations import MIGRATIONS

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "switchboard.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    s = await open_store(db_path)
    try:
        yield s
    finally:
        await s.db.close()


async def make_agent(store: Store, agent_id: str = "a1", name: str = "alpha",
                     state: str = "starting", parent_id: str | None = None) -> None:
    await store.agents.create(id=agent_id, name=name, parent_id=parent_id, model=None,
                              cwd="/w", prompt="p", permission_mode="default", state=state)


def sqlite_pragma(path: Path, pragma: str) -> object:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {pragma}").fetchone()[0]
    finally:
        conn.close()


def _worker_threads() -> int:
    return sum(1 for t in threading.enumerate() if "_connection_worker_thread" in t.name)


async def aiosqlite_threads(expect: int | None = None) -> int:
    """How many aiosqlite worker threads run, once closing ones are done (waits for `expect`)."""
    for _ in range(100):
        await asyncio.sleep(0.01)
        if expect is None or _worker_threads() <= expect:
            break
    return _worker_threads()


async def settle_failed_connect(baseline: int) -> None:
    """aiosqlite stops the worker of a connection that failed to open without awaiting it; that
    thread must post its result while this test's loop is alive, or it raises in a later test."""
    await aiosqlite_threads(expect=baseline)


# -- opening, WAL and migrations ----------------------------------------------------------------


async def test_wal_mode_is_on(store, db_path):
    row = await store.db.fetchone("PRAGMA journal_mode")
    assert row[0] == "wal"
    assert sqlite_pragma(db_path, "journal_mode") == "wal"  # persistent in the file


async def test_fresh_database_is_migrated_to_the_latest_version(store, db_path):
    assert store.db.schema_version == len(MIGRATIONS)
    assert sqlite_pragma(db_path, "user_version") == len(MIGRATIONS)
    tables = {r[0] for r in await store.db.fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"agents", "agent_transitions", "agent_events", "turns", "costs", "audit"} <= tables


async def test_migrations_are_idempotent(db_path):
    s = await open_store(db_path)
    await make_agent(s)
    await s.db.close()
    for _ in range(2):
        s = await open_store(db_path)
        try:
            assert [a.id for a in await s.agents.list()] == ["a1"]
        finally:
            await s.db.close()
    assert sqlite_pragma(db_path, "user_version") == len(MIGRATIONS)


async def test_two_handles_on_one_file(db_path):
    """A second opener (e.g. `switchboard status` beside the supervisor) finds nothing to do."""
    first = await open_store(db_path)
    second = await open_store(db_path)
    try:
        await make_agent(first)
        assert (await second.agents.get("a1")).name == "alpha"
    finally:
        await second.db.close()
        await first.db.close()


async def test_open_is_idempotent_and_close_twice_is_harmless(db_path):
    db = Database(db_path)
    await db.open()
    await db.open()
    await db.close()
    await db.close()


async def test_database_is_an_async_context_manager(db_path):
    async with Database(db_path) as db:
        assert (await db.fetchone("SELECT 1"))[0] == 1
    with pytest.raises(StoreUnavailable, match="closed"):
        await db.fetchall("SELECT 1")


async def test_newer_schema_than_the_code_is_refused(db_path):
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    conn.close()
    threads = await aiosqlite_threads()
    db = Database(db_path)
    with pytest.raises(MigrationError) as info:
        await db.open()
    assert isinstance(info.value, StoreError)
    text = str(info.value)
    assert f"schema version {len(MIGRATIONS) + 5}" in text
    assert "newer than this Switchboard" in text and "upgrade" in text
    # Regression: the writer connection (and its thread) used to be left open on this path.
    assert await aiosqlite_threads(expect=threads) == threads
    assert sqlite_pragma(db_path, "user_version") == len(MIGRATIONS) + 5  # untouched


async def test_a_failing_migration_rolls_back_and_is_reported(db_path, monkeypatch):
    import store.db as db_module

    monkeypatch.setattr(db_module, "MIGRATIONS",
                        (*MIGRATIONS, "CREATE TABLE extra (x INTEGER); THIS IS NOT SQL;"))
    db = Database(db_path)
    with pytest.raises(MigrationError, match=f"migration {len(MIGRATIONS) + 1} failed"):
        await db.open()
    assert sqlite_pragma(db_path, "user_version") == len(MIGRATIONS)
    conn = sqlite3.connect(db_path)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert "extra" not in names  # the half-applied migration was rolled back


async def test_unopenable_path_is_store_unavailable(tmp_path):
    target = tmp_path / "is-a-dir"
    target.mkdir()
    threads = await aiosqlite_threads()
    with pytest.raises(StoreUnavailable) as info:
        await open_store(target)
    await settle_failed_connect(threads)
    assert str(target) in str(info.value)
    assert info.value.path == str(target)


async def test_a_file_that_is_not_a_database(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailable, match="not a database"):
        await open_store(junk)


# -- read-only and concurrency ---------------------------------------------------------------


async def test_read_only_open_while_a_writer_holds_the_database(store, db_path):
    await make_agent(store, "a1", "alpha")
    async with store.db.transaction() as conn:  # the writer holds the write lock...
        await conn.execute(
            "INSERT INTO audit (at, platform, user_id, action, ok) VALUES (1, 'p', 'u', 'x', 1)")
        ro = await asyncio.wait_for(open_store(db_path, read_only=True), 5)
        try:
            # ...and a read-only handle opens and reads the committed state, not the pending one.
            assert [a.name for a in await asyncio.wait_for(ro.agents.list(), 5)] == ["alpha"]
            assert await ro.audit.recent() == []
        finally:
            await ro.db.close()


async def test_read_only_handle_refuses_writes_and_never_migrates(store, db_path):
    ro = await open_store(db_path, read_only=True)
    try:
        with pytest.raises(StoreUnavailable, match="read-only"):
            await make_agent(ro)
        with pytest.raises(StoreUnavailable, match="read-only"):
            await ro.audit.record(platform="p", user_id="u", user_name="", action="a", args="",
                                  ok=True, result="")
    finally:
        await ro.db.close()


async def test_read_only_open_of_a_missing_file(tmp_path):
    threads = await aiosqlite_threads()
    with pytest.raises(StoreUnavailable):
        await open_store(tmp_path / "absent.db", read_only=True)
    await settle_failed_connect(threads)
    assert not (tmp_path / "absent.db").exists()


async def test_reads_run_while_a_write_transaction_is_open(store):
    await make_agent(store, "a1", "alpha")
    async with store.db.transaction() as conn:
        await conn.execute("UPDATE agents SET state = 'idle' WHERE id = 'a1'")
        # Same Database, other connection: not blocked, and it sees the last committed state.
        row = await asyncio.wait_for(store.agents.get("a1"), 2)
        assert row.state == "starting"
        assert len(await asyncio.wait_for(store.agents.list(), 2)) == 1
    assert (await store.agents.get("a1")).state == "idle"


async def test_writes_are_serialised(store):
    """Many concurrent writers through one Database: none fails with 'database is locked'."""
    await make_agent(store)
    await asyncio.gather(*(store.events.append("a1", None, "text", f"e{i}", {"i": i})
                           for i in range(50)))
    assert await store.events.count("a1") == 50


async def test_a_second_writer_waits_for_the_first(store, db_path):
    other = await open_store(db_path)
    try:
        async with store.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO audit (at, platform, user_id, action, ok) VALUES (1,'p','u','a',1)")
            pending = asyncio.create_task(other.audit.record(
                platform="p", user_id="u", user_name="", action="b", args="", ok=True, result=""))
            await asyncio.sleep(0.2)
            assert not pending.done()  # waiting on busy_timeout, not failing
        await asyncio.wait_for(pending, 5)
        assert [r.action for r in await store.audit.recent()] == ["b", "a"]
    finally:
        await other.db.close()


# -- transactions ------------------------------------------------------------------------------


async def test_an_exception_in_a_transaction_rolls_back(store):
    with pytest.raises(ValueError, match="boom"):
        async with store.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO audit (at, platform, user_id, action, ok) VALUES (1,'p','u','a',1)")
            raise ValueError("boom")
    assert await store.audit.recent() == []
    # and the connection is usable afterwards
    await store.audit.record(platform="p", user_id="u", user_name="", action="ok", args="",
                             ok=True, result="")
    assert [r.action for r in await store.audit.recent()] == ["ok"]


async def test_an_sql_error_in_a_transaction_rolls_back_and_is_store_unavailable(store, db_path):
    with pytest.raises(StoreUnavailable) as info:
        async with store.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO audit (at, platform, user_id, action, ok) VALUES (1,'p','u','a',1)")
            await conn.execute("INSERT INTO no_such_table VALUES (1)")
    assert "no such table" in info.value.reason
    assert str(db_path) in str(info.value)
    assert await store.audit.recent() == []


async def test_cancellation_inside_a_transaction_rolls_back(store):
    entered = asyncio.Event()

    async def writer() -> None:
        async with store.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO audit (at, platform, user_id, action, ok) VALUES (1,'p','u','a',1)")
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(writer())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.audit.recent() == []
    await store.audit.record(platform="p", user_id="u", user_name="", action="next", args="",
                             ok=True, result="")  # the write lock was released



# -- a full disk ----------------------------------------------------------------------------------


async def _fill_to_the_brim(db: Database) -> None:
    """Cap the file at its current size, as a full disk would: any write needing a page fails."""
    async with db.transaction() as conn:
        async with conn.execute("PRAGMA page_count") as cur:
            pages = (await cur.fetchone())[0]
        await conn.execute(f"PRAGMA max_page_count = {pages}")


async def test_full_disk_write_fails_clearly_and_keeps_earlier_data(store, db_path):
    await make_agent(store, "a1", "alpha")
    await store.events.append("a1", None, "text", "before", {"n": 1})
    await _fill_to_the_brim(store.db)

    with pytest.raises(StoreUnavailable) as info:
        await store.events.append("a1", None, "text", "after", {"blob": "x" * 200_000})
    assert "full" in info.value.reason
    assert str(info.value) == f"the database at {db_path} cannot be used: {info.value.reason}"

    with pytest.raises(StoreUnavailable, match="full"):
        await store.turns.finish(await store.turns.start("a1", "p"), status="ok",
                                 result_text="r" * 200_000)

    # Earlier data intact, reads still work, nothing half-written.
    assert [e.summary for e in await store.events.tail("a1", 10)] == ["before"]
    assert (await store.agents.get("a1")).name == "alpha"
    assert sqlite_pragma(db_path, "integrity_check") == "ok"

    # Room again (the pragma is per connection): writes work with no reopen.
    async with store.db.transaction() as conn:
        await conn.execute("PRAGMA max_page_count = 1073741823")
    await store.events.append("a1", None, "text", "after", {"blob": "x" * 200_000})
    assert [e.summary for e in await store.events.tail("a1", 10)] == ["before", "after"]


# -- reads, upgrades, a full disk under a one-write guarantee -------------------------------------


async def test_a_cancelled_read_does_not_leave_the_reader_on_a_stale_snapshot(tmp_path):
    # Regression: a read cancelled between execute and fetch left its statement open, so the
    # reader connection kept seeing the database as it was, and new rows were "missing".
    from store import open_store

    store = await open_store(tmp_path / "db.sqlite")
    try:
        for i in range(50):
            task = asyncio.create_task(store.db.fetchall("SELECT * FROM kv"))
            await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await store.kv.set(f"k{i}", i)
            assert await store.kv.get(f"k{i}") == i
    finally:
        await store.db.close()


async def test_escalation_detail_is_kept_whole_and_old_rows_upgrade(db_path, monkeypatch):
    """Migration 5 adds the complete detail of an escalation; rows from before have none."""
    import store.db as db_module

    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:4])
    old = await open_store(db_path)
    await old.db.execute("INSERT INTO escalations (id, kind, title, body, status, created_at)"
                         " VALUES ('old1', 'permission', 't', 'echo hi', 'open', 0)")
    await old.db.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    s = await open_store(db_path)
    try:
        legacy = await s.escalations.get("old1")
        assert legacy is not None and legacy.detail is None and legacy.body == "echo hi"
        command = "echo " + "x" * 100_000 + "; git push --force origin main"
        row = await s.escalations.create(id="new1", agent_id=None, kind="permission",
                                         title="t", body="Why asked: x", detail=command,
                                         detail_name="command.sh")
        assert row.detail == command and row.detail_name == "command.sh"
    finally:
        await s.db.close()


async def test_bus_deliveries_that_had_ended_are_stamped_on_upgrade(db_path, monkeypatch):
    """Migration 16 stamps the end of every delivery that had ended, so the open-deliveries
    index (keyed on the stamp) holds exactly the queued and leased ones."""
    import store.db as db_module

    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:15])
    old = await open_store(db_path)
    states = ("queued", "leased", "consumed", "expired", "dead")
    for i, state in enumerate(states, 1):
        await old.db.execute("INSERT INTO bus_messages (id, sender, sender_name, recipient, "
                             "type, body, created_at) VALUES (?, 'a', 'a', 'b', 'info', 'x', 0)",
                             (i,))
        await old.db.execute("INSERT INTO bus_deliveries (message_id, recipient_id, seq, state, "
                             "consumed_at) VALUES (?, 'b', ?, ?, ?)",
                             (i, i, state, 5.0 if state == "consumed" else None))
    await old.db.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    s = await open_store(db_path)
    try:
        rows = await s.db.fetchall("SELECT state, ended_at FROM bus_deliveries ORDER BY seq")
        assert [tuple(r) for r in rows] == [("queued", None), ("leased", None),
                                           ("consumed", 5.0), ("expired", 0), ("dead", 0)]
        assert await s.bus.open_counts() == {"b": 2}
    finally:
        await s.db.close()


async def test_a_write_cancelled_during_begin_leaves_the_connection_clean(store):
    """Regression: a task cancelled while its BEGIN IMMEDIATE was queued in the connection's
    thread left the transaction open (the BEGIN ran after the cancel), and the next, unrelated
    write failed with "cannot start a transaction within a transaction"."""
    for _ in range(20):  # the cancel lands at a different point of BEGIN each time
        task = asyncio.create_task(store.audit.record(
            platform="p", user_id="u", user_name="", action="cancelled", args="", ok=True,
            result=""))
        await asyncio.sleep(0)  # the BEGIN is queued, not yet run
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await store.audit.record(platform="p", user_id="u", user_name="", action="next",
                                 args="", ok=True, result="")
    assert not store.db._w().in_transaction
    assert [r.action for r in await store.audit.recent(50)].count("next") == 20


async def test_a_turns_end_and_its_notice_are_one_write(store):
    """The "turn finished" notice is written in the transaction that ends the turn: a crash
    between the two (up to 44 finished turns without a notice after a SIGKILL under load)
    can no longer happen, and a failed write loses both, never one."""
    from store.escalations import EscalationDraft

    await make_agent(store)
    turn = await store.turns.start("a1", "p")
    await store.turns.finish(turn, status="ok", result_text="done",
                             notice=EscalationDraft(id="n1", agent_id="a1", kind="notice",
                                                    title="alpha finished", status="info"))
    assert [r.title for r in await store.escalations.undelivered("console")] == \
        ["alpha finished"]
    turn2 = await store.turns.start("a1", "p2")
    await _fill_to_the_brim(store.db)
    with pytest.raises(StoreUnavailable, match="full"):
        await store.turns.finish(turn2, status="ok", result_text="r" * 200_000,
                                 notice=EscalationDraft(id="n2", agent_id="a1", kind="notice",
                                                        title="alpha finished again",
                                                        body="r" * 200_000, status="info"))
    assert [r.title for r in await store.escalations.undelivered("console")] == \
        ["alpha finished"]
    assert [t.status for t in await store.turns.recent("a1")] == ["running", "ok"]
