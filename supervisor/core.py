"""The supervisor's half of the composition root: every long-lived part of the runtime is built
here, once, in dependency order, and started as a named service in one `Services` group,
stopped in reverse. The pool builds none of them: it is handed the parts it works with
(`PoolParts`), and the others get narrow views (the fleet registry, the escalations as a
notifier, the kill switch's halt flag), never the pool.

The front ends' root (bot/app.py) opens the store, builds a `Core` over it and runs
`Core.services` as one of its own services, between the store and the API."""

from __future__ import annotations

import asyncio
import logging
import os

from store import Store
from supervisor.agents.fleet import BusMembers, Fleet
from supervisor.agents.ingest import EventIngest
from supervisor.agents.ownership import Ownership
from supervisor.agents.placement import LocalPlacer
from supervisor.agents.pool import AgentPool, PoolParts
from supervisor.agents.recovery import RERUN_TOOL, answer_hook
from supervisor.agents.retention import Retention
from supervisor.agents.transcripts import FRESH_TOOL
from supervisor.agents.transcripts import answer_hook as fresh_answer_hook
from supervisor.bus.core import Bus
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.coordinator import Coordinator
from supervisor.errors import ConfigError
from supervisor.events import EventHub
from supervisor.guard.escalations import Decision, Escalations, Kind, Timeouts
from supervisor.guard.gateway import ModelGateway
from supervisor.guard.guardrails import CrashTracker, MemoryProbe, RateLimiter, day_start
from supervisor.guard.killswitch import KillSwitch
from supervisor.guard.policy import Policy, PolicyError
from supervisor.guard.protected import ProtectedPaths
from supervisor.guard.storage import StorageGuard
from supervisor.guard.timers import EscalationTimers
from supervisor.guard.watchdog import NO_TIMEOUT, Watchdog
from supervisor.persistence.bucket import Persistence
from supervisor.repos import Repos
from supervisor.schedule.standing import StandingAgents
from supervisor.service import FnService, Service, Services, TaskGroup, loop_service
from supervisor.workers import Worker

logger = logging.getLogger(__name__)

# The order the core's services start in (and stop in reverse). A test holds it.
SERVICE_ORDER = ("storage", "ingest", "killswitch", "gateway", "recovery", "bus", "agents",
                 "ownership", "timers", "answers", "repos", "watchdog", "retention")


def load_policy(settings: Settings) -> Policy:
    """The policy file, with every path no agent may touch (ConfigError when it is wrong)."""
    try:
        return Policy.load(settings.policy_path, protected=ProtectedPaths(
            home=settings.home, settings=settings.config_file, policy=settings.policy_path,
            credentials=settings.gcs_credentials_file
            or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"),
            extra=tuple(p for p in (settings.claude_config_dir, *settings.sandbox_hide)
                        if p is not None)))
    except PolicyError as exc:
        raise ConfigError(str(exc)) from exc


