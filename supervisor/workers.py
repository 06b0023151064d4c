"""This process as a worker of its database: its row in `workers` (store/workers.py), written at
start and renewed every `HEARTBEAT_S` with its live agents, the memory available to them and
whether it is the coordinator (supervisor/coordinator.py); removed at a clean stop. A worker
that dies keeps its row, whose heartbeat then ages: `switchboard status` shows how long ago.
The same code on SQLite, with its one worker."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass

from store import Store
from store.errors import StoreError
from supervisor.agents.fleet import FleetReader
from supervisor.coordinator import Coordinator
from supervisor.guard.guardrails import MemoryProbe

logger = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
LATE_AFTER_S = 3 * HEARTBEAT_S  # three heartbeats missed: the worker died, hangs or is cut off


@dataclass(frozen=True, slots=True)
class WorkerView:
    host: str
    pid: int
    agents: int
    memory_available: int | None  # bytes
    coordinator: bool
    heartbeat_age_s: float
    this: bool  # the worker answering

    @property
    def late(self) -> bool:
        """Another worker whose heartbeat is three beats overdue (this one is never late)."""
        return not self.this and self.heartbeat_age_s > LATE_AFTER_S


class Worker:
    def __init__(self, store: Store, fleet: FleetReader, memory: MemoryProbe,
                 coordinator: Coordinator, *, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.store = store
        self.fleet = fleet
        self.memory = memory
        self.coordinator = coordinator
        self.heartbeat_s = heartbeat_s
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        coordinator.on_change.append(self._role_changed)

    async def beat(self) -> None:
        """Run once: write this worker's row (the first beat registers it)."""
        reading = self.memory.read()
        await self.store.workers.beat(
            self.id, host=self.host, pid=self.pid, agents=len(self.fleet.live()),
            memory_available=max(0, reading.limit_bytes - reading.used_bytes),
            coordinator=self.coordinator.held)

    async def _role_changed(self, held: bool) -> None:
        if held:  # first the dead holder's row cleared: never two rows saying coordinator
            await self.store.workers.only_coordinator(self.id)
        await self.beat()  # the row says it at once, not at the next heartbeat

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.beat()
            except StoreError as exc:
                logger.warning("worker heartbeat failed worker=%s: %s", self.id, exc)

    async def close(self) -> None:
        try:
            await self.store.workers.remove(self.id)
        except StoreError as exc:
            logger.warning("could not remove the worker's row worker=%s: %s", self.id, exc)

    async def list(self) -> tuple[WorkerView, ...]:
        """Every worker's row; this one's agents as they are now, not at its last beat."""
        return tuple(WorkerView(w.host, w.pid, len(self.fleet.live()) if w.id == self.id
                                else w.agents, w.memory_available, bool(w.coordinator),
                                max(0.0, w.age_s), w.id == self.id)
                     for w in await self.store.workers.list())
