"""Storage trouble: noticed, reported, and new work refused rather than acknowledged and lost.

The guard watches the state database two ways: every write that fails for the database's sake
(disk full, read-only, I/O error) is reported to it the moment it happens (the store's write
listeners), and a run-once `check` (a small loop calls it every few seconds) compares the file
at the database's path with the one opened: deleted or replaced, SQLite would go on writing to
the open file, and a restart would start from nothing, every agent gone.

On trouble the operator gets a notice on every front end (written to the outbox if it still
takes writes, else held in memory and delivered from there) saying what happened and what to do;
spawns and messages are refused with the same words (`StorageTrouble`). A write problem clears
itself once a probe write succeeds again (with a notice); a deleted or replaced file does not:
a consistent copy of the open database is saved beside it at once and again at shutdown, and
the notice says how to put it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from store import Store
from store.db import Database, rescued_path
from store.errors import StoreError
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.errors import StorageTrouble
from supervisor.guard.escalations import Escalations

logger = logging.getLogger(__name__)

CHECK_EVERY_S = 2.0
PROBE_KEY = "storage:probe"


class Trouble(StrEnum):
    FULL = "full"
    READ_ONLY = "read-only"
    IO = "io"
    DELETED = "deleted"
    REPLACED = "replaced"


WRITE_TROUBLES = (Trouble.FULL, Trouble.READ_ONLY, Trouble.IO)


def classify(reason: str) -> Trouble | None:
    """The kind of storage trouble a failed write's reason names; None if it names none
    (a bug or a broken rule is not the disk's fault)."""
    r = reason.lower()
    if "full" in r:
        return Trouble.FULL
    if "readonly" in r or "read-only" in r:
        return Trouble.READ_ONLY
    if "disk i/o" in r or "unable to open" in r:
        return Trouble.IO
    return None


@dataclass(frozen=True, slots=True)
class Problem:
    kind: Trouble
    what: str  # what happened, one sentence
    fix: str  # what the operator should do
    since: float


class StorageGuard:
    def __init__(self, store: Store, escalations: Escalations, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.escalations = escalations
        self.clock = clock
        self.problem: Problem | None = None
        self.rescued: Path | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        store.db.write_error_listeners.append(self._write_failed)

    @property
    def path(self) -> Path:
        """The SQLite file watched. A store on PostgreSQL has no file here (its
        `file_problem` is always None): only its failed writes are noticed, named by URL."""
        db = self.store.db
        return db.path if isinstance(db, Database) else Path(db.name)

    # -- what the pool asks -----------------------------------------------------------------

    def refuse_new_work(self) -> None:
        if self.problem is not None:
            raise StorageTrouble(self.problem.what, self.problem.fix)

    async def ensure_writable(self) -> None:
        """Before acknowledging work: one small real write, so that a full or read-only disk
        is found now rather than after saying "sent"; refused on trouble. Known write trouble
        is checked again first (it may have cleared); a lost file stays until a restart."""
        if self.problem is not None:
            await self.check()
            self.refuse_new_work()
            return
        try:
            await self.store.kv.set(PROBE_KEY, self.clock.now())
        except StoreError:
            pass  # the write listener has recorded the problem, if it is one
        await self.settled()
        self.refuse_new_work()

    async def settled(self) -> None:
        """Wait for the notices of trouble just noticed: told before anyone is answered."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- noticing ---------------------------------------------------------------------------

    def _write_failed(self, reason: str) -> None:
        file = self.store.db.file_problem()  # a failing write is a moment to look at the file
        if file is not None and (self.problem is None or self.problem.kind in WRITE_TROUBLES):
            self._background(self._lost_file(Trouble(file)))
            return
        kind = classify(reason)
        if kind is None or (self.problem is not None and self.problem.kind == kind):
            return
        if self.problem is not None and self.problem.kind not in WRITE_TROUBLES:
            return  # a deleted or replaced file stays the headline
        self._set(kind, reason)

    async def check(self) -> None:
        """Run once: is the file still the one opened; does a known write problem persist?"""
        file = self.store.db.file_problem()
        if file is not None and (self.problem is None or self.problem.kind in WRITE_TROUBLES):
            await self._lost_file(Trouble(file))
            return
        if self.problem is not None and self.problem.kind in WRITE_TROUBLES:
            try:
                await self.store.kv.set(PROBE_KEY, self.clock.now())
            except StoreError:
                return
            was, self.problem = self.problem, None
            logger.warning("storage works again after %s path=%s", was.kind, self.path)
            await self._notify("✅ Storage works again",
                               f"Writes to {self.path} succeed again (after: {was.what}). "
                               "Spawns and messages are accepted again.")

    def _set(self, kind: Trouble, reason: str) -> None:
        what, fix = self._words(kind, reason)
        self.problem = Problem(kind, what, fix, self.clock.now())
        logger.error("storage trouble kind=%s path=%s reason=%s", kind, self.path, reason)
        self._background(self._notify(f"⚠ Storage trouble: {what}", f"{fix}"))

    async def _lost_file(self, kind: Trouble) -> None:
        self.problem = Problem(kind, *self._words(kind, ""), self.clock.now())
        logger.error("storage trouble kind=%s path=%s", kind, self.path)
        rescued = await self.save_copy()
        self.problem = Problem(kind, *self._words(kind, "", rescued), self.problem.since)
        await self._notify(f"⚠ Storage trouble: {self.problem.what}", self.problem.fix)

    async def save_copy(self) -> Path | None:
        """A consistent copy of the open database beside its path (after a delete or
        replace); None if even that failed."""
        db = self.store.db
        if not isinstance(db, Database):
            return None  # no file to lose (see `path`)
        target = rescued_path(self.path)
        try:
            await db.rescue(target)
        except StoreError:
            logger.exception("could not save a copy of the database path=%s", target)
            return None
        self.rescued = target
        return target

    def _words(self, kind: Trouble, reason: str, rescued: Path | None = None) -> tuple[str, str]:
        p, d = self.path, self.path.parent
        refused = "Until then new agents and messages are refused."
        if kind == Trouble.FULL:
            return (f"the disk holding the database is full ({reason}).",
                    f"Free space on the file system of {d} (`df -h {d}`). Switchboard retries "
                    f"every few seconds and says when writes work again. {refused}")
        if kind == Trouble.READ_ONLY:
            return (f"the database cannot be written: it is read-only ({reason}).",
                    f"Make {p} and its directory {d} writable for the user Switchboard runs "
                    f"as (and the file system mounted read-write). {refused}")
        if kind == Trouble.IO:
            return (f"the database failed with an I/O error ({reason}).",
                    f"Check the disk holding {d} (`dmesg`, `switchboard doctor`). {refused}")
        copy = (f"A copy of everything it holds was saved as {rescued} (and is saved again at "
                "shutdown)." if rescued else "Saving a copy of it failed too; see the log.")
        what = ("the database file was deleted while Switchboard ran"
                if kind == Trouble.DELETED else
                "the database file was replaced by another file while Switchboard ran")
        return (f"{what} ({p}). Switchboard still has the old one open, but a restart would "
                "start from the file now at that path: every agent would be gone.",
                f"{copy} New agents and messages are refused. To recover: /quit, move "
                f"{rescued or 'the copy'} to {p}" +
                (" (keep the other file elsewhere if you need it)" if kind == Trouble.REPLACED
                 else "") + ", then start Switchboard again.")

    async def _notify(self, title: str, body: str) -> None:
        with contextlib.suppress(Exception):  # notify falls back to memory by itself
            await self.escalations.notify(None, title, body)

    def _background(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(coro, name="storage-notice")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, interval_s: float = CHECK_EVERY_S) -> None:
        while True:
            await self.clock.sleep(interval_s)
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - the guard keeps guarding
                logger.exception("storage check failed")

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self.run(), name="storage-guard")

    async def close(self) -> None:
        """Stop the loop; after a delete or replace, save the copy once more (it now holds
        what the shutdown wrote)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.problem is not None and self.problem.kind not in WRITE_TROUBLES:
            started = time.monotonic()
            await self.save_copy()
            logger.warning("database copy saved at shutdown path=%s took_ms=%.0f",
                           self.rescued, (time.monotonic() - started) * 1000)
