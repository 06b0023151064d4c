"""`switchboard backup` and `switchboard restore`: a snapshot by hand, to or from the bucket, a
directory or another bucket, whether or not the supervisor runs (a backup) or with it stopped
(a restore). Each is audited in the database it leaves behind."""

from __future__ import annotations

import getpass
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from store.audit import record_sync
from supervisor.config import Settings
from supervisor.errors import ConfigError
from supervisor.persistence import context_sync, snapshot
from supervisor.persistence.offline import running_pid
from supervisor.persistence.remote import Remote, RemoteError, open_remote
from supervisor.persistence.snapshots import recreate_workspaces
from supervisor.redact import SECRETS


@dataclass(frozen=True, slots=True)
class Done:
    text: str
    problems: tuple[str, ...] = ()


def _remote(settings: Settings, where: str | None) -> Remote:
    try:
        remote = open_remote(settings, where)
    except RemoteError as exc:
        raise ConfigError(str(exc)) from exc
    if remote is None:
        raise ConfigError("no bucket configured (gcs_bucket) and no --to/--from given: name "
                          "a directory or gs://bucket/prefix")
    return remote


def _audit(settings: Settings, action: str, args: str, ok: bool, result: str) -> str | None:
    try:
        SECRETS.add(*settings.secret_values())
        record_sync(settings.db_path, platform="cli", user_id=f"{getpass.getuser()}@cli",
                    action=action, args=args, ok=ok, result=result, redact=SECRETS)
    except (sqlite3.Error, OSError) as exc:
        return f"could not write the audit row: {exc}"
    return None


def _sqlite_only(settings: Settings, what: str) -> None:
    if settings.database_url is not None:
        raise ConfigError(f"the database is PostgreSQL (database_url): switchboard cannot {what} "
                          "it; use PostgreSQL's own backups (pg_dump, base backups: "
                          "docs/postgresql.md)")


def backup(settings: Settings, where: str | None) -> Done:
    """A consistent snapshot of the database (and the shared context) to `where`."""
    _sqlite_only(settings, "back up")
    if not settings.db_path.exists():
        raise ConfigError(f"there is no database at {settings.db_path} to back up")
    remote = _remote(settings, where)
    manifest = snapshot.read_manifest(remote)
    local = snapshot.local_generation(settings.db_path) or 0
    generation = max(local, int(manifest["generation"]) if manifest else 0) + 1
    conn = sqlite3.connect(settings.db_path, timeout=10.0, isolation_level=None)
    try:
        # The live database is left as it is: a running supervisor's own generation count
        # stays its own.
        taken = snapshot.take(conn, generation, settings.run_dir / "backup", mark_source=False)
    finally:
        conn.close()
    try:
        published = snapshot.publish(remote, taken, by="switchboard backup")
    finally:
        taken.path.unlink(missing_ok=True)
    synced, _ = context_sync.upload(remote, settings.context_dir, generation, None)
    text = (f"backed up generation {published.generation} to {remote.where} "
            f"({taken.size / 1024:.0f} KiB compressed from {taken.raw_size / 1024:.0f} KiB; "
            f"{synced.files if synced else 0} shared-context file(s))")
    problem = _audit(settings, "backup", where or remote.where, True, text)
    return Done(text, (problem,) if problem else ())


def restore(settings: Settings, where: str | None) -> Done:
    """The newest good snapshot in `where` becomes the database (the one there is kept
    beside it); the shared context is filled if it is empty. The supervisor must be stopped."""
    _sqlite_only(settings, "restore")
    pid = running_pid(settings)
    if pid:
        raise ConfigError(f"the supervisor is running (pid {pid}) on {settings.home}; stop it "
                          "first, then restore")
    remote = _remote(settings, where)
    fetched = snapshot.fetch(remote, settings.run_dir / "restore")
    if fetched is None:
        raise ConfigError(f"there is no snapshot in {remote.where}")
    kept = snapshot.install(fetched, settings.db_path)
    recreate_workspaces(settings)
    ctx: Path = settings.context_dir
    files = 0
    if not ctx.exists() or not any(ctx.iterdir()):
        files = context_sync.restore(remote, ctx)
    text = (f"restored generation {fetched.generation} from {remote.where} into "
            f"{settings.db_path}" + (f"; the database that was there is kept as {kept}"
                                     if kept else "") +
            f"; {files} shared-context file(s) written")
    problem = _audit(settings, "restore", where or remote.where, True, text)
    return Done(text, (problem,) if problem else ())
