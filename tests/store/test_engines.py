"""What makes the two engines one store: the SQL translation, the same schema from the one list of
migrations, the schema version, one writer at a time across connections, SQLite's types."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from store import Store, open_store
from store.errors import Conflict, MigrationError
from store.events import EventRepo
from store.migrations import MIGRATIONS, for_postgres, identity_columns
from store.pg import PgDatabase, safe_url
from store.pg_sql import translate
from store.writer import SyncConn, ThreadWriter
from tests.pg import Cluster
from tests.store.conftest import MakeAgent


def test_placeholders_and_percent_signs_are_translated_outside_literals() -> None:
    sql, returns = translate("SELECT '?%' || x FROM t WHERE a = ? AND b LIKE 'r:%' AND c = ?")
    assert sql == "SELECT '?%%' || x FROM t WHERE a = %s AND b ILIKE 'r:%%' AND c = %s"
    assert returns is False
    assert translate("SELECT 'it''s ?' WHERE a = ?")[0] == "SELECT 'it''s ?' WHERE a = %s"


def test_sqlite_null_safe_comparisons_become_distinct_from() -> None:
    assert translate("WHERE s IS ? OR t IS NOT ? OR u IS NULL")[0] == (
        "WHERE s IS NOT DISTINCT FROM %s OR t IS DISTINCT FROM %s OR u IS NULL")


def test_an_insert_returns_its_identity_key_only_where_there_is_one() -> None:
    assert translate("INSERT INTO turns (a) VALUES (?)", returning=True) == (
        "INSERT INTO turns (a) VALUES (%s) RETURNING id", True)
    assert translate("INSERT INTO escalations (a) VALUES (?)", returning=True)[0].endswith(
        "RETURNING seq")
    assert translate("INSERT INTO kv (a) VALUES (?)", returning=True) == (
        "INSERT INTO kv (a) VALUES (%s)", False)
    assert translate("INSERT INTO turns (a) VALUES (?)") == (
        "INSERT INTO turns (a) VALUES (%s)", False)


def test_every_autoincrement_key_is_known_and_translated() -> None:
    keys = identity_columns()
    assert keys["bus_messages"] == "id" and keys["escalations"] == "seq"
    assert len(keys) == sum(m.count("AUTOINCREMENT") for m in MIGRATIONS)
    ddl = "\n".join(for_postgres(n) for n in range(1, len(MIGRATIONS) + 1))
    for word in ("AUTOINCREMENT", " REAL", " BLOB", "PRAGMA", "rowid"):
        assert word not in ddl


def test_a_url_is_shown_without_its_password() -> None:
    assert safe_url("postgresql://sb:s3cret@db.internal/sb") == "postgresql://sb:***@db.internal/sb"
    assert safe_url("postgresql://sb@/sb?host=/run/pg") == "postgresql://sb@/sb?host=/run/pg"


def _sqlite_columns(path: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info({t})"))
                for t in tables}
    finally:
        conn.close()


async def test_both_engines_have_the_same_tables_and_columns(pg_cluster: Cluster,
                                                              tmp_path: Path) -> None:
    lite = await open_store(tmp_path / "s.db")
    await lite.db.close()
    url = pg_cluster.new_database()
    try:
        async with PgDatabase(url) as pg:
            rows = await pg.fetchall(
                "SELECT table_name, column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name != 'switchboard_schema'")
            assert await pg.version() == pg.schema_version == len(MIGRATIONS)
    finally:
        pg_cluster.drop_database(url)
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    assert {t: sorted(c) for t, c in columns.items()} == _sqlite_columns(tmp_path / "s.db")


async def test_a_database_newer_than_this_switchboard_is_refused(pg_cluster: Cluster) -> None:
    url = pg_cluster.new_database()
    try:
        async with PgDatabase(url) as pg:
            await pg.execute("UPDATE switchboard_schema SET version = ?", (len(MIGRATIONS) + 1,))
        with pytest.raises(MigrationError, match="newer than this Switchboard"):
            await PgDatabase(url).open()
    finally:
        pg_cluster.drop_database(url)


async def test_a_fresh_database_is_migrated_once_by_two_openers_at_once(
        pg_cluster: Cluster) -> None:
    """Two processes starting together on an empty database: the migration lock lets one
    migrate; the other finds it done."""
    pg_cluster.admin("CREATE DATABASE fresh_twice")
    url = pg_cluster.url("fresh_twice")
    try:
        first, second = PgDatabase(url), PgDatabase(url)
        await asyncio.gather(first.open(), second.open())
        assert await first.version() == len(MIGRATIONS)
        await first.close()
        await second.close()
    finally:
        pg_cluster.drop_database(url)


async def test_one_writer_at_a_time_across_stores_and_the_writer_thread(
        store: Store, backend: str, make_agent: MakeAgent) -> None:
    """A read-then-write step is safe across connections, as SQLite's one writer makes it: the
    same turn finished at once from two stores on one database (each reads the turn's old cost,
    then adds the difference to the roll-ups) is counted once, also while a writer thread's
    transaction holds the lock first. Without the write lock both read 0 and it counts twice."""
    if backend != "postgresql":
        pytest.skip("SQLite's own lock is tested by SQLite")
    other = await open_store(Path("unused"), database_url=store.db.writer_target)
    writer = ThreadWriter(store.db.writer_target, name="probe")
    await writer.open()
    try:
        await make_agent("a1")
        turn = await store.turns.start("a1", "p")

        def held(conn: SyncConn) -> None:  # the lock, held a while by the writer's thread
            conn.execute("SELECT pg_sleep(0.2)")

        await asyncio.gather(
            writer.transaction([held]),
            *[s.turns.finish(turn, status="ok", cost_usd=0.5) for s in (store, other) * 3])
        [line] = await store.turns.totals_by_agent("a1")
        assert line.cost_usd == 0.5
        assert await store.turns.spent_since(0, "a1") == 0.5
    finally:
        await writer.close()
        await other.db.close()


async def test_a_writer_statement_commits_alone_and_a_failed_one_leaves_nothing(
        store: Store, backend: str, make_agent: MakeAgent) -> None:
    """`ThreadWriter.statement` (the event ingest's batch: SQLite's autocommit, PostgreSQL's
    transaction): what it wrote is committed when it returns; a statement that breaks a rule
    fails as a Conflict with none of its rows stored, and the writer goes on."""
    await make_agent("a1")
    writer = ThreadWriter(store.db.writer_target, name="probe")
    await writer.open()
    try:
        rows = [("a1", None, "k", "", "{}", 1.0)] * 3
        assert await writer.statement(lambda c: EventRepo.insert_rows(c, rows)) == 3
        assert await store.events.count("a1") == 3
        unknown = [("a1", None, "k", "", "{}", 1.0), ("nobody", None, "k", "", "{}", 1.0)]
        with pytest.raises(Conflict):
            await writer.statement(lambda c: EventRepo.insert_rows(c, unknown))
        assert await store.events.count("a1") == 3
        assert await writer.statement(lambda c: EventRepo.insert_rows(c, rows[:1])) == 1
        assert await store.events.count("a1") == 4
    finally:
        await writer.close()


async def test_a_text_holding_nul_is_stored(store: Store, backend: str,
                                            make_agent: MakeAgent) -> None:
    """SQLite keeps NUL; PostgreSQL's text cannot hold it: U+FFFD stands in, and the write
    (a turn's result, here) is not lost."""
    await make_agent("a1")
    turn = await store.turns.start("a1", "p\x00q")
    await store.turns.finish(turn, status="ok", result_text="out\x00put")
    row = await store.turns.get(turn)
    nul = "\x00" if backend == "sqlite" else "\ufffd"
    assert row is not None and (row.prompt, row.result_text) == (f"p{nul}q", f"out{nul}put")


async def test_values_read_back_as_sqlite_gives_them(store: Store) -> None:
    """Integers (also a SUM of them), doubles, bytes, booleans written as 0/1."""
    await store.results.put_file("f1", "a1", "x.bin", b"\x00\xffbytes")
    got = await store.results.file("f1")
    assert got is not None and got.content == b"\x00\xffbytes"
    await store.db.execute("INSERT INTO agent_totals (agent_id, turns, input_tokens)"
                           " VALUES (?, ?, ?)", ("a1", True, 2**40))
    row = await store.db.fetchone("SELECT SUM(input_tokens) AS s, SUM(turns) AS t,"
                                  " SUM(cost_usd) AS c FROM agent_totals")
    assert row is not None
    assert (row["s"], row[1], row["c"]) == (2**40, 1, 0.0)
    assert type(row["s"]) is int and type(row["c"]) is float
