"""The one surface over the supervisor: what commands, front ends, agents' tools and the
scheduler call. It returns frozen read models, never a runner or a store row it does not own,
and applies the supervisor's guards once: the kill switch and the command rate limit here,
fleet admission (limits, spawn rates, memory, isolation) in the pool, which alone sees the fleet
(a message's admission too, kill switch first: `AgentPool.ask`, which a rerun also takes). Text
is cleaned where it comes in (supervisor/sanitize.py); `clean_text` here passes a `CleanText`
through untouched and cleans only what a caller did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from store import Store
from supervisor.agents.retention import database_bytes, retention_words
from supervisor.api.chats import ChatCopiesAPI
from supervisor.api.errors import store_errors
from supervisor.api.files import SENT_FILE, Attached, FilesAPI, SentFile, WorkspaceFile
from supervisor.api.health import SCHEDULE_OUTCOMES, TURN_OUTCOMES, HealthAndRecord
from supervisor.api.memory import MemoryAPI, MemoryView, UnknownProject
from supervisor.api.operators import INVITE_ALPHABET, INVITE_LENGTH, ROLES, OperatorAdmin
from supervisor.api.persistence import PersistenceAPI
from supervisor.api.policy import ChangedCall, LearnedRuleView, PolicyAPI, PolicyTestView
from supervisor.api.record import Hit, RecordAPI, SearchView
from supervisor.api.repos import RepoAPI
from supervisor.api.results import ResultsAPI, ResultView
from supervisor.api.reviews import REVIEW_NOTICE, Overturned, ReviewsAPI, ReviewView
from supervisor.api.schedules import Draft, RunView, ScheduleAPI, ScheduleView
from supervisor.api.standing import StandingAPI
from supervisor.api.turns import TodaySpend, TurnsAPI, TurnView
from supervisor.api.views import (
    Actor,
    AgentDetail,
    AgentLog,
    AgentView,
    Approved,
    AuditView,
    BusSent,
    BusView,
    CostCell,
    DeliveryView,
    EscalationView,
    FleetView,
    GatewayView,
    HaltView,
    InviteView,
    Killed,
    LogEntry,
    MessageView,
    OperatorView,
    Paused,
    Sent,
    SpendLine,
    SpendReport,
    StatsView,
    StoreCheck,
    TeamStarted,
    TeamView,
    agent_fields,
    agent_view,
)
from supervisor.api.web import WebAPI
from supervisor.bus.core import OPERATOR_SENDER
from supervisor.config import Settings
from supervisor.errors import (
    AgentExists,
    AgentFailed,
    AgentNotRunning,
    AlreadyAnswered,
    BadSchedule,
    ConfigError,
    FileRefused,
    Halted,
    InvalidRequest,
    LimitExceeded,
    ShuttingDown,
    StoreFailed,
    SupervisorError,
    UnknownAgent,
    UnknownEscalation,
    UnknownOperator,
)
from supervisor.events import AgentOutput, AgentState, Event, EventHub, StateChanged, TurnFinished
from supervisor.guard.escalations import Answer, Decision, EscalationEvent, Escalations, Kind
from supervisor.guard.killswitch import KillReport, KillSwitch
from supervisor.guard.learned import ALWAYS as ALWAYS_ALLOW
from supervisor.guard.policy import Action as PolicyAction
from supervisor.redact import SECRETS
from supervisor.sanitize import clean, clean_text
from supervisor.schedule import teams as teams_module
from supervisor.schedule.standing import charter_text
from supervisor.schedule.tools import schedule_tools
from supervisor.workers import WorkerView

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool
    from supervisor.core import Core
    from supervisor.schedule.standing import StandingAgents

logger = logging.getLogger(__name__)



class SupervisorAPI(OperatorAdmin, HealthAndRecord):
    """The facade; operators and invites are OperatorAdmin's (supervisor/api/operators.py)."""

    def __init__(self, *, settings: Settings, store: Store, hub: EventHub, pool: AgentPool,
                 escalations: Escalations, killswitch: KillSwitch,
                 standing: StandingAgents,
                 hosts: Callable[[], Awaitable[tuple[WorkerView, ...]]] | None = None) -> None:
        self.settings = settings
        self._store = store
        self._hub = hub
        self._pool = pool
        self._escalations = escalations
        self._killswitch = killswitch
        self._rates = pool.rates  # one limiter, on the supervisor's clock: commands here,
        # messages and spawns in the pool
        self._bus_depth: Callable[[], int] = lambda: 0
        self._schedule_runs: Callable[[], Mapping[str, int]] = dict
        # Repositories and worktrees (supervisor/api/repos.py).
        self.repos = RepoAPI(pool, self._not_halted, self._charter_refused)
        # Standing agents (supervisor/api/standing.py): wake, send-backs.
        self.standing = StandingAPI(standing, pool.fleet, killswitch, store)
        # The scheduler (supervisor/api/schedules.py): /cron, /remind, schedule_wakeup.
        self.schedules = ScheduleAPI(pool, standing, audit=self._audit_row)
        self.report_schedule_runs(self.schedules.scheduler.runs_by_outcome)
        pool.tool_makers["schedules"] = lambda runner: schedule_tools(self.schedules, runner)
        self.persistence = PersistenceAPI(pool)  # snapshots to the bucket
        self._hosts = hosts or _no_hosts  # the database's workers (supervisor/workers.py)
        # Where each escalation's and agent's chat messages are (supervisor/api/chats.py).
        self.chats = ChatCopiesAPI(store, escalations)
        # Rules learned from answers (supervisor/api/policy.py).
        self.policy = PolicyAPI(settings, store, pool.policy)
        # The audit and the search from chat (supervisor/api/record.py).
        self.record = RecordAPI(store)
        # Files into and out of agents' workspaces (supervisor/api/files.py).
        self.files = FilesAPI(pool, settings, self._not_halted, store, escalations)
        # Results agents report with a confidence grade (supervisor/api/results.py).
        self.results = ResultsAPI(pool, settings, store, escalations)
        self.memory = MemoryAPI(pool, store)  # project memory (supervisor/api/memory.py)
        self.turns = TurnsAPI(pool, settings, store)  # turns, today's spend (api/turns.py)
        self.web = WebAPI(store, self._not_halted)  # sign-in links, sessions, API tokens
        self.reviews = ReviewsAPI(pool, standing, store)  # reviewer agents (api/reviews.py)

    @classmethod
    def over(cls, core: Core) -> SupervisorAPI:
        """The API over the supervisor's parts (supervisor/core.py)."""
        return cls(settings=core.settings, store=core.store, hub=core.hub, pool=core.pool,
                   escalations=core.escalations, killswitch=core.killswitch,
                   standing=core.standing, hosts=core.worker.list)

    # -- guards -------------------------------------------------------------------------------

    def _not_halted(self) -> None:
        """While the kill switch is on, only looking, denying and the switch itself work."""
        self._killswitch.check()

    def admit_command(self, by: Actor) -> None:
        """One operator command: refused past commands_per_minute (LimitExceeded)."""
        self._rates.hit(f"cmd:{by.id}", self.settings.commands_per_minute, "commands")

    # -- agents: reading ----------------------------------------------------------------------

    def agents(self, *, include_ended: bool = False) -> tuple[AgentView, ...]:
        """Live agents (with `include_ended`, stopped, failed and killed ones too), oldest
        first."""
        runners = sorted(self._pool.fleet.everyone() if include_ended else self._pool.fleet.live(),
                         key=lambda r: r.created_at)
        return tuple(agent_view(r) for r in runners)

    @store_errors
    async def agent(self, ref: str) -> AgentDetail:
        """One agent by name or id (a live agent wins its name), with spend and process."""
        r = await self._pool.fleet.get(ref)
        totals = await self._store.turns.totals_by_agent(r.id)
        last = await self._store.turns.recent(r.id, 1)
        proc = r.process
        return AgentDetail(
            **agent_fields(r),
            effective_model=r.model or self.settings.default_model,
            session_id=r.session_id,
            turns=totals[0].turns if totals else 0,
            cost_usd=totals[0].cost_usd if totals else 0.0,
            turn_started_at=r.turn_started_at,
            cli_pid=proc.cli_pid if proc else None,
            launcher_pid=proc.launcher_pid if proc else None,
            last_error=r.last_error,
            last_answer=last[0].result_text if last else None,
            charter=r.charter,
        )

    @store_errors
    async def fleet(self) -> FleetView:
        counts: dict[str, int] = {}
        for r in self._pool.fleet.live():
            counts[r.state] = counts.get(r.state, 0) + 1
        totals = await self._store.turns.totals_by_agent()
        return FleetView(tuple(sorted(counts.items())), sum(t.cost_usd for t in totals),
                         db_bytes=database_bytes(self._store.db),
                         retention=retention_words(self.settings))

    @store_errors
    async def hosts(self) -> tuple[WorkerView, ...]:
        """The workers on the database (supervisor/workers.py), the coordinator first."""
        return await self._hosts()

    @store_errors
    async def logs(self, ref: str, n: int = 20) -> AgentLog:
        """The agent's last `n` events, oldest first."""
        r = await self._pool.fleet.get(ref)
        await self._pool.ingest.flush()  # the events still in the open batch too
        events = await self._store.events.tail(r.id, n)
        return AgentLog(agent_view(r), tuple(
            LogEntry(e.kind, e.summary, e.at, e.turn_id, e.data) for e in events))

    @store_errors
    async def spend(self, ref: str | None = None) -> SpendReport:
        """Spend and tokens per agent and per model, of one agent or of all."""
        agent = agent_view(await self._pool.fleet.get(ref)) if ref else None
        agent_id = agent.id if agent else None
        by_agent = await self._store.turns.totals_by_agent(agent_id)
        by_model = await self._store.turns.totals_by_model(agent_id)
        names = {r.id: r.name for r in self._pool.fleet.everyone()}
        return SpendReport(
            agent,
            tuple(SpendLine(c.key, names.get(c.key, c.key), c.cost_usd, c.input_tokens,
                            c.output_tokens, c.turns) for c in by_agent),
            tuple(SpendLine(c.key, c.key, c.cost_usd, c.input_tokens, c.output_tokens,
                            c.turns) for c in by_model),
        )

    # -- agents: acting -----------------------------------------------------------------------

    @store_errors
    async def spawn(self, name: str, prompt: str, *, by: Actor, model: str | None = None,
                    cwd: str | None = None, parent: str | None = None,
                    permission_mode: str | None = None,
                    project_settings: bool = False, role: str | None = None,
                    charter: str | None = None, host: str | None = None) -> AgentView:
        """Start an agent on its first prompt. The pool admits it (limits, rates, memory,
        isolation) and validates name, prompt, mode and directory. With a `charter` (its
        text, or @path of a file) it is a standing agent (docs/standing-agents.md). On a
        shared database the placer picks the worker it runs on; `host` pins it."""
        self._not_halted()
        name, prompt = clean_text(name), clean_text(prompt)
        text = None if charter is None else charter_text(
            clean_text(charter), refused=self._charter_refused, redact=SECRETS)
        r = await self._pool.spawn(name, prompt, model=model, cwd=cwd, parent=parent,
                                   permission_mode=permission_mode,
                                   project_settings=project_settings, by=by.id, role=role,
                                   charter=text, host=host)
        return agent_view(r)

    def _charter_refused(self, path: Path) -> str | None:
        """A charter file the policy would not let an agent read (credentials, our files)."""
        d = self._pool.policy.decide("", "Read", {"file_path": str(path)}, str(path.parent))
        return f"{path}: {d.reason}" if d.action == PolicyAction.DENY else None

    @store_errors
    async def ask(self, ref: str, text: str) -> Sent:
        """Queue a message for an agent; it becomes the agent's next turn (a stopped or
        failed agent restarts on its session; a paused one runs it once resumed). Refused
        while halted by the pool's admission, the one check on this path."""
        r, ahead = await self._pool.ask(clean_text(ref), clean_text(text))
        return Sent(agent_view(r), ahead)

    @store_errors
    async def pause(self, ref: str) -> Paused:
        self._not_halted()
        if (far := await self._pool.elsewhere(ref, "pause", "operator")) is not None:
            return Paused(agent_view(far), 0)  # its worker pauses it at its next renewal
        r = await self._pool.fleet.get(ref)
        stopped = await r.pause()
        return Paused(agent_view(r), len(stopped))

    @store_errors
    async def resume(self, ref: str) -> AgentView:
        self._not_halted()
        if (far := await self._pool.elsewhere(ref, "resume", "operator")) is not None:
            return agent_view(far)
        r = await self._pool.fleet.get(ref)
        await r.resume()
        return agent_view(r)

    @store_errors
    async def stop(self, ref: str) -> AgentView:
        """Interrupt the running turn and close the agent; its session is kept."""
        self._not_halted()
        if (far := await self._pool.elsewhere(ref, "stop", "operator")) is not None:
            return agent_view(far)
        r = await self._pool.fleet.get(ref)
        await r.stop()
        return agent_view(r)

    @store_errors
    async def kill(self, ref: str) -> Killed:
        """Kill the agent and every descendant: every process, no session restart."""
        self._not_halted()
        if (far := await self._pool.elsewhere(ref, "kill", "operator")) is not None:
            return Killed(agent_view(far), ())  # its worker kills it, and its subtree there
        root = await self._pool.fleet.get(ref)
        before = agent_view(root)
        if root.state == AgentState.KILLED:
            return Killed(before, ())
        killed = await self._pool.kill(root.id)
        return Killed(before, tuple(agent_view(r) for r in killed))

    # -- teams ----------------------------------------------------------------------------------

    def teams(self) -> tuple[TeamView, ...]:
        """The team templates /team can start (built-in, then the team_file's)."""
        return tuple(TeamView(t.name, t.summary, t.example,
                              tuple((m.name, m.role) for m in t.members))
                     for t in teams_module.load(self.settings.team_file).values())

    @store_errors
    async def team(self, template: str, prompt: str | None, *, by: Actor,
                   prefix: str | None = None, cwd: str | None = None) -> TeamStarted:
        """Spawn every member of a team template at once, under the guardrails."""
        self._not_halted()
        known = teams_module.load(self.settings.team_file)
        team = known.get(template)
        if team is None:
            raise InvalidRequest(f"there is no team template {template!r}; templates: "
                                 + ", ".join(sorted(known)))
        runners = await teams_module.spawn_team(self._pool, team, prompt, by=by.id,
                                                prefix=prefix, cwd=cwd)
        return TeamStarted(team.name, (prompt or "").strip() or team.example,
                           tuple(agent_view(r) for r in runners))

    # -- the bus --------------------------------------------------------------------------------

    @store_errors
    async def send(self, to: str, text: str, *, by: Actor, kind: str = "task") -> BusSent:
        """A message from the operator to an agent, a role (role:x), a topic (topic:x) or
        everyone (*), stored before this returns."""
        self._not_halted()
        self._pool.require_running()
        sent = await self._pool.bus.send(OPERATOR_SENDER, to, kind, text)
        logger.info("operator message by=%s to=%s id=%s", by.id, to, sent.message_id)
        return BusSent(sent.message_id, sent.duplicate, sent.queued, sent.refused,
                       sent.summary())

    async def _message_view(self, message_id: int) -> MessageView:
        msg, rows = await self._pool.bus.status(message_id)
        return MessageView(msg.id, msg.sender_name, msg.recipient, msg.type, msg.body,
                           msg.created_at, msg.reply_to,
                           tuple(DeliveryView(r.recipient, r.state, r.attempts, r.reason)
                                 for r in rows))

    @store_errors
    async def message(self, message_id: int) -> MessageView:
        """One message, with whether it was delivered and consumed, per recipient."""
        return await self._message_view(message_id)

    @store_errors
    async def messages(self, ref: str | None = None, n: int = 20) -> tuple[MessageView, ...]:
        """The last `n` messages (sent or received by one agent, or all), oldest first."""
        agent_id = (await self._pool.fleet.get(ref)).id if ref else None
        rows = await self._store.bus.recent(agent_id, max(1, min(n, 200)))
        return tuple([await self._message_view(m.id) for m in rows])

    @store_errors
    async def inbox(self, ref: str) -> tuple[MessageView, ...]:
        """What is waiting for an agent (queued, or leased to its running turn), in the order
        it will get it."""
        r = await self._pool.fleet.get(ref)
        rows = await self._store.bus.of_recipient(r.id)
        return tuple([await self._message_view(x.message.id) for x in rows])

    @store_errors
    async def bus_state(self) -> BusView:
        """Queue depth per agent and deliveries by state."""
        names = {r.id: r.name for r in self._pool.fleet.everyone()}
        depths = sorted(((names.get(i, i), n) for i, n in self._pool.bus.depths().items()),
                        key=lambda x: -x[1])
        states = tuple(sorted((await self._store.bus.state_counts()).items()))
        return BusView(tuple(depths), states, self._pool.bus.reclaimed)

    # -- escalations ----------------------------------------------------------------------------

    @store_errors
    async def pending(self, agent: str | None = None) -> tuple[EscalationView, ...]:
        """Open questions and permission requests, oldest first (of one agent, or all)."""
        agent_id = (await self._pool.fleet.get(agent)).id if agent else None
        return tuple(await self._escalations.pending(agent_id))

    @store_errors
    async def pending_groups(self) -> tuple[tuple[str, str, int], ...]:
        """(agent name, tool, how many) for each agent and tool with several open permission
        requests: what `/approve all <agent> <tool>` answers at once."""
        counts: dict[tuple[str, str], int] = {}
        for row in await self._escalations.pending():
            runner = self._pool.fleet.find(row.agent_id) if row.agent_id else None
            if row.kind == Kind.PERMISSION and runner is not None and row.tool_name:
                key = (runner.name, row.tool_name)
                counts[key] = counts.get(key, 0) + 1
        return tuple((name, tool, n) for (name, tool), n in counts.items() if n > 1)

    @store_errors
    async def escalation(self, esc_id: str) -> EscalationView | None:
        return await self._escalations.get(esc_id)

    @store_errors
    async def approve(self, esc_id: str, *, by: Actor, session: bool = False,
                      always: bool = False) -> EscalationView:
        """Allow a permission request once, or for the rest of the agent's session, or
        `always`: add the rule it offers to the policy file, then allow it."""
        self._not_halted()
        row = await self._escalations.get(esc_id)
        if row is not None and row.kind != Kind.PERMISSION and row.status == "open":
            raise InvalidRequest(f"{row.id} is a question, not a permission request: use "
                                 f"/answer {row.id} <text>")
        text = ""
        if always:
            if row is None:
                raise UnknownEscalation(esc_id)
            rule = await self.policy.learn(row, by)
            text = f"learned rule {rule.id}: {rule.words}"
        decision = Decision.ALLOW_SESSION if session else Decision.ALLOW
        return await self._escalations.answer(esc_id, Answer(decision, text, by.name,
                                                             by.platform))

    @store_errors
    async def approve_all(self, agent: str, *, by: Actor, session: bool = False,
                          tool: str | None = None) -> Approved:
        """Allow every open permission request of one agent (of one tool, if named)."""
        self._not_halted()
        r = await self._pool.fleet.get(agent)
        rows = [row for row in await self._escalations.pending(r.id)
                if row.kind == Kind.PERMISSION
                and (tool is None or (row.tool_name or "").lower() == tool.lower())]
        decision = Decision.ALLOW_SESSION if session else Decision.ALLOW
        closed = [await self._escalations.answer(row.id, Answer(decision, "", by.name,
                                                                by.platform)) for row in rows]
        return Approved(agent_view(r), tuple(closed))

    @store_errors
    async def deny(self, esc_id: str, *, by: Actor, reason: str = "") -> EscalationView:
        """Deny a request; the reason goes back to the model. Works while halted."""
        return await self._escalations.answer(
            esc_id, Answer(Decision.DENY, clean_text(reason), by.name, by.platform))

    @store_errors
    async def answer(self, esc_id: str, text: str, *, by: Actor) -> EscalationView:
        """Answer a question with an option number or text. The closed row's
        answer["text"] is what the agent got (an option number becomes the option)."""
        self._not_halted()
        text = clean_text(text)
        row = await self._escalations.get(esc_id)
        if row is not None and row.status == "open":
            if row.kind == Kind.PERMISSION:
                raise InvalidRequest(f"{row.id} is a permission request: use /approve {row.id}"
                                     f" or /deny {row.id} [reason]")
            if text.isdigit() and row.options:
                index = int(text)
                if not 1 <= index <= len(row.options):
                    raise InvalidRequest(f"option {index} does not exist; pick 1 to "
                                         f"{len(row.options)} or type an answer")
                text = row.options[index - 1]
            elif row.options and not row.free_text and text not in row.options:
                raise InvalidRequest("pick one of: " + ", ".join(row.options))
        return await self._escalations.answer(
            esc_id, Answer(Decision.ANSWER, text, by.name, by.platform))

    @store_errors
    async def notify(self, title: str, body: str = "", *,
                     agent_id: str | None = None) -> EscalationView:
        """A notice to every front end; it needs no answer."""
        return await self._escalations.notify(agent_id, clean_text(title), clean_text(body))

    async def follow_escalations(self, frontend: str) -> AsyncIterator[EscalationView]:
        """Everything `frontend` has not acknowledged, oldest first, then each new one."""
        async for row in self._escalations.follow(frontend):
            yield row

    @store_errors
    async def ack_escalation(self, esc_id: str, frontend: str) -> None:
        await self._escalations.ack(esc_id, frontend)

    def events(self) -> AsyncIterator[Event | EscalationEvent]:
        """Every event from now on: agent states, output, finished turns, escalations."""
        return self._hub.stream()

    # -- what the supervisor counts: /metrics and /readyz ---------------------------------------

    # -- the kill switch ------------------------------------------------------------------------

    @property
    def halted(self) -> bool:
        return self._killswitch.halted

    def halt_state(self) -> HaltView | None:
        h = self._killswitch.halt
        if h is None:
            return None
        return HaltView(str(h.get("by")), str(h.get("via")), str(h.get("reason") or ""),
                        float(h.get("at", time.time())), tuple(h.get("agents", ())))

    @store_errors
    async def halt(self, *, by: Actor, reason: str = "") -> KillReport:
        """Trigger the kill switch: every agent SIGKILLed, open requests denied, invites
        revoked, new work refused until release. Again while on: sweeps once more."""
        # clean, not clean_text: a reason too long is dropped, never a reason not to halt.
        # settle: the reply says what was denied and revoked (the loop stays free meanwhile).
        return await self._killswitch.trigger(by.name, by.platform, clean(reason).text,
                                              settle=True)

    @store_errors
    async def release(self, *, by: Actor) -> str:
        """Turn the kill switch off; returns the report of what it had stopped."""
        return await self._killswitch.deactivate(by.name, by.platform)

    @contextlib.contextmanager
    def subscription(self) -> Iterator[asyncio.Queue[Event]]:
        """A queue that receives every event from now on, for as long as the block runs."""
        with self._hub.subscription() as queue:
            yield queue


