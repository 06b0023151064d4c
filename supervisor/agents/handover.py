"""The pool's side of agent ownership (supervisor/agents/ownership.py): what happens here when this
worker gains an agent (placed on it by another worker, or taken over from a dead one), loses one
(another worker took it over), is asked by another worker to pause, resume, stop or kill one,
or is cut from the database (it halts every agent it runs).

An agent taken over is resumed as after a restart (supervisor/agents/pool.py `start`): the turn
its dead worker was running is reported as interrupted (never replayed: the operator decides),
the messages that worker held leased go back to the queue by the restart's rules, and the
agent's next turn tells it that it was restarted in a new process and whether its last turn
was cut. Each of those happens once: only the worker whose claim won holds the new epoch."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from store.agents import AgentRow
from store.errors import StoreError
from supervisor.agents.ownership import Hooks, Ownership
from supervisor.agents.recovery import report_interrupted
from supervisor.agents.runner import AgentRunner
from supervisor.agents.transcripts import restart_note
from supervisor.errors import SupervisorError
from supervisor.events import AgentState
from supervisor.process.tree import sweep

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool

logger = logging.getLogger(__name__)

TAKEOVER_REASON = "its worker stopped answering"


class Handover:
    def __init__(self, pool: AgentPool, ownership: Ownership) -> None:
        self.pool = pool
        self.ownership = ownership
        # (agent id -> (name, owner)) of the live agents other workers run, for the bus's
        # names and for commands about them (refreshed at every renewal).
        self.remote: dict[str, tuple[str, str]] = {}
        ownership.hooks = Hooks(self.lost, self.cancel, self.gained, self.cut, self.tick)
        if ownership.shared:  # a bus message for an agent another worker runs wakes it
            pool.bus.owner_of = self._owner_of
            pool.bus.wake_worker = self._wake

    def _owner_of(self, agent_id: str) -> str | None:
        known = self.remote.get(agent_id)
        return None if known is None else known[1]

    async def _wake(self, worker_id: str) -> None:
        try:
            await self.pool.store.leases.wake(worker_id)
        except StoreError as exc:  # a hint: the worker's next renewal finds the message
            logger.debug("bus wake-up not sent worker=%s: %s", worker_id, exc)

    async def tick(self, others: list[tuple[str, str, str]]) -> None:
        """Every renewal: the agents other workers run (for the bus's names), and messages
        other workers stored for this worker's agents, which no wake-up here announced."""
        self.remote = {agent_id: (name, owner) for agent_id, name, owner in others
                       if self.pool.fleet.find(agent_id) is None}
        counts = await self.pool.store.bus.open_counts()
        for runner in self.pool.fleet.live():
            box = self.pool.bus.inbox(runner.id, runner.name)
            if counts.get(runner.id, 0) > box.queued:
                box.arrived(counts[runner.id] - box.queued)
        # What this worker sent them is consumed over there: their inbox cap counts the store.
        for agent_id, (name, _) in self.remote.items():
            self.pool.bus.inbox(agent_id, name).recount(counts.get(agent_id, 0))

    async def place(self, agent_id: str, name: str, worker: str) -> None:
        """A new agent placed on another worker: its lease pending there (that worker is woken
        and claims it at once), and the agent known here now, not at the next renewal."""
        await self.pool.store.leases.place(agent_id, worker)
        self.remote[agent_id] = (name, worker)
        logger.info("agent placed agent=%s name=%s worker=%s", agent_id, name, worker)

    async def elsewhere(self, ref: str, action: str, by: str) -> AgentRunner | None:
        """An agent another worker runs (not one of this worker's): `action` (pause, resume,
        stop, kill) asked of its worker through its lease's cancel column, carried out there
        at its next renewal; a runner of it, with no loop here, to show it. None: not so."""
        ref = ref.strip()
        agent_id = next((i for i, (name, _) in self.remote.items() if ref in (i, name)), None)
        if agent_id is None or self.pool.fleet.find(agent_id) is not None:
            return None
        row = await self.pool.store.agents.get(agent_id)
        if row is None or await self.pool.store.leases.request(agent_id, action, by) is None:
            return None
        return AgentRunner(row, self.pool.require_running())

    async def ask(self, ref: str, text: str) -> AgentRunner | None:
        """A message for an agent another worker runs (an /ask): stored on the bus, where its
        worker finds it at its next renewal. A runner of it, with no loop here; None: not so."""
        agent_id = next((i for i, (name, _) in self.remote.items() if ref.strip() in (i, name)),
                        None)
        row = None if agent_id is None else await self.pool.store.agents.get(agent_id)
        if row is None:
            return None
        runner = AgentRunner(row, self.pool.require_running(), self.pool.bus.inbox(row.id,
                                                                                   row.name))
        await runner.submit(text)
        return runner

    async def lost(self, agent_id: str) -> None:
        """Another worker holds the agent now: its process here ends, the runner goes."""
        runner = self.pool.fleet.find(agent_id)
        if runner is not None:
            await runner.close_for_shutdown()
            self.pool.forget(agent_id)
        self.ownership.forget(agent_id)

    async def cancel(self, agent_id: str, action: str, by: str) -> None:
        """A pause, resume, stop or kill asked on another worker, carried out here."""
        runner = self.pool.fleet.find(agent_id)
        if runner is None:
            return
        logger.warning("carrying out a request from another worker agent=%s action=%s by=%s",
                       agent_id, action, by)
        try:
            if action == "pause":
                await runner.pause()
            elif action == "resume":
                await runner.resume()
            elif action == "stop":
                await runner.stop()
            elif action == "kill":
                await self.pool.kill(agent_id, f"killed by {by}")
        except SupervisorError as exc:  # already paused, not running...: nothing to do
            logger.info("request not carried out agent=%s action=%s: %s", agent_id, action, exc)

    async def gained(self, agent_id: str, taken_over: bool) -> None:
        """An agent this worker claimed: placed on it (its first message is on the bus), or
        taken over from a worker whose lease expired."""
        pool = self.pool
        deps = pool.require_running()
        if (runner := pool.fleet.find(agent_id)) is not None and runner.state.live and \
                pool.running(agent_id):
            return  # already running here
        row = await pool.store.agents.get(agent_id)
        if row is None or row.state == AgentState.KILLED:
            return
        if not row.cwd:  # placed here from another worker: a fresh workspace on this host
            workdir = (pool.settings.workspaces / f"{row.name}-{row.id}").resolve()
            workdir.mkdir(parents=True, exist_ok=True)
            await pool.store.agents.update(row.id, cwd=str(workdir))
            row = await pool.store.agents.get(agent_id)
            assert row is not None
        note = None
        if taken_over:
            note = await self._report_cut(row)
        runner = AgentRunner(row, deps, pool.bus.inbox(row.id, row.name),
                             charter=(await pool.store.charters.all()).get(row.id))
        if note is not None:
            await runner.recover(note)
            await pool.store.agents.update(row.id, launcher_pid=None, cli_pid=None)
        pool.adopt(runner)
        queued = (await pool.store.bus.open_counts()).get(row.id, 0)
        box = pool.bus.inbox(row.id, row.name)
        if queued > box.queued:
            box.arrived(queued - box.queued)
        logger.warning("agent adopted agent=%s name=%s taken_over=%s", row.id, row.name,
                       taken_over)

    async def reclaim(self, agent_ids: list[str]) -> None:
        """At start on a shared database: what a previous run of this worker's agents held
        leased on the bus goes back by the restart's rules (`Bus.start` leaves owned agents'
        leases to their owners: another worker's running turn may hold them)."""
        if self.ownership.shared:
            await asyncio.gather(*(self.pool.bus.reclaim_for(a) for a in agent_ids))

    async def _report_cut(self, row: AgentRow) -> str:
        """The dead worker's running turn reported (never replayed), its leased messages
        back by the restart's rules; the note the agent's next turn carries."""
        pool = self.pool
        await report_interrupted(pool.store, pool.escalations, {row.id: row.name},
                                 TAKEOVER_REASON, agent_ids={row.id})
        await pool.bus.reclaim_for(row.id)
        last = await pool.store.turns.recent(row.id, 1)
        return restart_note(pool.clock.now(), bool(last) and last[0].status == "interrupted")

    async def cut(self) -> None:
        """No renewal for too long: every agent this worker runs ends now (their leases are
        about to expire, and another worker may resume them)."""
        pool = self.pool
        runners = pool.fleet.live()
        for runner in runners:
            runner.halting()
        swept = await asyncio.to_thread(sweep, f"{pool.settings.instance_id}/")
        await asyncio.gather(*(r.close_for_shutdown() for r in runners), return_exceptions=True)
        for runner in runners:
            pool.forget(runner.id)
            self.ownership.forget(runner.id)
        logger.error("cut from the database: %d agent(s) halted, %d process(es) ended",
                     len(runners), len(swept))
        with contextlib.suppress(Exception):  # the database is what is missing: best effort
            async with asyncio.timeout(2.0):
                await pool.escalations.notify(
                    None, "⚠ This worker lost the database and halted its agents",
                    f"{len(runners)} agent(s) halted. Other workers resume them once their "
                    "leases expire; this worker claims agents again when the database answers.")