class Core:
    """Every part of the runtime, built over an open store. Nothing starts until `services`
    does; a part that fails to start stops the ones started before it."""

    def __init__(self, settings: Settings, store: Store, hub: EventHub,
                 clock: Clock = SYSTEM_CLOCK, persistence: Persistence | None = None,
                 coordinator: Coordinator | None = None) -> None:
        self.settings = settings
        self.store = store
        self.hub = hub
        self.clock = clock
        self.persistence = persistence
        self.policy = load_policy(settings)
        self.fleet = Fleet(store)
        self.escalations = Escalations(store, hub, Timeouts(
            reminder_s=settings.approval_reminder_s, timeout_s=settings.approval_timeout_s,
            on_timeout=settings.approval_on_timeout,
        ), clock)
        self.timers = EscalationTimers(self.escalations, clock)
        self.storage = StorageGuard(store, self.escalations, clock)
        self.killswitch = KillSwitch(settings, store, self.fleet, self.escalations, clock)
        # Kill switch layer 3: whatever Switchboard issued is revoked with it.
        self.killswitch.revokers.append(store.operators.revoke_invites)
        self.killswitch.revokers.append(store.web.revoke_all)  # web sessions, API tokens
        self.memory = MemoryProbe(settings.cgroup_dir)
        # This process as a worker of the database (its row, its heartbeat; started by the
        # composition root, which also runs the coordinator role it reports).
        self.coordinator = coordinator if coordinator is not None else Coordinator(None)
        self.worker = Worker(store, self.fleet, self.memory, self.coordinator)
        # The agents' leases this worker holds (supervisor/agents/ownership.py).
        self.ownership = Ownership(store, self.worker.id)
        # Requests of agents another worker runs: that worker fires their timers.
        self.escalations.elsewhere = self._remote
        self.watchdog = Watchdog(settings, self.fleet, self.escalations, store, self.memory,
                                 clock)
        # Agents' model requests: the key stays here, each agent holds a token that dies with
        # it; the kill switch revokes them all (layer 3) and refuses every request while on.
        self.gateway = ModelGateway(settings, halted=lambda: self.killswitch.halted,
                                    budget=self._budget_of,
                                    day=lambda: int(day_start(clock.now())),
                                    on_refused=self._egress_refused)
        self.killswitch.revokers.append(self.gateway.revoke_everything)
        self.bus = Bus(store, settings, BusMembers(self.fleet, self._remote), clock=clock,
                       notify=self.escalations.notify,
                       halted=lambda: self.killswitch.halted,
                       ask_operator=self._ask_operator)
        self.ingest = EventIngest(store, window_s=settings.ingest_window_s,
                                  max_batch=settings.ingest_max_batch, clock=clock)
        self.retention = Retention(self.ingest, max_age_days=settings.event_retention_days,
                                   per_agent=settings.event_retention_per_agent,
                                   interval_s=settings.retention_interval_s, clock=clock)
        self.standing = StandingAgents(self.fleet, self.bus, store, clock)
        self.pool: AgentPool
        self.repos = Repos(settings, store, hub, self.fleet, self.bus, self.escalations,
                           lambda: self.pool.isolation, clock)
        self.pool = AgentPool(settings, store, hub, PoolParts(
            fleet=self.fleet, policy=self.policy, escalations=self.escalations,
            killswitch=self.killswitch,
            crashes=CrashTracker(settings.crash_loop_max, settings.crash_loop_window_s, clock),
            rates=RateLimiter(clock), memory=self.memory, watchdog=self.watchdog, bus=self.bus,
            ingest=self.ingest, repos=self.repos, storage=self.storage, gateway=self.gateway,
            ownership=self.ownership, placer=LocalPlacer(store, self.worker.id),
        ), clock, persistence)
        self.escalations.on_answer(RERUN_TOOL, answer_hook(store, self.escalations,
                                                           self.pool.ask))
        self.escalations.on_answer(FRESH_TOOL, fresh_answer_hook(self.fleet, store,
                                                                 self.escalations))
        self.services = Services(self._services(), stop_timeout_s=settings.shutdown_grace_s
                                 + settings.kill_grace_s + 30)

    def _services(self) -> list[Service]:
        async def start_storage(_group: TaskGroup) -> None:
            self.storage.start()

        async def start_ingest(_group: TaskGroup) -> None:
            await self.ingest.start()

        async def start_killswitch(_group: TaskGroup) -> None:
            await self.killswitch.start()

        async def stop_killswitch() -> None:
            # In a thread: it joins the watcher threads, one of which may be in the middle of
            # a poll (a database read), and the loop must not wait on that.
            await asyncio.to_thread(self.killswitch.close)

        async def start_gateway(_group: TaskGroup) -> None:
            await self.gateway.start()

        async def prepare(_group: TaskGroup) -> None:
            await self.pool.prepare()

        async def start_bus(_group: TaskGroup) -> None:
            await self.bus.start()

        async def start_agents(_group: TaskGroup) -> None:
            report = await self.pool.start()
            logger.info("supervisor started home=%s resumed=%d swept=%d", self.settings.home,
                        len(report.resumed), len(report.swept_pids))

        async def start_timers(_group: TaskGroup) -> None:
            await self.timers.start()

        async def start_repos(_group: TaskGroup) -> None:
            await self.repos.start()

        return [
            # Stopped last: after a delete or replace, its copy holds what the shutdown wrote.
            FnService("storage", start_storage, self.storage.close),
            FnService("ingest", start_ingest, self.ingest.close),  # the last events written
            FnService("killswitch", start_killswitch, stop_killswitch),
            # Before any agent starts: their CLIs are pointed at it; stopped after them.
            FnService("gateway", start_gateway, self.gateway.close),
            # The host probed, leftovers swept, leases taken, interrupted turns reported;
            # stopped: the bucket's transcript client closed, a last sweep.
            FnService("recovery", prepare, self.pool.release),
            # After the report: the dead supervisor's leases go back to the queue.
            FnService("bus", start_bus, self.bus.close),
            # The agents and their loops; stopped: every process ended, states recorded.
            FnService("agents", start_agents, self.pool.close),
            # The leases renewed; agents placed here or left by a dead worker claimed.
            loop_service("ownership", self.ownership.run),
            # After the pool expired the dead supervisor's orphans: stored reminders and
            # timeouts fire now; stopped before the agents, so none acts on a closing agent.
            FnService("timers", start_timers, self.timers.stop),
            # Answers another worker recorded for calls waiting here (docs/postgresql.md).
            loop_service("answers", self.escalations.watch_answers),
            # The agents are known: dead agents' worktrees are collected.
            FnService("repos", start_repos, self.repos.close),
            loop_service("watchdog", self.watchdog.run, after=self.watchdog.close),
            # Deleting old events is one worker's job: the coordinator's (every one on SQLite).
            self.coordinator.gated_loop("retention", self.retention.run),
        ]

    def _remote(self) -> dict[str, tuple[str, str]]:
        """The live agents other workers run (their names reach them over the bus)."""
        handover = self.pool.handover
        return handover.remote if handover is not None else {}

    async def _budget_of(self, agent_id: str) -> tuple[float, float] | None:
        """(today's budget, today's recorded spend) of an agent with a budget, for the gateway."""
        budget = await self.watchdog.budget_for(agent_id)
        if budget is None:
            return None
        return budget, await self.store.turns.spent_since(day_start(self.clock.now()), agent_id)

    async def _egress_refused(self, agent_id: str, name: str, host: str) -> None:
        """An agent's first connection to a host it may not reach: the operator is asked once,
        with one tap to allow that host for that agent (until the supervisor restarts)."""
        allow = f"Allow {host} for {name}"
        row = await self.escalations.open(
            agent_id=agent_id, kind=Kind.QUESTION, title=f"{name} tried to reach {host}: refused",
            body=f"egress = allowlist, and {host} is not in egress_allow. Further attempts at "
                 f"{host} by {name} are refused without asking again. To allow it for every "
                 "agent and for good, add it to egress_allow in the settings.",
            options=(allow, "Keep refusing"), timeouts=NO_TIMEOUT)
        answer = await self.escalations.wait(row)
        if answer.decision == Decision.ANSWER and answer.text == allow:
            self.gateway.proxy.allow(agent_id, host)
            await self.escalations.notify(agent_id, f"{name} may now reach {host}",
                                          "Until Switchboard restarts; egress_allow keeps it.")

    async def _ask_operator(self, agent_id: str, title: str,
                            question: str) -> tuple[str, bool]:
        """A bus question to the operator: an escalation like ask_operator's; its answer.
        A standing agent's question its charter decides is sent back to it instead, once
        (True: the answer is its charter's)."""
        back = await self.standing.send_back_for(agent_id, question)
        if back is not None:
            return back, True
        row = await self.escalations.open(agent_id=agent_id, kind=Kind.QUESTION, title=title,
                                          body=question, free_text=True)
        return (await self.escalations.wait(row)).to_agent(), False


__all__ = ["SERVICE_ORDER", "Core", "load_policy"]
