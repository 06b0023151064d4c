"""Claude session transcripts in a GCS bucket: the SDK's SessionStore, one object per batch.

The claude-agent-sdk mirrors every transcript line the CLI writes to `append` (in batches, at
the end of each turn or when a buffer fills) and reads a whole session back with `load` before a
resume. Object storage has no append, and rewriting one object per session would race two
writers and lose lines, so every batch is an object of its own under a name no other batch can
have (the writer's clock in nanoseconds, a per-process counter, random bytes): nothing is ever
overwritten. `load` lists a session's batches, orders them by name, concatenates their lines and
drops repeated entry uuids (the SDK retries a failed batch that may have landed in part).

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

    def _names(self, prefix: str) -> list[str]:
        return sorted(b.name for b in self.bucket.client.list_blobs(self.bucket, prefix=prefix))

    # -- the SessionStore protocol ---------------------------------------------------------------

    async def append(self, key: Any, entries: list[Any]) -> None:
        if not entries:
            return
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
        await anyio.to_thread.run_sync(self._upload, self._stream_dir(key) + self._batch_name(),
                                       data)

    def _upload(self, name: str, data: str) -> None:
        # if_generation_match=0: a name that exists is refused, never overwritten (the names are
        # unique anyway; the emulator ignores the condition, real GCS enforces it).
        self.bucket.blob(name).upload_from_string(
            data, content_type="application/x-ndjson", if_generation_match=0)

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
            return self.bucket.blob(name).download_as_bytes().decode("utf-8")
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
                self.bucket.blob(name).delete()
            except NotFound:
                pass

    async def list_subkeys(self, key: Any) -> list[str]:
        return await anyio.to_thread.run_sync(self._list_subkeys, self._session_dir(key) + SUB
                                              + "/")

    def _list_subkeys(self, base: str) -> list[str]:
        found = {unquote(name[len(base):].split("/", 1)[0]) for name in self._names(base)}
        return sorted(found)


__all__ = ["GcsSessionStore"]
