"""`switchboard backup` and `switchboard restore` by hand: to and from a directory or a
bucket prefix, audited, and a restore refused while the supervisor runs."""

from __future__ import annotations

import fcntl
import json
import sqlite3
from pathlib import Path

import pytest

from bot.cli import main
from store import open_store


async def _set_marker(db: Path, value: str) -> None:
    store = await open_store(db)
    try:
        await store.kv.set("marker", value)
    finally:
        await store.db.close()


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("SWITCHBOARD_HOME", str(h))
    monkeypatch.delenv("SWITCHBOARD_GCS_BUCKET", raising=False)
    return h


@pytest.mark.parametrize("target", ["dir", "bucket"])
async def test_backup_then_restore(home: Path, tmp_path: Path, target: str,
                                   request: pytest.FixtureRequest,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    if target == "bucket":
        request.getfixturevalue("gcs")
        where = "gs://sb/by-hand"
    else:
        where = str(tmp_path / "backups")
    db = home / "switchboard.db"
    await _set_marker(db, "backed up")
    (home / "context").mkdir()
    (home / "context" / "plan.md").write_text("# the plan\n")
    assert main(["backup", "--to", where]) == 0
    assert "backed up generation 1" in capsys.readouterr().out
    await _set_marker(db, "changed later")
    (home / "context" / "plan.md").unlink()
    assert main(["restore", "--from", where]) == 0
    out = capsys.readouterr().out
    assert "restored generation 1" in out and "kept as" in out
    assert json.loads(_query(db, "SELECT value FROM kv WHERE key='marker'")[0][0]) == "backed up"
    assert (home / "context" / "plan.md").read_text() == "# the plan\n"
    actions = [a for (a,) in _query(db, "SELECT action FROM audit ORDER BY id")]
    assert actions[-1] == "restore"  # the backup's row is in the database it replaced
    kept = next(home.glob("switchboard.db.before-restore-*"))
    assert [a for (a,) in _query(kept, "SELECT action FROM audit")] == ["backup"]


def test_restore_refused_while_the_supervisor_runs(home: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = home / "run"
    run.mkdir(parents=True)
    with open(run / "supervisor.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("4242")
        lock.flush()
        assert main(["restore", "--from", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "the supervisor is running (pid 4242)" in err and "stop it first" in err


def test_backup_without_a_target_says_what_to_give(home: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    home.mkdir()
    sqlite3.connect(home / "switchboard.db").close()
    assert main(["backup"]) == 1
    assert "no bucket configured" in capsys.readouterr().err

