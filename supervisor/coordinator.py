"""The coordinator role: which one of the workers on a database runs what must be single (the
chat connections, the scheduler's firing). On PostgreSQL it is a session-level advisory lock
(`pg_try_advisory_lock`) held on a connection of its own: when the holder dies, even by SIGKILL,
its connection closes and the server frees the lock, and the next worker to try takes it. On
SQLite there is one process per data directory (the file lock): it is always the coordinator.

`try_once` is the run-once step (tests call it); `run` calls it every `try_every_s`. A worker
that does not hold the lock tries to take it; one that holds it checks its connection, and a
connection that fails or does not answer within `CHECK_TIMEOUT_S` loses the role (its parts stop;
the server frees the lock when it notices the connection is gone). `gated` makes a service
whose part runs only while the role is held: started when it is taken, stopped when it is
lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from supervisor.service import FnService, Service, TaskGroup

logger = logging.getLogger(__name__)

COORDINATOR_LOCK = 0x5B_0003  # beside store/pg.py's write and migrate locks
TRY_EVERY_S = 1.0
# How long the holder's check of its connection may take before it gives the role up: longer
# than a try, so a loaded machine's slow answer does not make the role flap.
CHECK_TIMEOUT_S = 5.0
# A dead coordinator's role is taken within this (docs/postgresql.md): the server frees the
# lock as soon as the dead process's connection closes, and each worker tries every
# TRY_EVERY_S; the rest is a connection made and a heartbeat written.
TAKEOVER_BOUND_S = 5.0


class Coordinator:
    def __init__(self, database_url: str | None, *, try_every_s: float = TRY_EVERY_S) -> None:
        self.url = database_url
        self.try_every_s = try_every_s
        self._conn: Any = None  # the lock's connection (psycopg.AsyncConnection)
        self._held = asyncio.Event()
        self._lost = asyncio.Event()
        self._lost.set()
        self.on_change: list[Callable[[bool], Awaitable[None]]] = []

    @property
    def held(self) -> bool:
        return self._held.is_set()

    async def _set(self, held: bool, *, stopping: bool = False) -> None:
        if held == self.held:
            return
        (self._held if held else self._lost).set()
        (self._lost if held else self._held).clear()
        if held:
            # On SQLite the one process always holds it: worth a line, not a warning.
            (logger.info if self.url is None else logger.warning)(
                "coordinator role taken: this worker runs the chat front ends and the scheduler")
        elif stopping:
            logger.info("coordinator role given up: this worker stops")
        else:
            logger.error("coordinator role lost: the chat front ends and the scheduler stop "
                         "here")
        for hook in self.on_change:
            try:
                await hook(held)
            except Exception:  # noqa: BLE001 - a hook never keeps the role from changing
                logger.exception("coordinator: a role-change hook failed")

    async def try_once(self) -> bool:
        """Take the role if free, or check that it is still held; whether it is held."""
        if self.url is None:  # SQLite: the one process
            await self._set(True)
            return True
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                held = await self._step()
        except Exception as exc:  # noqa: BLE001 - any failure: the role is not held
            if self.held:
                logger.error("coordinator: the lock's connection failed: %s", exc)
            await self._drop()
            held = False
        await self._set(held)
        return held

    async def _step(self) -> bool:
        import psycopg  # the `postgresql` extra: only a store on PostgreSQL gets here

        if self._conn is None:
            assert self.url is not None
            self._conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, application_name="switchboard-coordinator",
                connect_timeout=max(2, int(self.try_every_s)))
        if self.held:
            await self._conn.execute("SELECT 1")
            return True
        row = await (await self._conn.execute("SELECT pg_try_advisory_lock(%s)",
                                              (COORDINATOR_LOCK,))).fetchone()
        return bool(row and row[0])

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2.0)

    async def run(self) -> None:
        while True:
            await self.try_once()
            await asyncio.sleep(self.try_every_s)

    async def close(self) -> None:
        """Give the role up (closing the connection frees the lock at once)."""
        await self._drop()
        await self._set(False, stopping=True)

    def gated(self, name: str, start: Callable[[], Awaitable[None]],
              stop: Callable[[], Awaitable[None]]) -> Service:
        """A service whose part runs only while the role is held: started with the service
        if the role is held by then (always on SQLite), else when it is taken; stopped when
        it is lost, and started again when it is taken again."""
        running = False
        watch: list[asyncio.Task[Any]] = []

        async def up() -> None:
            nonlocal running
            if not running:
                logger.info("coordinator: starting %s", name)
                await start()
                running = True

        async def down() -> None:
            nonlocal running
            if running:
                running = False
                logger.info("coordinator: stopping %s", name)
                await stop()

        async def follow() -> None:
            while True:
                await self._held.wait()
                await up()
                await self._lost.wait()
                await down()

        async def start_service(group: TaskGroup) -> None:
            if self.held:
                await up()
            watch.append(group.spawn(f"{name} (coordinator)", follow()))

        async def stop_service() -> None:
            for task in watch:
                task.cancel()
            await asyncio.gather(*watch, return_exceptions=True)
            await down()

        return FnService(name, start_service, stop_service)

    def gated_loop(self, name: str, run: Callable[[], Coroutine[Any, Any, object]]) -> Service:
        """`gated` for a part that is one long-running coroutine (a chat front end)."""
        task: list[asyncio.Task[Any]] = []

        async def start() -> None:
            t = asyncio.create_task(run(), name=name)  # owned here, ended in stop
            t.add_done_callback(_log_failure)
            task.append(t)

        async def stop() -> None:
            for t in task:
                t.cancel()
            await asyncio.gather(*task, return_exceptions=True)
            task.clear()

        return self.gated(name, start, stop)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("task died name=%s", task.get_name(), exc_info=task.exception())
