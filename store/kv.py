"""Repository for small persistent settings (key → JSON), with a synchronous writer for threads
that must act while the event loop is busy (the kill switch)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from store.clock import Now, system_now
from store.db import AnyDatabase


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


def set_sync(db_path: Path, key: str, value: Any, timeout_s: float = 5.0, *,
             now: Now = system_now) -> None:
    """Write one key with a private connection: usable from any thread or process."""
    conn = sqlite3.connect(db_path, timeout=timeout_s, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO kv (key, value, updated_at) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE"
            " SET value = excluded.value, updated_at = excluded.updated_at",
            (key, json.dumps(value), now()),
        )
    finally:
        conn.close()


def get_sync(db_path: Path, key: str) -> Any:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5.0)
    try:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None
    finally:
        conn.close()
