"""Database snapshots: take one (SQLite's backup API), publish it, choose and restore one.

Layout under the remote (all under `db/`, beside the other engineers' prefixes):

    db/snapshots/<generation>.sqlite.gz   the compressed copy, its sha256 in the metadata
    db/manifest.json                      {"generation", "object", "sha256", "history": [...]}

An upload is complete only once the manifest names it, and the manifest is written last: a
partial upload (a data object and no manifest, or half a data object) is never restored. The
generation is also written into the copy itself (kv `snapshot:generation`), so a data
directory knows which generation it holds and, with both a local database and a bucket, the
newer one wins. Before a restore the file's sha256 is checked against the manifest and the
database against `PRAGMA integrity_check`; a snapshot that fails either is skipped for the
previous one the manifest lists, and a restore never replaces a database unless the one that
replaces it passed both.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from supervisor.persistence.remote import Remote, RemoteError
from supervisor.persistence.remote import read_manifest as remote_manifest

logger = logging.getLogger(__name__)

GEN_KEY = "snapshot:generation"
MANIFEST = "db/manifest.json"
SNAPSHOTS = "db/snapshots/"
KEEP = 5  # generations the manifest lists (and the bucket keeps) for a fallback


class SnapshotError(Exception):
    """A snapshot could not be taken, published or restored; the text says why."""


@dataclass(frozen=True, slots=True)
class Taken:
    generation: int
    path: Path  # the compressed copy, ready to upload
    sha256: str
    size: int  # compressed bytes
    raw_size: int  # the database's bytes
    took_s: float


@dataclass(frozen=True, slots=True)
class Published:
    generation: int
    sha256: str
    size: int
    at: float


def object_name(generation: int) -> str:
    return f"{SNAPSHOTS}{generation:012d}.sqlite.gz"


def local_generation(db_path: Path) -> int | None:
    """The generation a database holds: None if there is no database, 0 if it never had one."""
    if not db_path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5.0)
        try:
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (GEN_KEY,)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:  # no kv table yet (never migrated), or not a database
        return 0
    return int(json.loads(row[0])) if row else 0


_SET_GEN = ("INSERT INTO kv (key, value, updated_at) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE"
            " SET value = excluded.value, updated_at = excluded.updated_at")


def take(source: sqlite3.Connection, generation: int, work_dir: Path, *,
         mark_source: bool = True) -> Taken:
    """A consistent copy of the database behind `source` (the backup API), `generation`
    written into the copy and, with `mark_source`, into the live database too (through
    `source`, so its own data_version does not move: the database then knows which
    generation it last published); compressed into `work_dir`."""
    t0 = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    if mark_source:
        source.execute(_SET_GEN, (GEN_KEY, json.dumps(generation), time.time()))
    raw = work_dir / f"snapshot-{generation}.db"
    packed = work_dir / f"snapshot-{generation}.db.gz"
    raw.unlink(missing_ok=True)
    try:
        dest = sqlite3.connect(raw)
        try:
            source.backup(dest)
            dest.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            dest.execute(_SET_GEN, (GEN_KEY, json.dumps(generation), time.time()))
            dest.commit()
        finally:
            dest.close()
        digest = hashlib.sha256()
        with open(raw, "rb") as src, open(packed, "wb") as out:
            # mtime=0: the same database gives the same bytes, hence the same checksum.
            with gzip.GzipFile(fileobj=_Hashing(out, digest), mode="wb", compresslevel=6,
                               mtime=0) as gz:
                shutil.copyfileobj(src, gz, 1024 * 1024)
        raw_size = raw.stat().st_size
    except (sqlite3.Error, OSError) as exc:
        packed.unlink(missing_ok=True)
        raise SnapshotError(f"could not take a snapshot: {exc}") from exc
    finally:
        raw.unlink(missing_ok=True)
    return Taken(generation, packed, digest.hexdigest(), packed.stat().st_size, raw_size,
                 time.monotonic() - t0)


class Digest(Protocol):
    """What a hashlib object is to _Hashing (hashlib names no public type for it)."""

    def update(self, data: bytes, /) -> None: ...


class Sink(Protocol):
    """A binary file that is written to."""

    def write(self, data: bytes, /) -> int: ...


class _Hashing:
    """A file wrapper that hashes what is written through it."""

    def __init__(self, fh: Sink, digest: Digest) -> None:
        self._fh = fh
        self._digest = digest

    def write(self, data: bytes) -> int:
        self._digest.update(data)
        return self._fh.write(data)

    def flush(self) -> None:
        self._fh.flush()  # type: ignore[attr-defined]


def _names_a_generation(manifest: dict[str, Any]) -> bool:
    int(manifest["generation"])  # raises on a missing or non-numeric one: unreadable
    return True


def read_manifest(remote: Remote) -> dict[str, Any] | None:
    return remote_manifest(remote, MANIFEST, _names_a_generation, "snapshot manifest")


def publish(remote: Remote, taken: Taken, *, by: str = "") -> Published:
    """Upload the copy, then (only then) the manifest naming it; drop what the manifest no
    longer lists."""
    old = read_manifest(remote)
    if old is not None and int(old["generation"]) >= taken.generation:
        # Someone else published since we looked: another supervisor on this bucket. Never
        # overwrite its newer snapshot with ours.
        raise SnapshotError(f"{remote.where} already holds generation {old['generation']} "
                            f"(by {old.get('by') or 'another supervisor'}), not older than "
                            f"ours ({taken.generation}); is another Switchboard using this "
                            "bucket?")
    name = object_name(taken.generation)
    meta = {"generation": str(taken.generation), "sha256": taken.sha256}
    remote.put_file(name, taken.path, metadata=meta)
    at = time.time()
    entry: dict[str, Any] = {"generation": taken.generation, "object": name,
                             "sha256": taken.sha256, "size": taken.size,
                             "raw_size": taken.raw_size, "at": at, "by": by}
    history = [entry, *[h for h in _history(old) if h["generation"] < taken.generation]][:KEEP]
    remote.put_bytes(MANIFEST, json.dumps({**entry, "history": history}).encode(),
                     metadata={"generation": str(taken.generation)})
    keep = {h["object"] for h in history}
    for obj in remote.list(SNAPSHOTS):
        if obj not in keep and obj.endswith(".sqlite.gz") and \
                _gen_of(obj) < taken.generation:
            with contextlib.suppress(RemoteError):
                remote.delete(obj)
    return Published(taken.generation, taken.sha256, taken.size, at)


def _history(manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not manifest:
        return []
    hist = manifest.get("history")
    return [h for h in hist if isinstance(h, dict)] if isinstance(hist, list) else []


def _gen_of(obj: str) -> int:
    try:
        return int(obj.rsplit("/", 1)[-1].split(".", 1)[0])
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class Fetched:
    generation: int
    path: Path  # a verified database file, ready to be moved into place
    sha256: str


def fetch(remote: Remote, work_dir: Path) -> Fetched | None:
    """The newest snapshot the manifest lists that passes its checksum and integrity check,
    downloaded and decompressed into `work_dir`; None if the bucket holds none. Each one
    refused is logged with the reason."""
    manifest = read_manifest(remote)
    if manifest is None:
        return None
    work_dir.mkdir(parents=True, exist_ok=True)
    for entry in _history(manifest) or [manifest]:
        gen, obj, sha = int(entry["generation"]), str(entry["object"]), str(entry["sha256"])
        why = _download_verified(remote, obj, sha, gen, work_dir)
        if isinstance(why, Path):
            return Fetched(gen, why, sha)
        logger.error("snapshot refused generation=%d object=%s: %s", gen, obj, why)
    raise SnapshotError(f"no snapshot in {remote.where} passed its checks (see the log); "
                        "nothing was restored")


def _download_verified(remote: Remote, obj: str, sha: str, gen: int,
                       work_dir: Path) -> Path | str:
    packed = work_dir / f"restore-{gen}.db.gz"
    raw = work_dir / f"restore-{gen}.db"
    try:
        if not remote.get_file(obj, packed):
            return "the object is missing"
        digest = hashlib.sha256()
        with open(packed, "rb") as fh:
            for block in iter(lambda: fh.read(1024 * 1024), b""):
                digest.update(block)
        if digest.hexdigest() != sha:
            return f"checksum mismatch (manifest {sha[:12]}, object {digest.hexdigest()[:12]})"
        with gzip.open(packed, "rb") as src, open(raw, "wb") as out:
            shutil.copyfileobj(src, out, 1024 * 1024)
        why = _check_database(raw, gen)
        if why:
            raw.unlink(missing_ok=True)
            return why
        return raw
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raw.unlink(missing_ok=True)
        return f"unreadable: {exc}"
    finally:
        packed.unlink(missing_ok=True)


def _check_database(path: Path, gen: int) -> str | None:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            ok = conn.execute("PRAGMA integrity_check").fetchone()
            if not ok or ok[0] != "ok":
                return f"integrity check failed: {ok[0] if ok else 'no answer'}"
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"not a database: {exc}"
    held = local_generation(path)
    if held != gen:
        return f"it holds generation {held}, not {gen}"
    return None


def install(fetched: Fetched, db_path: Path) -> Path | None:
    """Move a verified snapshot into place as the database. A database already there is kept
    beside it (renamed, with its -wal and -shm) and that name returned; stale -wal/-shm files
    are never left next to the restored file (SQLite would apply them to it)."""
    kept: Path | None = None
    if db_path.exists():
        kept = db_path.with_name(f"{db_path.name}.before-restore-{int(time.time())}")
        os.replace(db_path, kept)
    for suffix in ("-wal", "-shm"):
        side = db_path.with_name(db_path.name + suffix)
        if side.exists():
            if kept is not None:
                os.replace(side, kept.with_name(kept.name + suffix))
            else:
                side.unlink()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(fetched.path, db_path)
    return kept


@dataclass(frozen=True, slots=True)
class Decision:
    action: str  # "restore", "local" (keep the local database) or "none" (nothing anywhere)
    local: int | None
    remote: int | None
    why: str


def decide(db_path: Path, remote: Remote) -> Decision:
    """Restore, or keep the local database: the newer generation wins; a tie keeps the local
    one (it may hold writes made after its last upload)."""
    local = local_generation(db_path)
    manifest = read_manifest(remote)
    theirs = int(manifest["generation"]) if manifest else None
    if theirs is None:
        return Decision("local" if local is not None else "none", local, None,
                        f"no snapshot in {remote.where}")
    if local is None:
        return Decision("restore", None, theirs, "no local database")
    if theirs > local:
        return Decision("restore", local, theirs,
                        f"the bucket's generation {theirs} is newer than the local {local}")
    return Decision("local", local, theirs,
                    f"the local generation {local} is not older than the bucket's {theirs}")
