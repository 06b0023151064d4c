"""Where a new agent runs: the placement contract and the one placer built, the local one.

`place(spec, idempotency_key) -> worker id`: a placer picks the worker that will run the agent
(the agent's id is the idempotency key: asked again for an agent already placed, it answers
the same worker). The worker that was asked writes the agent's row, its first message (on the
bus) and a pending lease for the chosen worker; that worker claims it at its next renewal
(`FOR UPDATE SKIP LOCKED`, supervisor/agents/ownership.py) and starts it. Other placers (over
SSH, a Kubernetes Job that starts a worker) can be added behind the same contract.

`LocalPlacer` chooses among the workers already running on the database: those whose heartbeat
is fresh, with memory to admit one more agent (as each reports in its heartbeat), the one with
the fewest live agents (the lease table's count, fresher than a heartbeat), this worker on a
tie. `--host` pins it to the workers of that host name (or a worker id)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from store import Store
from supervisor.errors import InvalidRequest
from supervisor.guard.guardrails import LimitExceeded

# A worker whose last heartbeat is older than this is not placed on (it may be dead).
FRESH_S = 15.0
# The memory one more agent needs on a worker: a `claude` process is 110-200 MB.
AGENT_BYTES = 256 * 2**20


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    name: str
    host: str | None = None  # pinned: a host name or a worker id


class Placer(Protocol):
    async def place(self, spec: SpawnSpec, idempotency_key: str) -> str:
        """The id of the worker that runs the agent; InvalidRequest or LimitExceeded."""


class LocalPlacer:
    def __init__(self, store: Store, worker_id: str) -> None:
        self.store = store
        self.worker_id = worker_id

    async def place(self, spec: SpawnSpec, idempotency_key: str) -> str:
        lease = await self.store.leases.get(idempotency_key)
        if lease is not None and (lease.owner or lease.placed_on):
            return str(lease.owner or lease.placed_on)  # placed before: the same answer
        workers = [w for w in await self.store.workers.list()
                   if w.age_s < FRESH_S or w.id == self.worker_id]
        if not workers and not spec.host:
            return self.worker_id  # no heartbeat written yet: this one
        if spec.host:
            pinned = [w for w in workers if spec.host in (w.host, w.id)]
            if not pinned:
                hosts = ", ".join(sorted({w.host for w in workers})) or "none"
                raise InvalidRequest(f"no running worker on host {spec.host!r}; the hosts "
                                     f"running now: {hosts}")
            workers = pinned
        roomy = [w for w in workers if w.memory_available is None
                 or w.memory_available >= AGENT_BYTES]
        if not roomy:
            if any(w.id == self.worker_id for w in workers):
                return self.worker_id  # its own admission refuses, with its figures
            raise LimitExceeded(
                f"no worker{' on ' + spec.host if spec.host else ''} has memory for another "
                f"agent ({AGENT_BYTES // 2**20} MB each)",
                "Stop or kill idle agents, or add a worker, then try again.")
        counts = await self.store.leases.live_per_worker()
        best = min(roomy, key=lambda w: (counts.get(w.id, 0), w.id != self.worker_id,
                                         -(w.memory_available or 0), w.id))
        return best.id
