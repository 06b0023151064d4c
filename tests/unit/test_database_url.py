"""`database_url`: doctor opens and migrates the PostgreSQL store it names and shows it without
its password; `switchboard run` refuses it until the whole supervisor runs on PostgreSQL
(docs/postgresql.md); a URL that is not PostgreSQL's, or a server not there, is said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import Switchboard
from bot.doctor import Doctor, _check_database
from store import open_store
from store.errors import StoreUnavailable
from store.migrations import MIGRATIONS
from supervisor.errors import ConfigError
from supervisor.persistence.offline import database_where
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


async def test_run_refuses_a_database_url_until_the_supervisor_runs_on_it(
        tmp_path: Path) -> None:
    settings = make_settings(tmp_path, fake=True, database_url="postgresql://sb@/sb?host=/x")
    with pytest.raises(ConfigError, match="not built yet"):
        async with Switchboard(settings):
            pass
    assert not settings.db_path.exists()
