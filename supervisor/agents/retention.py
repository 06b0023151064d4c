"""Retention of raw events: what bounds the database after a long day.

Every `retention_interval_s` (and once at start) raw events older than `event_retention_days`,
and beyond the newest `event_retention_per_agent` of each agent, are deleted, a bounded chunk
per transaction, on the event ingest's writer thread (between its batches, so ingest never
waits long and no second writer contends for SQLite's lock). Turns, costs (their per-agent and
per-day roll-ups too), escalations, bus messages and audit rows are never pruned here. SQLite
reuses the freed pages, so the file stops growing once the retained set is steady.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from store.db import AnyDatabase, Database
from store.errors import StoreError
from store.events import EventRepo
from store.writer import Write
from supervisor.agents.ingest import EventIngest
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings

logger = logging.getLogger(__name__)

CHUNK = 5000  # rows deleted per transaction
DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Pruned:
    by_age: int
    by_count: int


class Retention:
    def __init__(self, ingest: EventIngest, *, max_age_days: float, per_agent: int,
                 interval_s: float, clock: Clock = SYSTEM_CLOCK, chunk: int = CHUNK) -> None:
        self.ingest = ingest
        self.max_age_days = max_age_days
        self.per_agent = per_agent
        self.interval_s = interval_s
        self.clock = clock
        self.chunk = chunk
        self.total = 0  # rows pruned by this process
        self.runs = 0

    async def prune(self) -> Pruned:
        """One pass, in chunks; storage trouble ends the pass (the next one goes on)."""
        writer = self.ingest.writer
        by_age = by_count = 0
        if self.max_age_days > 0:
            cutoff = self.clock.now() - self.max_age_days * DAY_S
            [first] = await writer.transaction([lambda c: EventRepo.first_kept(c, cutoff)])
            while first is not None:
                n = await self._chunk(lambda c: EventRepo.delete_before(c, first, self.chunk))
                by_age += n
                if n < self.chunk:
                    break
        if self.per_agent > 0:
            keep = self.per_agent
            [over] = await writer.transaction([lambda c: EventRepo.agents_over(c, keep)])
            for agent_id in over:
                while True:
                    n = await self._chunk(functools.partial(
                        EventRepo.delete_beyond, agent_id=agent_id, keep=keep, limit=self.chunk))
                    by_count += n
                    if n < self.chunk:
                        break
        self.total += by_age + by_count
        self.runs += 1
        if by_age or by_count:
            logger.info("events pruned by_age=%d by_count=%d", by_age, by_count)
        return Pruned(by_age, by_count)

    async def _chunk(self, write: Write) -> int:
        [n] = await self.ingest.writer.transaction([write])
        await asyncio.sleep(0)  # the ingest's next batch goes between two chunks
        return int(n)

    async def run(self) -> None:
        while True:
            try:
                await self.prune()
            except StoreError as exc:
                logger.warning("events not pruned: %s", exc)
            await self.clock.sleep(self.interval_s)


def database_bytes(db: Path | AnyDatabase) -> int:
    """The database file and its write-ahead log, bytes (what the disk holds for it); 0 for a
    store on PostgreSQL, whose disk is the server's."""
    if not isinstance(db, Path | Database):
        return 0
    path = db if isinstance(db, Path) else db.path
    total = 0
    for p in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total


def retention_words(settings: Settings) -> str:
    parts = []
    if settings.event_retention_days > 0:
        parts.append(f"{settings.event_retention_days:g} days")
    if settings.event_retention_per_agent > 0:
        parts.append(f"{settings.event_retention_per_agent:,} per agent")
    return "raw events kept " + ", ".join(parts) if parts else "raw events kept for good"