__all__ = [
    # the API and who calls it
    "SupervisorAPI", "Actor", "ROLES", "INVITE_ALPHABET", "INVITE_LENGTH",
    # read models
    "AgentView", "AgentDetail", "FleetView", "Sent", "Paused", "Killed", "LogEntry", "AgentLog",
    "SpendLine", "SpendReport", "Approved", "HaltView", "InviteView", "EscalationView",
    "OperatorView", "AuditView", "KillReport", "StatsView", "CostCell", "StoreCheck",
    "GatewayView", "REVIEW_NOTICE", "TurnView", "TodaySpend",
    "TURN_OUTCOMES", "SCHEDULE_OUTCOMES", "BusSent", "BusView", "MessageView", "DeliveryView",
    "TeamView", "TeamStarted", "ScheduleAPI", "ScheduleView", "RunView", "Draft",
    "LearnedRuleView", "ALWAYS_ALLOW", "PolicyTestView", "ChangedCall", "SearchView", "Hit",
    "Attached", "WorkspaceFile", "FilesAPI", "SentFile", "SENT_FILE", "ResultsAPI", "ResultView",
    "MemoryAPI", "MemoryView", "UnknownProject", "ReviewsAPI", "ReviewView", "Overturned",
    "WorkerView",
    # values and events
    "AgentState", "Kind", "Decision", "Event", "StateChanged", "AgentOutput", "TurnFinished",
    "EscalationEvent",
    # errors
    "SupervisorError", "ConfigError", "InvalidRequest", "UnknownAgent", "AgentExists",
    "AgentNotRunning", "UnknownEscalation", "AlreadyAnswered", "UnknownOperator", "Halted",
    "LimitExceeded", "ShuttingDown", "StoreFailed", "AgentFailed", "BadSchedule", "FileRefused",
]


async def _no_hosts() -> tuple[WorkerView, ...]:
    return ()
