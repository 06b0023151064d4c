"""All agents: spawn, look up, act on subtrees, recover after a restart, shut down in two phases."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from store import Store
from store.agents import LIVE_STATES, AgentRow
from store.errors import Conflict, StoreError
from supervisor.agents.admission import admit
from supervisor.agents.fleet import Fleet
from supervisor.agents.handover import Handover
from supervisor.agents.ingest import EventIngest
from supervisor.agents.ownership import Ownership
from supervisor.agents.placement import Placer, SpawnSpec
from supervisor.agents.recovery import report_interrupted
from supervisor.agents.runner import AgentRunner, RunnerDeps
from supervisor.agents.shutdown import end_all
from supervisor.agents.transcripts import restart_note
from supervisor.bus.core import Bus
from supervisor.bus.inbox import Origin
from supervisor.bus.tools import FleetHooks, bus_tools
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import PERMISSION_MODES, Settings
from supervisor.errors import AgentExists, AgentFailed, InvalidRequest, ShuttingDown
from supervisor.events import AgentState, EventHub, StateChanged
from supervisor.guard.escalations import Escalations
from supervisor.guard.gateway import ModelGateway
from supervisor.guard.guardrails import CrashTracker, LimitExceeded, MemoryProbe, RateLimiter
from supervisor.guard.killswitch import KillSwitch
from supervisor.guard.policy import Policy
from supervisor.guard.storage import StorageGuard
from supervisor.guard.watchdog import Watchdog
from supervisor.names import check_names, new_agent_id
from supervisor.process.agent import install_launcher, resolve_cli
from supervisor.process.cpugroup import Arrangement, arrange
from supervisor.process.network import netns_problem
from supervisor.process.sandbox import Isolation, describe, hide_in, probe
from supervisor.process.tree import sweep
from supervisor.process.workdir import examine
from supervisor.repos import Repos
from supervisor.repos.memory import AgentMemory, ProjectMemory
from supervisor.repos.tools import repo_tools

if TYPE_CHECKING:
    from supervisor.persistence.bucket import Persistence

logger = logging.getLogger(__name__)

# Permission modes in which the CLI may run a call without asking can_use_tool first.
UNASKED_MODES = ("bypassPermissions", "auto")


class PoolState(StrEnum):
    NEW = "new"
    RUNNING = "running"
    DRAINING = "draining"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    swept_pids: tuple[int, ...]
    resumed: tuple[str, ...]
    interrupted_turns: int


@dataclass(frozen=True, slots=True)
class PoolParts:
    """What the pool works with, built by the core (supervisor/core.py): the pool builds none
    of them, and none of them gets the pool back."""

    fleet: Fleet
    policy: Policy
    escalations: Escalations
    killswitch: KillSwitch
    crashes: CrashTracker
    rates: RateLimiter
    memory: MemoryProbe
    watchdog: Watchdog
    bus: Bus
    ingest: EventIngest
    repos: Repos
    storage: StorageGuard
    gateway: ModelGateway | None = None
    ownership: Ownership | None = None  # the agents' leases (None: this worker owns all)
    placer: Placer | None = None  # which worker a new agent runs on (None: this one)


class AgentPool:
    """Admission, spawn, ask and kill over the fleet, and the agents' side of a start and a
    shutdown: `prepare` (the host probed, leftovers swept, interrupted turns reported) and
    `release` around the bus, `start` (the runners back, their loops going) and `close`."""

    def __init__(self, settings: Settings, store: Store, hub: EventHub, parts: PoolParts,
                 clock: Clock = SYSTEM_CLOCK, persistence: Persistence | None = None) -> None:
        self.clock = clock
        self.settings = settings
        self.store = store
        self.hub = hub
        self.state = PoolState.NEW
        self.fleet = parts.fleet  # the pool alone adds to it
        self.policy = parts.policy
        self.escalations = parts.escalations
        self.killswitch = parts.killswitch
        self.crashes = parts.crashes
        self.rates = parts.rates
        self.memory = parts.memory
        self.watchdog = parts.watchdog
        self.bus = parts.bus
        self.ingest = parts.ingest
        self.repos = parts.repos
        self.storage = parts.storage
        self.gateway = parts.gateway
        self.ownership = parts.ownership
        self.placer = parts.placer
        self.handover = Handover(self, parts.ownership) if parts.ownership else None
        # The bucket's side (leases), when a bucket is configured.
        self.persistence = persistence
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._deps: RunnerDeps | None = None
        self.recovery: RecoveryReport | None = None
        self.session_store: Any = None  # transcripts in the bucket (store/gcs_sessions.py)
        self._store_problem: str | None = None
        self.roles: dict[str, tuple[str, ...]] = {}  # agent id -> its roles (from /team)
        self.isolation: Isolation | None = None
        self.cpu: Arrangement | None = None  # what holds the agents' CPU below ours
        # More in-process MCP tools per agent (the scheduler's schedule_wakeup), besides the bus's.
        self.tool_makers: dict[str, Callable[[AgentRunner], list[Any]]] = {}
        # Each project's memory (supervisor/repos/memory.py): a slice to every agent started
        # on it, a line from each finished turn.
        self.project_memory = AgentMemory(
            ProjectMemory(self.settings.memory_dir, self.settings.memory_managed_bytes,
                          self.settings.memory_slice_bytes),
            self.repos.repo_of, self.settings.workspaces)
        self._rows: list[AgentRow] = []
        self._swept: list[int] = []
        self._interrupted = 0
        self._owned: set[str] = set()  # the agents this worker runs (and killed ones)

    async def prepare(self) -> None:
        """Before the bus starts: the host's sandbox probed, what a previous supervisor left
        running swept, the live agents' leases taken, its interrupted turns reported (the
        bus then drops the operator's messages they held, and delivers agents' again)."""
        real_cli = resolve_cli(self.settings)
        self.isolation = iso = await asyncio.to_thread(probe, self.settings, real_cli)
        if iso.ok and self.settings.egress != "open":  # asked at every start: known from here
            await asyncio.to_thread(netns_problem, iso)
        if self.settings.gcs_bucket:
            await self._connect_session_store()
        if iso.ok:
            logger.info("isolation: %s", iso.detail)
        else:
            logger.warning("isolation: %s",
                           describe(iso, self.settings.allow_unisolated_agents))
        self._deps = RunnerDeps(
            settings=self.settings, store=self.store, hub=self.hub,
            launcher=install_launcher(self.settings.run_dir), real_cli=real_cli,
            policy=self.policy, escalations=self.escalations, killswitch=self.killswitch,
            crashes=self.crashes, over_budget=self.watchdog.over_budget, isolation=iso,
            peer_dirs=self._peer_dirs, clock=self.clock,
            agent_tools=lambda runner: [
                *bus_tools(self.bus, runner, FleetHooks(self._roster, self._wait_idle,
                                                        self._spawn_child)),
                *repo_tools(self.repos, runner.id),
                *(t for make in self.tool_makers.values() for t in make(runner))],
            repo_wall=self.repos.wall, session_store=self.session_store,
            before_start=self._before_start, session_known=self._session_known,
            ingest=self.ingest, memory=self.project_memory, gateway=self.gateway,
            fence=self.ownership.fence if self.ownership else (lambda _agent_id: None),
        )
        self.settings.workspaces.mkdir(parents=True, exist_ok=True)
        self.settings.context_dir.mkdir(parents=True, exist_ok=True)  # the shared context
        # Anything tagged with this data directory is left over from a previous run.
        self._swept = await asyncio.to_thread(sweep, f"{self.settings.instance_id}/")
        if self._swept:
            logger.warning("swept leftover agent processes count=%d pids=%s",
                           len(self._swept), self._swept)
        rows = await self.store.agents.list()
        if self.ownership is not None:  # this worker's agents: those whose lease it takes
            owned = await self.ownership.take([r.id for r in rows
                                               if r.state != AgentState.KILLED])
            rows = [r for r in rows if r.id in owned or r.state == AgentState.KILLED]
        self._rows = rows
        self._owned = {r.id for r in rows}
        await self._take_leases([r.id for r in rows if r.state in LIVE_STATES])
        # Turns the previous supervisor left running: reported, never replayed unasked.
        self._interrupted = await report_interrupted(
            self.store, self.escalations, {r.id: r.name for r in rows},
            "the supervisor stopped while it ran", agent_ids=self._owned)
        # Last: a prepare that fails has nothing to undo (`release` runs only after a start).
        self.cpu = cpu = await asyncio.to_thread(
            arrange, self.settings.agent_cpu_group, self.settings.agent_nice,
            self.settings.instance_id, self.settings.max_agents)
        logger.info("agents' CPU: %s", cpu.describe())
        if cpu.procs is not None:
            self._deps = replace(self._deps, cpu_group=str(cpu.procs))

    async def start(self) -> RecoveryReport:
        """After the bus: every agent back (a live one to resume its session), the operator
        told what needs telling, then the agents' loops."""
        if self.state != PoolState.NEW:
            return self.recovery or RecoveryReport((), (), 0)
        deps, iso = self._deps, self.isolation
        assert deps is not None and iso is not None, "prepare() first"
        resumed = []
        self.roles = await self.store.bus.roles()
        waiting: list[AgentRunner] = []  # their loops start once the notes below are queued
        restarted_at = self.clock.now()
        charters = await self.store.charters.all()
        for row in self._rows:
            runner = AgentRunner(row, deps, self.bus.inbox(row.id, row.name),
                                 charter=charters.get(row.id))
            if row.state == AgentState.KILLED:
                self.fleet.add(runner)  # kept for /status and /logs; it has no loop
                continue
            if runner.state.live:
                last = await self.store.turns.recent(row.id, 1)
                await runner.recover(restart_note(
                    restarted_at, bool(last) and last[0].status == "interrupted"))
                resumed.append(row.name)
            await self.store.agents.update(row.id, launcher_pid=None, cli_pid=None)
            self.fleet.add(runner)
            waiting.append(runner)
        if self.handover is not None:  # on a shared database, its agents' bus leases back
            await self.handover.reclaim([r.id for r in self._rows if r.state != "killed"])
        self._rows = []
        self.state = PoolState.RUNNING
        if not iso.ok:
            allowed = self.settings.allow_unisolated_agents
            await self.escalations.notify(
                None, "⚠ Agents run WITHOUT isolation" if allowed
                else "⚠ Agents are refused: this host cannot isolate them",
                describe(iso, allowed))
        if self._store_problem is not None:
            await self.escalations.notify(
                None, "⚠ Session transcripts are not copied to the bucket",
                f"No GCS client for {self.settings.gcs_bucket}: {self._store_problem}. Agents "
                "run, but a new container could not resume their sessions. Fix the credentials "
                "(GOOGLE_APPLICATION_CREDENTIALS or the service account) and restart.")
        # Questions whose asker died with the previous supervisor: close them, tell the
        # operator, and give the agent a note so it knows its request went unanswered.
        # On a shared database only this worker's agents' (others' calls may still wait).
        shared = self.ownership is not None and self.ownership.shared
        for orphan in await self.escalations.expire_orphans(
                "the supervisor restarted", agent_ids=self._owned if shared else None):
            asker = self.fleet.find(orphan.agent_id or "")
            if asker is not None and asker.state.live and not self.killswitch.halted:
                await asker.submit(
                    f"[Switchboard] Your earlier request was not answered because the supervisor "
                    f"restarted: {orphan.title}. If you still need it, ask again.",
                    Origin.RESTART)
        await self.repos.load()  # before the loops: a first turn's sandbox shows its worktree
        # Now the loops: what the dead supervisor had leased and these notes arrive together.
        for runner in waiting:
            self._adopt(runner)
        self.recovery = RecoveryReport(tuple(self._swept), tuple(resumed), self._interrupted)
        return self.recovery

    async def _connect_session_store(self) -> None:
        """Transcripts to the bucket. A client that cannot be made (no credentials, no
        library) is reported, and agents run without the mirror rather than not at all."""
        from store.gcs_sessions import GcsSessionStore

        try:
            self.session_store = await asyncio.to_thread(
                GcsSessionStore.connect, self.settings.gcs_bucket or "",
                self.settings.gcs_sessions_prefix, self.settings.gcs_client_kwargs())
        except Exception as exc:  # noqa: BLE001 - any client error: reported, not fatal
            logger.error("session transcripts: no GCS client: %s", exc)
            self._store_problem = str(exc)

    async def _take_leases(self, agent_ids: list[str]) -> None:
        """Every live agent's lease in the bucket in one round (one settle delay)."""
        if self.persistence is not None:
            self.persistence.on_lost = self._lease_lost
            await self.persistence.take(agent_ids)

    async def _lease_lost(self, agent_id: str) -> None:
        """Another supervisor took this agent's lease: its process here ends at once (the
        agent stays resumable: the other one drives it now)."""
        runner = self.fleet.find(agent_id)
        if runner is not None:
            await runner.close_for_shutdown()

    async def _before_start(self, agent_id: str) -> None:
        """Before an agent's process starts: its lease (AgentFailed if another holds it)."""
        if self.ownership is not None and not self.ownership.holds(agent_id):
            raise AgentFailed(None, "", "this worker does not hold the agent's lease (another "
                              "worker runs it, or this one lost the database)")
        if self.persistence is not None:
            await self.persistence.before_start(agent_id)

    def _session_known(self, agent_id: str) -> None:
        if self.persistence is not None:
            self.persistence.session_known(agent_id)

    def adopt(self, runner: AgentRunner) -> None:  # one built in supervisor/agents/handover.py
        self._adopt(runner)

    def running(self, agent_id: str) -> bool:
        task = self._tasks.get(agent_id)
        return task is not None and not task.done()

    def forget(self, agent_id: str) -> None:
        """An agent this worker no longer runs (its process ended first): out of the fleet."""
        self.fleet.drop(agent_id)
        self._owned.discard(agent_id)
        if (task := self._tasks.pop(agent_id, None)) is not None:
            task.cancel()

    def _adopt(self, runner: AgentRunner) -> None:
        self._owned.add(runner.id)
        self.fleet.add(runner)
        self._tasks[runner.id] = asyncio.create_task(runner.run(), name=f"agent:{runner.name}")
        self._tasks[runner.id].add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("agent loop crashed task=%s", task.get_name(), exc_info=task.exception())

    def require_running(self) -> RunnerDeps:
        if self.state != PoolState.RUNNING or self._deps is None:
            raise ShuttingDown()
        return self._deps

    # -- actions ---------------------------------------------------------------------------------

    async def _hide_from_peers(self, workdir: Path) -> None:
        """Sandboxes built before this agent existed still show its --cwd (read-only, as the
        shared agent uid): cover it in each of them now."""
        for r in self.fleet.everyone():
            proc = r.process
            if proc is None or not proc.sandboxed or not proc.init_pid or r.cwd == str(workdir):
                continue
            why = await asyncio.to_thread(hide_in, proc.init_pid, workdir)
            if why:
                logger.warning("could not hide a new agent's directory from agent=%s: %s",
                               r.id, why)

    async def _wait_idle(self, ref: str, timeout_s: float) -> bool:
        """For notify_when_idle: True once the agent is idle (at once if it is)."""
        r = await self.fleet.get(ref)
        with self.hub.subscription(StateChanged) as events:
            if r.state == AgentState.IDLE and not r.busy and not r.queued:
                return True
            try:
                async with asyncio.timeout(timeout_s):
                    while True:
                        ev = await events.get()
                        if isinstance(ev, StateChanged) and ev.agent_id == r.id and \
                                ev.new == AgentState.IDLE:
                            return True
            except TimeoutError:
                return False

    async def _spawn_child(self, parent_id: str, name: str, prompt: str,
                           model: str | None) -> str:
        """For spawn_agent: a child of the calling agent, admitted like any spawn (depth,
        children, rates, memory), with the kill switch checked here (no API in between)."""
        self.killswitch.check()
        child = await self.spawn(name, prompt, model=model, parent=parent_id,
                                 by=f"agent:{parent_id}", origin=Origin.PEER)
        return child.name

    def _roster(self) -> list[tuple[str, str, str]]:
        """(name, state, roles) of every live agent, for the agents' list_agents tool."""
        roles = self.roles
        return [(r.name, "busy" if r.busy else str(r.state), ",".join(roles.get(r.id, ())))
                for r in self.fleet.live()]

    def _peer_dirs(self, agent_id: str) -> tuple[str, ...]:
        return tuple(r.cwd for r in self.fleet.everyone() if r.id != agent_id)

    def check_isolation(self) -> None:
        """Agents start only in a sandbox, unless the operator explicitly allowed otherwise."""
        iso = self.isolation
        if iso is not None and not iso.ok and not self.settings.allow_unisolated_agents:
            raise LimitExceeded(
                f"agents are not started: this host cannot isolate them ({iso.problem}).",
                iso.fix)

    async def spawn(
        self,
        name: str,
        prompt: str,
        *,
        model: str | None = None,
        cwd: str | None = None,
        parent: str | None = None,
        permission_mode: str | None = None,
        project_settings: bool = False,
        by: str = "operator",
        role: str | None = None,
        charter: str | None = None,
        agent_id: str | None = None,
        origin: Origin = Origin.OPERATOR,
        host: str | None = None,
    ) -> AgentRunner:
        """`agent_id`: chosen by the caller (a worktree is made for it first: supervisor/repos).
        The placer chooses the worker it runs on (`host` pins it; a --cwd is a directory of
        this host's). Placed on another worker, the runner returned has no loop here: that
        worker claims the agent and runs its first message (supervisor/agents/placement.py)."""
        deps = self.require_running()  # the kill switch is checked by supervisor.api
        await self.storage.ensure_writable()
        self.check_isolation()
        check_names(name, role)
        if await self.store.agents.live_name_taken(name):
            raise AgentExists(name)
        mode = self._mode(name, permission_mode, standing=charter is not None)
        if len(prompt) > self.settings.max_prompt_chars:
            raise InvalidRequest(
                f"the prompt is {len(prompt):,} characters; the limit is "
                f"{self.settings.max_prompt_chars:,}"
            )
        if not prompt.strip():
            raise InvalidRequest("the prompt is empty: say what the agent should do")
        parent_id = None
        if parent:
            parent_runner = await self.fleet.get(parent)
            if not parent_runner.state.live:
                raise InvalidRequest(f"parent agent {parent_runner.name!r} is "
                                     f"{parent_runner.state}; spawn children of live agents")
            parent_id = parent_runner.id
        agent_id = agent_id or new_agent_id()
        worker = await self._place(SpawnSpec(name, host), agent_id, cwd)
        await admit(self, parent_id, by, here=worker is None)
        if cwd:
            # A few stats, and a throwaway process when the directory is someone else's.
            workdir = (await asyncio.to_thread(examine, self.settings, self.isolation, cwd)).path
        else:
            workdir = (self.settings.workspaces / f"{name}-{agent_id}").resolve()
        try:
            row = await self.store.agents.create(  # placed elsewhere: a workspace made there
                id=agent_id, name=name, parent_id=parent_id, model=model,
                cwd="" if worker else str(workdir),
                prompt=prompt, permission_mode=mode, state=AgentState.STARTING,
                project_settings=project_settings,
            )
        except Conflict:
            raise AgentExists(name) from None  # a concurrent spawn took the name first
        if charter is not None:  # before its first turn: the charter is in its system prompt
            await self.store.charters.set(agent_id, charter, now=self.clock.now())
        if worker is not None and self.handover is not None:  # its first message stored,
            runner = AgentRunner(row, deps, self.bus.inbox(row.id, row.name), charter=charter)
            await self._give_role(agent_id, role)
            await runner.submit(prompt, origin)
            await self.handover.place(agent_id, name, worker)  # then the lease its worker claims
            return runner
        if self.ownership is not None:
            await self.ownership.claim_new(agent_id)
        workdir.mkdir(parents=True, exist_ok=True)
        if cwd:
            await self._hide_from_peers(workdir)
        runner = AgentRunner(row, deps, self.bus.inbox(row.id, row.name), charter=charter)
        await self._give_role(agent_id, role)
        self._adopt(runner)
        await runner.submit(prompt, origin)
        logger.info("agent spawned agent=%s name=%s parent=%s", agent_id, name, parent_id)
        return runner

    async def elsewhere(self, ref: str, action: str, by: str) -> AgentRunner | None:
        return None if self.handover is None else await self.handover.elsewhere(ref, action, by)

    async def _place(self, spec: SpawnSpec, agent_id: str, cwd: str | None) -> str | None:
        """The worker a new agent runs on, None for this one."""
        if self.placer is None or self.ownership is None or (cwd and not spec.host):
            return None
        worker = await self.placer.place(spec, agent_id)
        if worker == self.ownership.worker_id:
            return None
        if cwd:
            raise InvalidRequest("--cwd names a directory on this host, and the agent is "
                                 f"pinned to {spec.host}: drop --cwd, or pin it here")
        return worker

    def _mode(self, name: str, asked: str | None, *, standing: bool) -> str:
        mode = asked or self.policy.permission_mode(name, self.settings.permission_mode)
        if mode not in PERMISSION_MODES:
            raise InvalidRequest(f"unknown permission mode {mode!r}; use one of "
                                 + ", ".join(PERMISSION_MODES))
        if standing and mode in UNASKED_MODES:
            raise InvalidRequest(
                f"a standing agent cannot run in permission mode {mode}: the CLI could run an "
                "irreversible step without asking. Use default, acceptEdits, plan or dontAsk "
                "(check the policy's [agents] permission_mode too)")
        return mode

    async def _give_role(self, agent_id: str, role: str | None) -> None:
        """Before its first turn, so messages to the role reach it from the start."""
        if role:
            await self.bus.subscribe(agent_id, f"role:{role}")
            self.roles[agent_id] = (*self.roles.get(agent_id, ()), role)

    async def ask(self, ref: str, text: str) -> tuple[AgentRunner, int]:
        """A message for an agent (an operator's /ask, a rerun): the one admission it passes.
        The kill switch first, before anything is looked up or counted; the agent's own
        refusals (killed, budget, crash loop) in its runner's `admit`; the form and length
        where it is stored (the bus)."""
        self.killswitch.check()
        self.require_running()
        self.check_isolation()
        await self.storage.ensure_writable()  # never "sent" into a store that takes nothing
        if self.fleet.find(ref) is None and self.handover is not None and \
                (far := await self.handover.ask(ref, text)) is not None:
            return far, 0  # another worker's agent: on the bus, which that worker reads
        runner = await self.fleet.get(ref)
        self.rates.hit(f"msg:{runner.id}", self.settings.messages_per_minute,
                       f"messages to {runner.name}")
        if not runner.state.live:
            twin = next((r for r in self.fleet.everyone()
                         if r.name == runner.name and r.state.live and r is not runner), None)
            if twin is not None:
                raise InvalidRequest(
                    f"{runner.name} ({runner.id}) is {runner.state} and its name now belongs to "
                    f"agent {twin.id}; send to {twin.id}, or /kill {twin.id} first"
                )
        return runner, await runner.submit(text)

    async def kill(self, ref: str, reason: str = "killed by operator") -> list[AgentRunner]:
        """Kill an agent and its whole subtree, in parallel. Returns the agents killed."""
        root = await self.fleet.get(ref)
        ids = await self.fleet.subtree(root.id)
        targets = [r for r in map(self.fleet.find, ids) if r is not None]
        targets = [r for r in targets if r.state != AgentState.KILLED]
        await asyncio.gather(
            *(r.kill(reason if r is root else f"parent {root.name} killed") for r in targets)
        )
        for r in targets:  # their queued messages will never be read: senders are told
            await self.bus.dead_letter(r.id, f"{r.name} was killed")
        self.repos.gc_soon()  # their worktrees: archived if need be, then removed
        return targets

    # -- shutdown --------------------------------------------------------------------------------

    async def drain(self, grace_s: float) -> bool:
        """Phase one: take no new work, let running turns finish for at most grace_s."""
        if self.state == PoolState.RUNNING:
            self.state = PoolState.DRAINING
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while any(r.busy for r in self.fleet.everyone()):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    async def close(self) -> None:
        """Phase two: end every process (agents stay resumable), cancel the loops, record
        the states a shutdown leaves."""
        if self.state == PoolState.CLOSED:
            return
        self.state = PoolState.CLOSED
        await self.killswitch.books_closed()  # a kill's records, still being written, first
        runners = self.fleet.everyone()
        await end_all(runners, list(self._tasks.values()))
        try:
            for r in runners:
                if r.state in (AgentState.WORKING, AgentState.STARTING, AgentState.WAITING):
                    await self.store.agents.set_state(
                        r.id, r.state, AgentState.IDLE, "supervisor shut down mid-turn",
                        fence=self.ownership.fence(r.id) if self.ownership else None)
            await report_interrupted(self.store, self.escalations,
                                     {r.id: r.name for r in runners}, "the supervisor shut down",
                                     agent_ids={r.id for r in runners})
            if self.ownership is not None:  # handed over: other workers resume them at once
                await self.ownership.release()
        except StoreError:
            # The next start repairs these rows; the sweep in `release` happens regardless.
            logger.exception("could not record the shutdown in the store")

    async def release(self) -> None:
        """After the bus has stopped: the bucket's transcript client closed, and whatever is
        still tagged with this data directory ended."""
        self.state = PoolState.CLOSED
        if self.session_store is not None:
            self.session_store.close()
        if self._deps is not None:
            await asyncio.to_thread(sweep, f"{self.settings.instance_id}/")
        if self.cpu is not None:  # empty now: the sweep ended whatever was left
            await asyncio.to_thread(self.cpu.release)


__all__ = ["AgentPool", "PoolParts", "PoolState", "RecoveryReport", "LIVE_STATES"]
