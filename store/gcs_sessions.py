"""Claude session transcripts in a GCS bucket: the SDK's SessionStore, one object per batch.

The claude-agent-sdk mirrors every transcript line the CLI writes to `append` (in batches, at
the end of each turn or when a buffer fills) and reads a whole session back with `load` before a
resume. Object storage has no append, and rewriting one object per session would race two
writers and lose lines, so every batch is an object of its own under a name no other batch can
have (the writer's clock in nanoseconds, a per-process counter, random bytes): nothing is ever
overwritten. `load` lists a session's batches, orders them by name, concatenates their lines and
drops repeated entry uuids (the SDK retries a failed batch that may have landed in part).

A batch the bucket refuses is not dropped: it waits in a backlog (in memory, in order, under the
name it was given) and goes up before the next batch, so an outage leaves no hole in the middle
of a transcript once the bucket is back. The first failure of an outage is raised, so the SDK
reports it (`mirror_error`, told to the operator); later batches of the same outage queue behind
it silently, and the bucket is tried again at most every RETRY_S. Every call is bounded
(CALL_TIMEOUT_S, RETRY_DEADLINE_S): a bucket that hangs cannot hold a turn's end for long.

Layout under `<prefix>/` (each key part percent-encoded, so a `/` in it cannot nest):

    <project_key>/<session_id>/m/<batch>.jsonl             the main transcript
    <project_key>/<session_id>/s/<subpath>/<batch>.jsonl   a subagent transcript

Every call runs the blocking google-cloud-storage client in a worker thread, never on the
event loop.
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, unquote

import anyio.to_thread

logger = logging.getLogger(__name__)

MAIN = "m"
SUB = "s"
DOWNLOAD_WORKERS = 8
CALL_TIMEOUT_S = 20.0  # one HTTP request
RETRY_DEADLINE_S = 30.0  # the client's own retries of one call
RETRY_S = 5.0  # during an outage, the bucket is tried again at most this often
BACKLOG_MAX_BYTES = 64 * 2**20  # beyond this, the oldest waiting batches are dropped (logged)


def _q(part: str) -> str:
    return quote(part, safe="")


class GcsSessionStore:
    """`bucket` is a google.cloud.storage Bucket; `prefix` the folder for sessions."""

    def __init__(self, bucket: Any, prefix: str = "sessions") -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._counter = itertools.count()
        self._last_ns = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(DOWNLOAD_WORKERS, thread_name_prefix="gcs-sessions")
        self._send_lock = threading.Lock()  # one sender at a time: the backlog stays in order
        self._backlog: list[tuple[str, str]] = []  # (name, data) not yet in the bucket
        self._failed_at: float | None = None  # monotonic time of the last failure, if failing
        self._reported: str | None = None  # the batch whose failure was raised to the SDK
        self.dropped = 0  # batches given up (backlog over BACKLOG_MAX_BYTES)

    @classmethod
    def connect(cls, bucket_name: str, prefix: str, client_kwargs: dict[str, Any]) -> \
            GcsSessionStore:
        """A store on a bucket (blocking: builds the client; call it from a thread)."""
        from google.cloud import storage  # deferred: a heavy import few setups need

        return cls(storage.Client(**client_kwargs).bucket(bucket_name), prefix)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- names ---------------------------------------------------------------------------------

    def _session_dir(self, key: Any) -> str:
        return f"{self.prefix}/{_q(key['project_key'])}/{_q(key['session_id'])}/"

    def _stream_dir(self, key: Any) -> str:
        subpath = key.get("subpath")
        if subpath:
            return f"{self._session_dir(key)}{SUB}/{_q(subpath)}/"
        return f"{self._session_dir(key)}{MAIN}/"

    def _batch_name(self) -> str:
        with self._lock:  # strictly increasing within this process, whatever the clock does
            ns = max(time.time_ns(), self._last_ns + 1)
            self._last_ns = ns
            n = next(self._counter)
        return f"{ns:020d}-{n:08d}-{secrets.token_hex(6)}.jsonl"

    @property
    def waiting(self) -> int:
        """Batches refused so far and not yet in the bucket."""
        return len(self._backlog)

    def _names(self, prefix: str) -> list[str]:
        return sorted(b.name for b in self.bucket.client.list_blobs(
            self.bucket, prefix=prefix, timeout=CALL_TIMEOUT_S, retry=_retry()))

    # -- the SessionStore protocol ---------------------------------------------------------------

    async def append(self, key: Any, entries: list[Any]) -> None:
        if not entries:
            return
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
        await anyio.to_thread.run_sync(self._send, self._stream_dir(key), data)

    def _send(self, stream: str, data: str) -> None:
        with self._send_lock:
            if self._reported is not None and data == self._reported:
                pass  # the SDK retrying the batch whose failure it was told: it is queued
            else:
                self._backlog.append((stream + self._batch_name(), data))
                self._trim()
            now = time.monotonic()
            if self._failed_at is not None and now - self._failed_at < RETRY_S:
                if data == self._reported:
                    raise RuntimeError("the bucket refused the last batch; it is kept and sent "
                                       "again with the next one")
                return  # an outage: queued behind the batch already reported
            try:
                while self._backlog:
                    self._upload(*self._backlog[0])
                    self._backlog.pop(0)
            except Exception:
                self._failed_at = time.monotonic()
                if self._reported is None:
                    self._reported = data
                    raise
                logger.warning("gcs sessions: bucket still failing, %d batches waiting",
                               len(self._backlog), exc_info=True)
                return
            if self._failed_at is not None:
                logger.info("gcs sessions: bucket reachable again, backlog sent")
            self._failed_at = self._reported = None

    def _trim(self) -> None:
        total = sum(len(d) for _, d in self._backlog)
        while total > BACKLOG_MAX_BYTES and len(self._backlog) > 1:
            name, data = self._backlog.pop(0)
            total -= len(data)
            self.dropped += 1
            logger.error("gcs sessions: backlog full, batch dropped name=%s", name)

    def _upload(self, name: str, data: str) -> None:
        from google.api_core.exceptions import PreconditionFailed

        # if_generation_match=0: a name that exists is refused, never overwritten (the names are
        # unique anyway; the emulator ignores the condition, real GCS enforces it). Refused
        # that way, it is ours from an attempt whose answer was lost: done.
        try:
            self.bucket.blob(name).upload_from_string(
                data, content_type="application/x-ndjson", if_generation_match=0,
                timeout=CALL_TIMEOUT_S, retry=_retry())
        except PreconditionFailed:
            pass

    async def load(self, key: Any) -> list[Any] | None:
        return await anyio.to_thread.run_sync(self._load, self._stream_dir(key))

    def _load(self, prefix: str) -> list[Any] | None:
        names = self._names(prefix)
        if not names:
            return None
        texts = list(self._pool.map(self._download, names))
        out: list[Any] = []
        seen: set[str] = set()
        for text in texts:
            for line in (text or "").splitlines():
                if not line.strip():
                    continue
                entry = json.loads(line)
                uid = entry.get("uuid") if isinstance(entry, dict) else None
                if isinstance(uid, str):
                    if uid in seen:
                        continue
                    seen.add(uid)
                out.append(entry)
        return out

    def _download(self, name: str) -> str | None:
        from google.api_core.exceptions import NotFound

        try:
            data: bytes = self.bucket.blob(name).download_as_bytes(
                timeout=CALL_TIMEOUT_S, retry=_retry())
            return data.decode("utf-8")
        except NotFound:  # deleted between the listing and now
            return None

    async def list_sessions(self, project_key: str) -> list[Any]:
        return await anyio.to_thread.run_sync(self._list_sessions, project_key)

    def _list_sessions(self, project_key: str) -> list[Any]:
        base = f"{self.prefix}/{_q(project_key)}/"
        latest: dict[str, int] = {}
        for name in self._names(base):
            parts = name[len(base):].split("/")
            if len(parts) != 3 or parts[1] != MAIN:
                continue  # a subagent's transcript is not a session of its own
            sid = unquote(parts[0])
            latest[sid] = max(latest.get(sid, 0), int(parts[2].split("-", 1)[0]) // 1_000_000)
        return [{"session_id": sid, "mtime": mtime} for sid, mtime in latest.items()]

    async def delete(self, key: Any) -> None:
        # A main key takes its subagents with it; a subpath only itself.
        prefix = self._stream_dir(key) if key.get("subpath") else self._session_dir(key)
        await anyio.to_thread.run_sync(self._delete, prefix)

    def _delete(self, prefix: str) -> None:
        from google.api_core.exceptions import NotFound

        for name in self._names(prefix):
            try:
                self.bucket.blob(name).delete(timeout=CALL_TIMEOUT_S, retry=_retry())
            except NotFound:
                pass

    async def list_subkeys(self, key: Any) -> list[str]:
        return await anyio.to_thread.run_sync(self._list_subkeys, self._session_dir(key) + SUB
                                              + "/")

    def _list_subkeys(self, base: str) -> list[str]:
        found = {unquote(name[len(base):].split("/", 1)[0]) for name in self._names(base)}
        return sorted(found)


def _retry() -> Any:
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY.with_timeout(RETRY_DEADLINE_S)


__all__ = ["GcsSessionStore"]
