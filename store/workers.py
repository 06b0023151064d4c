"""Repository for the workers: every `switchboard run` on the database has one row (host, pid,
agents, memory available, whether it is the coordinator), renewed by its heartbeat. Every time
here is the database's clock (PostgreSQL's `now()`, SQLite's `unixepoch`), never a host's: hosts
on one database need not agree on the time."""

from __future__ import annotations

from dataclasses import dataclass

from store.db import AnyDatabase

# The database's clock, in epoch seconds, one text per engine.
_NOW = {
    "sqlite": "(julianday('now') - 2440587.5) * 86400.0",
    "postgresql": "CAST(EXTRACT(EPOCH FROM now()) AS DOUBLE PRECISION)",
}


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    agents: int
    memory_available: int | None  # bytes
    coordinator: int
    age_s: float  # since its last heartbeat, on the database's clock


class WorkerRepo:
    def __init__(self, db: AnyDatabase) -> None:
        self.db = db

    @property
    def _now(self) -> str:
        return _NOW[self.db.dialect]

    async def beat(self, worker_id: str, *, host: str, pid: int, agents: int,
                   memory_available: int | None, coordinator: bool) -> None:
        """Register the worker (its first beat) or renew its heartbeat, in one statement."""
        now = self._now
        await self.db.execute(
            "INSERT INTO workers (id, host, pid, started_at, heartbeat_at, agents,"
            f" memory_available, coordinator) VALUES (?, ?, ?, {now}, {now}, ?, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,"
            " agents = excluded.agents, memory_available = excluded.memory_available,"
            " coordinator = excluded.coordinator",
            (worker_id, host, pid, agents, memory_available, int(coordinator)))

    async def only_coordinator(self, worker_id: str) -> None:
        """The worker that took the coordinator role: no other row says it holds it (a dead
        coordinator's row says so until it is removed)."""
        await self.db.execute("UPDATE workers SET coordinator = 0 WHERE id <> ? AND"
                              " coordinator <> 0", (worker_id,))

    async def remove(self, worker_id: str) -> None:
        await self.db.execute("DELETE FROM workers WHERE id = ?", (worker_id,))

    async def list(self) -> list[WorkerRow]:
        """Every worker, the coordinator first, then the most recently heard from."""
        rows = await self.db.fetchall(
            "SELECT id, host, pid, started_at, heartbeat_at, agents, memory_available,"
            f" coordinator, {self._now} - heartbeat_at AS age_s FROM workers"
            " ORDER BY coordinator DESC, heartbeat_at DESC, id")
        return [WorkerRow(**dict(r)) for r in rows]
