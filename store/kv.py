"""Repository for small persistent settings (key → JSON), with a synchronous writer for threads
that must act while the event loop is busy (the kill switch)."""

from __future__ import annotations

import json
from typing import Any

from store import private
from store.clock import Now, system_now
from store.db import AnyDatabase
from store.private import TIMEOUT_S, Target


class KvRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    async def get(self, key: str) -> Any:
        row = await self.db.fetchone("SELECT value FROM kv WHERE key = ?", (key,))
        return json.loads(row["value"]) if row else None

    async def set(self, key: str, value: Any) -> None:
        await self.db.execute(
            "INSERT INTO kv (key, value, updated_at) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE"
            " SET value = excluded.value, updated_at = excluded.updated_at",
            (key, json.dumps(value), self._now()),
        )

    async def delete(self, key: str) -> None:
        await self.db.execute("DELETE FROM kv WHERE key = ?", (key,))

    async def touch(self, key: str) -> float:
        """Write the time under `key` and return it: proof the database takes writes."""
        now = self._now()
        await self.set(key, now)
        return now


def set_sync(target: Target, key: str, value: Any, timeout_s: float = TIMEOUT_S, *,
             now: Now = system_now, notify: str | None = None) -> None:
    """Write one key with a private connection (store/private.py): usable from any thread or
    process. `target`: the SQLite file, or the PostgreSQL URL (`db.writer_target`). `notify`:
    a channel told the key once it is written (PostgreSQL's NOTIFY; `private.listen`)."""
    private.write(target, "INSERT INTO kv (key, value, updated_at) VALUES (?,?,?) ON CONFLICT(key)"
                  " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                  (key, json.dumps(value), now()), timeout_s,
                  notify=None if notify is None else (notify, key))


def get_sync(target: Target, key: str, timeout_s: float = TIMEOUT_S) -> Any:
    row = private.read_one(target, "SELECT value FROM kv WHERE key = ?", (key,), timeout_s)
    return json.loads(row[0]) if row else None
