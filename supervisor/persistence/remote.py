"""Where durable copies go: a GCS bucket (under a prefix) or a local directory, one interface.

Synchronous on purpose: every caller runs in a thread of its own (the snapshot thread, the
`switchboard backup` command), never on the event loop. `put` takes `if_generation_match`
(None: unconditional, 0: only if absent, N: only if the object is at generation N): real GCS
honours it; the emulator the tests use does not on existing objects, so nothing may rely on
it alone (the lease adds a read-after-write check).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from supervisor.config import Settings

CHUNK_BYTES = 8 * 1024 * 1024  # resumable uploads above this size, in chunks of it
RETRY_S = 30.0  # the client's own retries of one call, at most
CALL_TIMEOUT_S = 60.0  # one request

logger = logging.getLogger(__name__)


class RemoteError(Exception):
    """A remote operation failed (network, permissions, a bucket that is not there)."""


class PreconditionFailed(RemoteError):
    """`if_generation_match` did not hold: someone else wrote the object first."""


@dataclass(frozen=True, slots=True)
class Stat:
    generation: int
    size: int
    metadata: dict[str, str]


class Remote(Protocol):
    where: str  # for messages: gs://bucket/prefix or a directory

    def put_bytes(self, name: str, data: bytes, *, metadata: dict[str, str] | None = None,
                  if_generation_match: int | None = None) -> int: ...

    def put_file(self, name: str, path: Path, *,
                 metadata: dict[str, str] | None = None) -> int: ...

    def get_bytes(self, name: str) -> bytes | None: ...

    def get_file(self, name: str, path: Path) -> bool: ...

    def stat(self, name: str) -> Stat | None: ...

    def list(self, prefix: str) -> list[str]: ...

    def delete(self, name: str) -> None: ...


class GcsRemote:
    """Objects in a bucket under `prefix`; the google-cloud-storage client, made on first use."""

    def __init__(self, bucket: str, prefix: str = "", *,
                 client_kwargs: dict[str, Any] | None = None,
                 chunk_bytes: int = CHUNK_BYTES, retry: bool = True) -> None:
        self.bucket_name = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.where = f"gs://{bucket}/{self.prefix}"
        self._kwargs = client_kwargs or {}
        self._bucket: Any = None
        self._lock = threading.Lock()
        self.chunk_bytes = chunk_bytes
        # The client's own retries (a minute or two on a dead connection) before ours; off,
        # one try per call (tests, where the emulator going away is the point).
        self.retry = retry

    def _b(self) -> Any:
        with self._lock:
            if self._bucket is None:
                try:
                    from google.cloud import storage

                    self._bucket = storage.Client(**self._kwargs).bucket(self.bucket_name)
                except Exception as exc:  # noqa: BLE001 - no credentials, no library...
                    raise RemoteError(f"{self.where}: no storage client: "
                                      f"{type(exc).__name__}: {exc}") from exc
            return self._bucket

    def _call(self, fn: Any, *args: Any, missing_ok: bool = True, **kwargs: Any) -> Any:
        """`fn` with bounded retries; a missing object is None (`missing_ok`, for reads), every
        other failure (a write to a bucket that is not there included) a RemoteError."""
        from google.api_core import exceptions as gexc
        from google.cloud.storage.retry import DEFAULT_RETRY

        # Bounded: the library's own retries last two minutes, which would hold a shutdown's
        # last snapshot (and the process's exit) that long on a dead network.
        kwargs["retry"] = DEFAULT_RETRY.with_timeout(RETRY_S) if self.retry else None
        kwargs.setdefault("timeout", CALL_TIMEOUT_S)
        try:
            return fn(*args, **kwargs)
        except gexc.PreconditionFailed as exc:
            raise PreconditionFailed(str(exc)) from exc
        except gexc.NotFound as exc:
            if missing_ok:
                return None
            raise RemoteError(f"{self.where}: not found: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - every transport failure is one RemoteError
            self._bucket = None  # a new client next time: the old one may hold a dead pool
            raise RemoteError(f"{self.where}: {type(exc).__name__}: {exc}") from exc

    def put_bytes(self, name: str, data: bytes, *, metadata: dict[str, str] | None = None,
                  if_generation_match: int | None = None) -> int:
        blob = self._b().blob(self.prefix + name)
        blob.metadata = metadata
        kwargs = {} if if_generation_match is None else {"if_generation_match":
                                                          if_generation_match}
        self._call(blob.upload_from_string, data, missing_ok=False, **kwargs)
        return int(blob.generation or 0)

    def put_file(self, name: str, path: Path, *,
                 metadata: dict[str, str] | None = None) -> int:
        blob = self._b().blob(self.prefix + name,
                              chunk_size=self.chunk_bytes
                              if path.stat().st_size > self.chunk_bytes else None)
        blob.metadata = metadata
        self._call(blob.upload_from_filename, str(path), missing_ok=False)
        return int(blob.generation or 0)

    def get_bytes(self, name: str) -> bytes | None:
        blob = self._b().blob(self.prefix + name)
        data = self._call(blob.download_as_bytes)
        return data if isinstance(data, bytes) else None

    def get_file(self, name: str, path: Path) -> bool:
        blob = self._b().blob(self.prefix + name)
        def download(**kwargs: Any) -> bool:
            with open(path, "wb") as fh:
                blob.download_to_file(fh, **kwargs)
            return True

        return bool(self._call(download))  # None: not found

    def stat(self, name: str) -> Stat | None:
        blob = self._call(self._b().get_blob, self.prefix + name)
        if blob is None:
            return None
        return Stat(int(blob.generation or 0), int(blob.size or 0), dict(blob.metadata or {}))

    def list(self, prefix: str) -> list[str]:
        blobs = self._call(self._list, self.prefix + prefix)
        return sorted(b.name[len(self.prefix):] for b in blobs or ())

    def _list(self, prefix: str, **kwargs: Any) -> Any:
        return list(self._b().list_blobs(prefix=prefix, **kwargs))

    def delete(self, name: str) -> None:
        self._call(self._b().delete_blob, self.prefix + name)


class DirRemote:
    """The same interface over a local directory (`switchboard backup --to DIR`): each object
    a file, its metadata beside it; written to a temporary name and renamed, so a reader
    never sees half a file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root)

    def _path(self, name: str) -> Path:
        p = (self.root / name).resolve()
        if not str(p).startswith(str(self.root.resolve()) + os.sep):
            raise RemoteError(f"{name!r} is outside {self.root}")
        return p

    def _meta_path(self, name: str) -> Path:
        p = self._path(name)
        return p.with_name(p.name + ".meta.json")

    def _write(self, name: str, data: bytes, metadata: dict[str, str] | None) -> int:
        p = self._path(name)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(p.name + ".part")
            tmp.write_bytes(data)
            os.replace(tmp, p)
            if metadata is not None:
                self._meta_path(name).write_text(json.dumps(metadata))
            return p.stat().st_mtime_ns
        except OSError as exc:
            raise RemoteError(f"{self.where}: {exc}") from exc

    def put_bytes(self, name: str, data: bytes, *, metadata: dict[str, str] | None = None,
                  if_generation_match: int | None = None) -> int:
        if if_generation_match is not None:
            now = self.stat(name)
            if (now.generation if now else 0) != if_generation_match:
                raise PreconditionFailed(f"{name}: generation does not match")
        return self._write(name, data, metadata)

    def put_file(self, name: str, path: Path, *,
                 metadata: dict[str, str] | None = None) -> int:
        return self._write(name, path.read_bytes(), metadata)

    def get_bytes(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RemoteError(f"{self.where}: {exc}") from exc

    def get_file(self, name: str, path: Path) -> bool:
        data = self.get_bytes(name)
        if data is None:
            return False
        path.write_bytes(data)
        return True

    def stat(self, name: str) -> Stat | None:
        p = self._path(name)
        try:
            st = p.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        meta: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            meta = json.loads(self._meta_path(name).read_text())
        return Stat(st.st_mtime_ns, st.st_size, meta)

    def list(self, prefix: str) -> list[str]:
        if not self.root.is_dir():
            return []
        out = []
        for p in self.root.rglob("*"):
            rel = p.relative_to(self.root).as_posix()
            if p.is_file() and not rel.endswith((".meta.json", ".part")) and \
                    rel.startswith(prefix):
                out.append(rel)
        return sorted(out)

    def delete(self, name: str) -> None:
        for p in (self._path(name), self._meta_path(name)):
            p.unlink(missing_ok=True)


def read_manifest(remote: Remote, name: str, valid: Callable[[dict[str, Any]], bool],
                  what: str) -> dict[str, Any] | None:
    """A JSON manifest in the remote: None when it is missing, or unreadable or not `valid`
    (logged: a broken manifest is ignored, as if there were none)."""
    data = remote.get_bytes(name)
    if data is None:
        return None
    try:
        manifest = json.loads(data)
        if isinstance(manifest, dict) and valid(manifest):
            return manifest
    except (ValueError, KeyError, TypeError):
        pass
    logger.error("%s unreadable where=%s: ignored", what, remote.where)
    return None


def open_remote(settings: Settings, where: str | None = None) -> Remote | None:
    """`where` as given to `switchboard backup --to` (gs://bucket/prefix or a directory), else
    the configured bucket (the kill switch's own); None if there is neither."""
    if where:
        if where.startswith("gs://"):
            bucket, _, prefix = where[len("gs://"):].partition("/")
            if not bucket:
                raise RemoteError(f"{where!r} names no bucket: write gs://bucket[/prefix]")
            return GcsRemote(bucket, prefix, client_kwargs=settings.gcs_client_kwargs())
        return DirRemote(Path(where).expanduser())
    if settings.gcs_bucket:
        return GcsRemote(settings.gcs_bucket, client_kwargs=settings.gcs_client_kwargs())
    return None
