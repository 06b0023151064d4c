"""`database_url`: doctor opens and migrates the PostgreSQL store it names and shows it without
its password, and says what is off there (the parts about the SQLite file); `backup` and
`restore` refuse it; `switchboard status` lists the hosts; the kill path's private write to a
server that never answers gives up in time; a URL that is not PostgreSQL's, or a server not
there, is said so."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from pathlib import Path

import psycopg
import pytest

from bot.cli import cmd_status
from bot.doctor import Doctor, _check_database
from store import open_store
from store.errors import StoreUnavailable
from store.kv import set_sync
from store.migrations import MIGRATIONS
from supervisor.errors import ConfigError
from supervisor.guard.killswitch import PERSIST_WAIT_S
from supervisor.persistence.offline import database_where
from supervisor.persistence.offline_backup import backup, restore
from tests.conftest import make_settings
from tests.pg import Cluster, pg_cluster

__all__ = ["pg_cluster"]


def test_doctor_names_a_postgresql_database_without_its_password(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, fake=True,
                             database_url="postgresql://sb:s3cret@db.internal:5433/fleet")
    assert database_where(settings) == "postgresql://sb@db.internal:5433/fleet"
    assert database_where(make_settings(tmp_path, fake=True)) == str(
        tmp_path / "sb" / "switchboard.db")


def test_doctor_opens_and_migrates_the_postgresql_database(
        pg_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pg_cluster.admin("CREATE DATABASE doctor_fresh")
    try:
        settings = make_settings(tmp_path, fake=True,
                                 database_url=pg_cluster.url("doctor_fresh"))
        doctor = Doctor()
        _check_database(settings, doctor)
        out = capsys.readouterr().out
        assert doctor.problems == 0, out
        assert f"[ok] database postgresql://postgres@/doctor_fresh?host={pg_cluster.dir} opens " \
               f"(schema version {len(MIGRATIONS)})" in out
        assert not settings.db_path.exists()  # no SQLite file made on the way
    finally:
        pg_cluster.drop_database(pg_cluster.url("doctor_fresh"))


def test_doctor_reports_a_server_that_is_not_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(tmp_path, fake=True,
                             database_url=f"postgresql://sb:pw@/sb?host={tmp_path}/none")
    doctor = Doctor()
    _check_database(settings, doctor)
    out = capsys.readouterr().out
    assert doctor.problems == 1 and "[PROBLEM] database:" in out and "pw" not in out
    assert "No such file or directory" in out  # the reason, not only a timeout


async def test_a_url_of_another_engine_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="postgresql://"):
        await open_store(tmp_path / "x.db", database_url="mysql://sb@db/sb")


def test_doctor_says_what_is_off_on_postgresql_and_backup_refuses_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(tmp_path, fake=True, database_url=f"postgresql://sb:pw@/sb?host="
                             f"{tmp_path}/none")
    _check_database(settings, Doctor())
    out = capsys.readouterr().out
    assert "[info] on PostgreSQL the parts about the SQLite file are off" in out
    assert "pg_dump" in out
    for command in (backup, restore):
        with pytest.raises(ConfigError, match="PostgreSQL's own backups"):
            command(settings, str(tmp_path / "snapshots"))
    assert not settings.db_path.exists()


def test_a_private_write_to_a_server_that_never_answers_gives_up_in_time() -> None:
    """The kill path's private connection (store/private.py) to a host that accepts the
    connection and never says a word: it fails within its bound instead of hanging."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        url = f"postgresql://sb:pw@127.0.0.1:{mute.getsockname()[1]}/sb"
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            set_sync(url, "halt", {"by": "ops"}, timeout_s=2.0)
        took = time.monotonic() - started
    assert 1.5 < took < PERSIST_WAIT_S, took


async def test_switchboard_status_lists_the_hosts_on_postgresql(
        pg_cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = pg_cluster.new_database()
    try:
        store = await open_store(tmp_path / "unused.db", database_url=url)
        try:
            await store.workers.beat("w1", host="alpha", pid=11, agents=3,
                                     memory_available=4_000_000_000, coordinator=True)
            await store.workers.beat("w2", host="beta", pid=22, agents=0,
                                     memory_available=None, coordinator=False)
        finally:
            await store.db.close()
        settings = make_settings(tmp_path, fake=True, database_url=url)
        assert await asyncio.to_thread(cmd_status, settings) == 0
        out = capsys.readouterr().out
        assert "no agents yet\n" in out and "no database" not in out
        assert re.search(r"Host alpha \(pid 11, coordinator\): 3 agent\(s\), 4\.0 GB free, "
                         r"last heartbeat \d+s ago\.\nHost beta \(pid 22\): 0 agent\(s\), "
                         r"memory unknown, last heartbeat \d+s ago\.", out), out
        assert not settings.db_path.exists()
    finally:
        pg_cluster.drop_database(url)
