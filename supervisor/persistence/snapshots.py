"""The snapshot service: the database and the shared-context directory to the bucket, from a
thread of its own, so no upload ever blocks the event loop.

A snapshot is wanted when a turn starts and ends (debounced: a burst makes one upload), every
`snapshot_interval_s`, and at shutdown; one is taken only if something changed (the thread's
own connection watches `PRAGMA data_version`, and the context directory's checksums). A failed
upload is retried with a growing delay (2, 4, 8... up to the interval) and, after
REPORT_AFTER failures in a row, reported to the operator once; the first success after that
is reported too. `run_once` is the loop's body, which tests and `switchboard backup` call
directly. The same thread renews the agents' leases (supervisor/persistence/leases.py).

`restore_on_start` runs before the store opens: with no local database (or an older one) and
a snapshot in the bucket, the snapshot (checked) becomes the database and the context
directory is filled from the bucket; the decision is logged either way.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from supervisor.clock import backoff_s
from supervisor.config import Settings
from supervisor.persistence import context_sync, snapshot
from supervisor.persistence.leases import Leases
from supervisor.persistence.remote import Remote, RemoteError

logger = logging.getLogger(__name__)

REPORT_AFTER = 3
MAX_BACKOFF_S = 300.0

Notify = Callable[[str, str], None]  # (title, body), thread-safe


def context_dir(settings: Settings) -> Path:
    return settings.context_dir


@dataclass(frozen=True, slots=True)
class SnapshotStatus:
    where: str
    last: snapshot.Published | None  # the last good snapshot (this run or found at start)
    failures: int  # uploads failed in a row
    last_error: str | None


@dataclass(frozen=True, slots=True)
class Restored:
    decision: snapshot.Decision
    generation: int | None  # restored generation, None if nothing was restored
    kept: Path | None  # the local database set aside, if one was replaced
    context_files: int


def restore_on_start(settings: Settings, remote: Remote) -> Restored:
    """Blocking: call it in a thread, before the store opens."""
    decision = snapshot.decide(settings.db_path, remote)
    logger.warning("snapshot decision action=%s local=%s remote=%s why=%s", decision.action,
                   decision.local, decision.remote, decision.why)
    ctx = context_dir(settings)
    if decision.action != "restore":
        ctx.mkdir(parents=True, exist_ok=True)
        return Restored(decision, None, None, 0)
    try:
        fetched = snapshot.fetch(remote, settings.run_dir / "restore")
    except snapshot.SnapshotError:
        if decision.local is None:
            raise  # starting empty would soon publish an empty database over the bucket's
        logger.error("no snapshot passed its checks: the local database is kept "
                     "generation=%s", decision.local)
        ctx.mkdir(parents=True, exist_ok=True)
        return Restored(snapshot.Decision("local", decision.local, decision.remote,
                                          "no snapshot in the bucket passed its checks"),
                        None, None, 0)
    assert fetched is not None  # decide() saw a manifest
    kept = snapshot.install(fetched, settings.db_path)
    recreate_workspaces(settings)
    files = 0
    if not ctx.exists() or not any(ctx.iterdir()):
        files = context_sync.restore(remote, ctx)
    ctx.mkdir(parents=True, exist_ok=True)
    logger.warning("restored from snapshot generation=%d where=%s context_files=%d kept=%s",
                   fetched.generation, remote.where, files, kept)
    return Restored(decision, fetched.generation, kept, files)


def recreate_workspaces(settings: Settings) -> None:
    """Workspaces Switchboard made (under workspaces/) went with the old disk: made again,
    empty, so the restored agents can start in them. (What was in them is not in the
    snapshot: work meant to last belongs in a repository.)"""
    top = settings.workspaces.resolve()
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    try:
        cwds = [row[0] for row in conn.execute("SELECT DISTINCT cwd FROM agents")]
    except sqlite3.Error:
        cwds = []
    finally:
        conn.close()
    for cwd in cwds:
        path = Path(cwd)
        if not path.exists() and str(path.resolve()).startswith(str(top) + "/"):
            path.mkdir(parents=True, exist_ok=True)
            logger.warning("workspace made again, empty path=%s", path)


def _backoff_s(failures: int, interval_s: float) -> float:
    return backoff_s(failures, 1.0, min(max(interval_s, 2.0), MAX_BACKOFF_S))


class Snapshotter:
    def __init__(self, settings: Settings, remote: Remote, *, notify: Notify | None = None,
                 leases: Leases | None = None, holder: str = "",
                 restored: Restored | None = None) -> None:
        self.settings = settings
        self.remote = remote
        self.notify = notify or (lambda _t, _b: None)
        self.leases = leases
        self.holder = holder
        self.interval_s = settings.snapshot_interval_s
        self.debounce_s = settings.snapshot_debounce_s
        self._conn: sqlite3.Connection | None = None
        self._data_version: int | None = None
        # Just restored: the database is the bucket's newest; nothing to upload yet.
        self._dirty = restored is None or restored.generation is None
        self._context_last: dict[str, str] | None = None
        self._generation = 0
        self.last: snapshot.Published | None = None
        self.failures = 0
        self.last_error: str | None = None
        self._reported = False
        self._cond = threading.Condition()
        self._due: float | None = None  # monotonic time of the next wanted snapshot
        self._retry_at: float | None = None
        self._stop = False
        self._thread: threading.Thread | None = None
        self._run_lock = threading.Lock()  # one run_once at a time (loop, shutdown, backup)
        self.lost_leases: Callable[[list[str]], None] = lambda _ids: None

    # -- life ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Blocking: the connection, the generations known and the last good snapshot."""
        self._conn = sqlite3.connect(self.settings.db_path, isolation_level=None,
                                     check_same_thread=False, timeout=10.0)
        self._conn.execute("PRAGMA busy_timeout=10000")
        self._data_version = self._version()
        self._generation = snapshot.local_generation(self.settings.db_path) or 0
        try:
            manifest = snapshot.read_manifest(self.remote)
            ctx = context_sync.read_manifest(self.remote)
        except RemoteError as exc:  # the loop retries; the start does not wait for the bucket
            logger.error("snapshot bucket unreachable at start where=%s: %s", self.remote.where,
                         exc)
            return
        theirs = int(manifest["generation"]) if manifest else 0
        self._generation = max(self._generation, theirs)
        if manifest:
            self.last = snapshot.Published(theirs, str(manifest.get("sha256", "")),
                                           int(manifest.get("size", 0)),
                                           float(manifest.get("at", 0)))
        self._context_last = dict(ctx["files"]) if ctx else None

    def start(self) -> None:
        if self._conn is None:
            self.prepare()
        self._thread = threading.Thread(target=self._loop, name="snapshots", daemon=True)
        self._thread.start()

    def close(self, *, final: bool = True, timeout_s: float = 60.0) -> None:
        """Stop the thread; with `final`, one last snapshot first (the shutdown one)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None
        if final and self._conn is not None:
            self.run_once("shutdown")
        if self.leases is not None:
            self.leases.release()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, reason: str = "turn") -> None:
        """A snapshot is wanted soon (after a turn ended): due in `snapshot_debounce_s`
        unless one is already due sooner."""
        with self._cond:
            due = time.monotonic() + self.debounce_s
            if self._due is None or due < self._due:
                self._due = due
                self._cond.notify_all()
        logger.debug("snapshot requested reason=%s", reason)

    def status(self) -> SnapshotStatus:
        return SnapshotStatus(self.remote.where, self.last, self.failures, self.last_error)

    # -- the thread ------------------------------------------------------------------------

    def _loop(self) -> None:
        next_tick = time.monotonic() + self.interval_s
        next_renew = time.monotonic() + self._renew_every()
        while True:
            with self._cond:
                while not self._stop:
                    wake = min(t for t in (next_tick, next_renew, self._due, self._retry_at)
                               if t is not None)
                    left = wake - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if self._stop:
                    return
                now = time.monotonic()
                fire = (self._due is not None and now >= self._due) or now >= next_tick or \
                    (self._retry_at is not None and now >= self._retry_at)
                if fire:
                    self._due = None
                    self._retry_at = None
                    next_tick = now + self.interval_s
            if now >= next_renew:
                next_renew = now + self._renew_every()
                self._renew()
            if fire:
                self.run_once("schedule")

    def _renew_every(self) -> float:
        return (self.leases.ttl_s / 3) if self.leases is not None else float("inf")

    def _renew(self) -> None:
        if self.leases is None:
            return
        try:
            lost = self.leases.renew()
        except Exception:  # noqa: BLE001 - the thread never dies of an error
            logger.exception("lease renewal failed")
            return
        if lost:
            self.lost_leases(lost)

    def _version(self) -> int:
        assert self._conn is not None
        row = self._conn.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def run_once(self, reason: str = "now") -> str:
        """One snapshot if anything changed: "uploaded", "unchanged" or "failed"."""
        with self._run_lock:
            try:
                did = self._snapshot_db(reason) | self._sync_context()
            except (snapshot.SnapshotError, RemoteError, OSError, sqlite3.Error) as exc:
                self._failed(exc)
                return "failed"
            except Exception as exc:  # noqa: BLE001 - the thread never dies of an error
                logger.exception("snapshot crashed")
                self._failed(exc)
                return "failed"
            self._succeeded()
            return "uploaded" if did else "unchanged"

    def _snapshot_db(self, reason: str) -> bool:
        assert self._conn is not None
        version = self._version()
        if version != self._data_version:
            self._dirty = True
            self._data_version = version
        if not self._dirty:
            return False
        taken = snapshot.take(self._conn, self._generation + 1, self.settings.run_dir / "snap")
        try:
            published = snapshot.publish(self.remote, taken, by=self.holder)
        finally:
            taken.path.unlink(missing_ok=True)
        self._generation = taken.generation
        self._dirty = False
        self.last = published
        logger.info("snapshot uploaded generation=%d bytes=%d raw_bytes=%d took_ms=%.0f "
                    "reason=%s where=%s", taken.generation, taken.size, taken.raw_size,
                    taken.took_s * 1000, reason, self.remote.where)
        return True

    def _sync_context(self) -> bool:
        done, now = context_sync.upload(self.remote, context_dir(self.settings),
                                        self._generation, self._context_last)
        self._context_last = now
        return done is not None

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        delay = _backoff_s(self.failures, self.interval_s)
        with self._cond:
            self._retry_at = time.monotonic() + delay
            self._cond.notify_all()
        logger.error("snapshot upload failed failures=%d retry_in_s=%.0f where=%s: %s",
                     self.failures, delay, self.remote.where, self.last_error)
        if self.failures >= REPORT_AFTER and not self._reported:
            self._reported = True
            self.notify("⚠ Snapshots to the bucket are failing",
                        f"{self.failures} uploads to {self.remote.where} failed in a row "
                        f"(last: {self.last_error}). Retrying with backoff; until one works, a "
                        "replaced container would come back from an older snapshot. Check the "
                        "bucket and its credentials, or run `switchboard backup --to DIR`.")

    def _succeeded(self) -> None:
        if self._reported:
            self.notify("Snapshots to the bucket work again",
                        f"After {self.failures} failures, generation "
                        f"{self.last.generation if self.last else '?'} was uploaded to "
                        f"{self.remote.where}.")
        self.failures = 0
        self.last_error = None
        self._reported = False
