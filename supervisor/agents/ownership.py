"""Which agents this worker owns: their leases (store/leases.py), renewed on the database's clock.

A worker runs only the agents whose lease it holds, and its writes about them are fenced by the
lease's epoch (`fence`). Every `renew_s` the loop (`step`, the run-once form) renews them all in
one statement and reads back what it still holds: an agent no longer held was taken over (its
process here ends: `on_lost`); a cancel request written by another worker (pause, resume, stop,
kill) is carried out here (`on_cancel`); agents placed on this worker and not yet claimed, and
live agents whose owner stopped renewing (a dead or cut worker), are claimed (`on_gained`).

On PostgreSQL a worker also listens for wake-ups (store/leases.py `wakeups`): an agent placed on
it, or a cancel request for one of its agents, is notified as it commits, and the worker claims
or carries it out at once (`wake`) instead of at its next renewal. Only a hint: a wake-up lost
(the listening connection down) costs at most one renewal's wait, and each time the worker
starts listening it reads the lease table once, for what was written while nobody listened.

A worker that cannot renew for `halt_after_s` halts its own agents (`on_cut`): it can no longer
see the shared halt flag, so it assumes it is on, and its leases will expire (after `ttl_s`,
more than `halt_after_s`) and be taken over elsewhere; its processes are gone by then.

On SQLite there is one process per database (its file lock): it owns every agent, takes every
lease at start whatever held it, and its leases do not expire in practice (`FOREVER_S`); a
write failure there never halts agents (the storage guard reports it, as before)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from store import Store
from store.errors import StoreError
from store.leases import LeaseRow

logger = logging.getLogger(__name__)

TTL_S = 10.0  # a lease lasts this long after its last renewal (database clock)
RENEW_S = 2.0  # renewed this often
RENEW_TIMEOUT_S = 2.0  # a renewal that takes longer counts as failed
# A worker that has not renewed for this long halts its agents: before its leases can expire
# (TTL_S) and another worker resumes them, with the time a kill takes to spare.
HALT_AFTER_S = 6.0
# Bounds the docs state (docs/postgresql.md): a cut worker's agents end within HALT_BOUND_S of
# its last renewal; a dead worker's agents run again elsewhere within FAILOVER_BOUND_S of its
# last renewal (its leases expire, the next scan claims them, the resume is a process start).
HALT_BOUND_S = HALT_AFTER_S + RENEW_S + 2.0
FAILOVER_BOUND_S = TTL_S + RENEW_S + 3.0
FOREVER_S = 10 * 365 * 86400.0  # SQLite: the one process's leases
WATCH_S = 0.5  # how often the time since the last renewal is checked
RELISTEN_S = 2.0  # a listening connection that failed is opened again after this long


@dataclass
class Hooks:
    """What the pool does when ownership changes (supervisor/agents/handover.py)."""

    on_lost: Callable[[str], Awaitable[None]]
    on_cancel: Callable[[str, str, str], Awaitable[None]]  # agent id, action, by
    on_gained: Callable[[str, bool], Awaitable[None]]  # agent id, taken over from another
    on_cut: Callable[[], Awaitable[None]]
    # Each renewal on a shared database: (id, name, owner) of the agents other workers own.
    on_tick: Callable[[list[tuple[str, str, str]]], Awaitable[None]] | None = None


class Ownership:
    def __init__(self, store: Store, worker_id: str, *, ttl_s: float = TTL_S,
                 renew_s: float = RENEW_S, halt_after_s: float = HALT_AFTER_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.worker_id = worker_id
        self.shared = store.db.dialect != "sqlite"  # several workers may share the database
        self.ttl_s = ttl_s if self.shared else FOREVER_S
        self.renew_s = renew_s
        self.halt_after_s = halt_after_s
        self.monotonic = monotonic
        self.held: dict[str, int] = {}  # agent id -> epoch
        self.hooks: Hooks | None = None
        self.cut = False  # halted for want of the database, until a renewal succeeds
        self._last_ok = monotonic()  # when the last successful renewal was sent
        self._acting: set[tuple[str, str]] = set()  # cancel requests being carried out
        self._woken = asyncio.Event()  # a wake-up arrived: look at the lease table now
        self._reading = asyncio.Lock()  # a renewal's reading and a wake-up's, one at a time

    def fence(self, agent_id: str) -> tuple[str, int]:
        """The (owner, epoch) a write about the agent is fenced by; epoch 0 (not held) never
        matches a claimed lease."""
        return self.worker_id, self.held.get(agent_id, 0)

    def holds(self, agent_id: str) -> bool:
        return agent_id in self.held and not self.cut

    async def take(self, agent_ids: list[str]) -> set[str]:
        """At start: the leases of these live agents this worker may take (no row yet, pending
        for it, expired; on SQLite all). Returns the ids taken."""
        taken: set[str] = set()
        for agent_id in agent_ids:
            epoch = await self.store.leases.claim(agent_id, self.worker_id, self.ttl_s,
                                                  force=not self.shared)
            if epoch is not None:
                self.held[agent_id] = epoch
                taken.add(agent_id)
        self._last_ok = self.monotonic()
        return taken

    async def claim_new(self, agent_id: str) -> None:
        """A new agent this worker runs (spawned and placed here)."""
        epoch = await self.store.leases.claim(agent_id, self.worker_id, self.ttl_s)
        if epoch is None:
            raise StoreError(f"agent {agent_id}'s lease is held by another worker")
        self.held[agent_id] = epoch

    def forget(self, agent_id: str) -> None:
        self.held.pop(agent_id, None)

    async def step(self) -> None:
        """Run once: renew; what was lost, what is asked, what is this worker's to claim."""
        hooks = self.hooks
        assert hooks is not None, "hooks first"
        async with self._reading:
            before = dict(self.held)  # a claim during the renewal is not a loss
            rows = await self._renew()
            if rows is not None:
                await self._after_renewal(hooks, before, rows)

    async def _renew(self) -> list[LeaseRow] | None:
        """Every lease held, renewed: what the cut watch counts. None: it failed (logged)."""
        sent = self.monotonic()
        try:
            async with asyncio.timeout(RENEW_TIMEOUT_S if self.shared else None):
                rows = await self.store.leases.renew(self.worker_id, self.ttl_s)
        except (StoreError, TimeoutError) as exc:
            logger.warning("lease renewal failed worker=%s silent_s=%.1f: %s", self.worker_id,
                           self.monotonic() - self._last_ok, exc or "timed out")
            return None
        self._last_ok = sent
        if self.cut:
            self.cut = False
            logger.warning("the database answers again: this worker claims agents again")
        return rows

    async def _after_renewal(self, hooks: Hooks, before: dict[str, int],
                             rows: list[LeaseRow]) -> None:
        now_held = {r.agent_id: r.epoch for r in rows}
        for agent_id, epoch in before.items():
            if now_held.get(agent_id) != epoch and self.held.get(agent_id) == epoch:
                logger.warning("lease lost agent=%s epoch=%d: another worker took it over",
                               agent_id, epoch)
                self.held.pop(agent_id, None)
                await hooks.on_lost(agent_id)
        for r in rows:
            if r.agent_id in self.held and r.cancel and (r.agent_id, r.cancel) not in \
                    self._acting:
                await self._carry_out(r.agent_id, r.cancel, r.cancel_by or "another worker")
        await self._claim(hooks)

    async def _carry_out(self, agent_id: str, action: str, by: str) -> None:
        assert self.hooks is not None
        self._acting.add((agent_id, action))
        try:
            await self.hooks.on_cancel(agent_id, action, by)
            await self.store.leases.clear(agent_id, action, self.fence(agent_id))
        except Exception:  # noqa: BLE001 - one agent's failure must not stop the loop
            logger.exception("cancel request failed agent=%s action=%s", agent_id, action)
        finally:
            self._acting.discard((agent_id, action))

    async def _claim(self, hooks: Hooks) -> None:
        gained = [(a, e, False) for a, e in
                  await self.store.leases.claim_pending(self.worker_id, self.ttl_s)]
        if self.shared:
            gained += [(a, e, True) for a, e in
                       await self.store.leases.claim_expired(self.worker_id, self.ttl_s)]
            if hooks.on_tick is not None:
                await hooks.on_tick(await self.store.leases.others(self.worker_id))
        for agent_id, epoch, taken_over in gained:
            self.held[agent_id] = epoch
            logger.warning("lease claimed agent=%s epoch=%d taken_over=%s", agent_id, epoch,
                           taken_over)
            try:
                await hooks.on_gained(agent_id, taken_over)
            except Exception:  # noqa: BLE001 - the others are still adopted
                logger.exception("could not adopt agent=%s", agent_id)

    async def check_cut(self) -> bool:
        """Run once: halt this worker's agents if no renewal succeeded for `halt_after_s`
        (checked apart from the renewals, which may hang on a database that went away)."""
        silent_s = self.monotonic() - self._last_ok
        if not self.shared or self.cut or silent_s < self.halt_after_s:
            return False
        assert self.hooks is not None
        self.cut = True
        logger.error("no lease renewal for %.1f s: this worker halts its agents (it cannot "
                     "see the halt flag, and its leases are about to expire)", silent_s)
        await self.hooks.on_cut()
        self.held.clear()  # they expire; whoever claims them next resumes them
        return True

    async def wake(self) -> None:
        """Run once, on a wake-up: a `step` (renew, then what was lost, asked or placed here),
        outside the renewals' rhythm; none while cut (claims wait for a renewal to succeed)."""
        if not self.cut:
            await self.step()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._renewing(), name="lease-renewal")
            group.create_task(self._watching(), name="lease-watch")
            if self.shared:
                group.create_task(self._listening(), name="lease-wakeups")
                group.create_task(self._waking(), name="lease-wake")

    async def _renewing(self) -> None:
        while True:
            await asyncio.sleep(self.renew_s)
            if self.shared:
                # The leases renewed on time whatever a pass is doing (adopting many agents
                # takes a while on a busy host: the renewals must not wait for it, or the
                # worker would think itself cut); the pass that reads them follows.
                if await self._renew() is not None:
                    self._woken.set()
                continue
            try:
                await self.step()
            except StoreError as exc:
                logger.warning("ownership step failed worker=%s: %s", self.worker_id, exc)

    async def _watching(self) -> None:
        while self.shared:
            await asyncio.sleep(WATCH_S)
            try:
                await self.check_cut()
            except Exception:  # noqa: BLE001 - the watch outlives a failed halt; it logs
                logger.exception("halting this worker's agents failed")

    async def _listening(self) -> None:
        """Wake-ups for this worker (or for any), until cancelled; listens again after a
        failure, and reads the lease table each time it starts listening."""
        failing = False
        while True:
            try:
                async with self.store.leases.wakeups() as heard:
                    self._woken.set()  # what was written while nobody listened
                    failing = False
                    async for worker_id in heard:
                        if worker_id in (self.worker_id, ""):
                            self._woken.set()
            except StoreError as exc:  # said once a streak: the renewals' warnings go on
                logger.log(logging.DEBUG if failing else logging.WARNING,
                           "wake-ups not heard worker=%s: %s", self.worker_id, exc)
                failing = True
            await asyncio.sleep(RELISTEN_S)

    async def _waking(self) -> None:
        while True:
            await self._woken.wait()
            self._woken.clear()  # those arriving meanwhile are served by this pass or the next
            try:
                await self.wake()
            except (StoreError, TimeoutError) as exc:
                logger.warning("wake-up not served worker=%s: %s", self.worker_id, exc)

    async def release(self) -> None:
        """A clean stop: the leases end now, so other workers resume the agents at once."""
        try:
            await self.store.leases.release_all(self.worker_id)
        except StoreError as exc:
            logger.warning("leases not released worker=%s: %s", self.worker_id, exc)
        self.held.clear()
