"""The frozen read models supervisor.api returns: snapshots of agents, spend, escalations,
operators, the kill switch and invites, safe to keep and to pass between tasks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from store.audit import AuditRow
from store.escalations import EscalationRow
from store.operators import OperatorRow
from supervisor.events import AgentState
from supervisor.guard.gateway import AgentCounts, GatewayView

if TYPE_CHECKING:
    from supervisor.agents.runner import AgentRunner

# Escalations and operators are already frozen rows of the store; the API hands them out
# under these names, so callers never import the store.
EscalationView = EscalationRow
OperatorView = OperatorRow
AuditView = AuditRow


class Actor(Protocol):
    """Who asks: an operator on a platform (commands.base.Caller is one), or an agent."""

    @property
    def id(self) -> str: ...  # "platform:user_id", unique across platforms
    @property
    def name(self) -> str: ...
    @property
    def platform(self) -> str: ...


@dataclass(frozen=True, slots=True)
class AgentView:
    id: str
    name: str
    state: AgentState
    model: str | None
    cwd: str
    parent_id: str | None
    created_at: float
    permission_mode: str
    project_settings: bool
    current_tool: str | None
    queued: int
    busy: bool

    @property
    def live(self) -> bool:
        return self.state.live


def agent_fields(r: AgentRunner) -> dict[str, Any]:
    """An agent's AgentView fields, read off its runner at this moment."""
    return dict(
        id=r.id, name=r.name, state=r.state, model=r.model, cwd=r.cwd, parent_id=r.parent_id,
        created_at=r.created_at, permission_mode=r.permission_mode,
        project_settings=r.project_settings, current_tool=r.current_tool, queued=r.queued,
        busy=r.busy,
    )


def agent_view(r: AgentRunner) -> AgentView:
    return AgentView(**agent_fields(r))


@dataclass(frozen=True, slots=True)
class AgentDetail(AgentView):
    effective_model: str | None  # its own model, else the configured default
    session_id: str | None
    turns: int
    cost_usd: float
    turn_started_at: float | None
    cli_pid: int | None
    launcher_pid: int | None
    last_error: str | None
    last_answer: str | None
    charter: str | None = None  # a standing agent's (docs/standing-agents.md)


@dataclass(frozen=True, slots=True)
class FleetView:
    counts: tuple[tuple[str, int], ...]  # live agents per state, by state name
    spent_usd: float
    db_bytes: int = 0  # the database file and its WAL, bytes
    retention: str = ""  # how raw events are bounded, in words


@dataclass(frozen=True, slots=True)
class Sent:
    agent: AgentView  # as it was when the message was queued
    ahead: int  # messages (and a running turn) before this one


@dataclass(frozen=True, slots=True)
class Paused:
    agent: AgentView
    processes: int  # how many processes were frozen


@dataclass(frozen=True, slots=True)
class Killed:
    agent: AgentView  # the agent asked for, as it was before
    killed: tuple[AgentView, ...]  # it and its descendants, as they are now; () if it was dead


@dataclass(frozen=True, slots=True)
class LogEntry:
    kind: str
    summary: str
    at: float
    turn_id: int | None
    # The whole SDK message as recorded (tool calls' inputs, results' text): what the web
    # console draws a tool call from. Read only; {} where not given.
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentLog:
    agent: AgentView
    entries: tuple[LogEntry, ...]


@dataclass(frozen=True, slots=True)
class SpendLine:
    key: str  # agent id or model name
    label: str  # agent name or model name
    cost_usd: float
    input_tokens: int
    output_tokens: int
    turns: int


@dataclass(frozen=True, slots=True)
class SpendReport:
    agent: AgentView | None  # None: the whole fleet
    by_agent: tuple[SpendLine, ...]
    by_model: tuple[SpendLine, ...]

    @property
    def total_usd(self) -> float:
        return sum(line.cost_usd for line in self.by_agent)

    @property
    def turns(self) -> int:
        return sum(line.turns for line in self.by_agent)


@dataclass(frozen=True, slots=True)
class Approved:
    agent: AgentView
    escalations: tuple[EscalationView, ...]  # closed, in the order they were asked


@dataclass(frozen=True, slots=True)
class HaltView:
    by: str
    via: str
    reason: str
    at: float
    agents: tuple[str, ...]  # names of the agents it killed


@dataclass(frozen=True, slots=True)
class InviteView:
    code: str
    role: str
    expires_at: float
    ttl_s: float


@dataclass(frozen=True, slots=True)
class CostCell:
    agent_id: str
    agent: str  # its name
    model: str
    cost_usd: float


@dataclass(frozen=True, slots=True)
class StatsView:
    """What the supervisor counts, for /metrics: cheap to make (memory, and one indexed count)."""

    agents: tuple[tuple[str, int], ...]  # every state, by name, with 0 for none
    turns: tuple[tuple[str, int], ...]  # turns that ended, by outcome (ok, error, ...)
    costs: tuple[CostCell, ...]
    open_escalations: int
    oldest_escalation_age_s: float  # 0 when none is open
    halted: bool
    bus_depth: int  # messages waiting on the agent bus (0 until there is one)
    schedule_runs: tuple[tuple[str, int], ...]  # scheduled runs by outcome (0s until then)
    gateway: GatewayView | None = None  # the model gateway (docs/gateway.md)


@dataclass(frozen=True, slots=True)
class StoreCheck:
    ok: bool
    detail: str  # "writable", or what failed


__all__ = ["AgentCounts", "GatewayView",
           "CostCell", "StatsView", "StoreCheck", "AgentView", "AgentDetail", "FleetView", "Sent",
           "Paused", "Killed", "LogEntry", "AgentLog", "SpendLine", "SpendReport", "Approved",
           "HaltView", "InviteView", "EscalationView", "OperatorView", "AuditView",
           "DeliveryView", "MessageView", "BusSent", "BusView", "TeamView", "TeamStarted"]


@dataclass(frozen=True, slots=True)
class DeliveryView:
    recipient: str  # the agent's name (or id, once it is gone)
    state: str  # queued | leased | consumed | expired | dead
    attempts: int
    reason: str | None


@dataclass(frozen=True, slots=True)
class MessageView:
    """A bus message and, per recipient, whether it was delivered and consumed."""

    id: int
    sender: str  # the sender's name, or "operator"
    recipient: str  # as addressed: a name, role:x, topic:x, *, operator
    type: str
    body: str
    created_at: float
    reply_to: int | None
    deliveries: tuple[DeliveryView, ...]


@dataclass(frozen=True, slots=True)
class BusSent:
    message_id: int | None  # None: refused for every recipient
    duplicate: bool
    queued: tuple[str, ...]  # "b (busy, 2 queued)"
    refused: tuple[str, ...]  # why, per recipient refused
    summary: str


@dataclass(frozen=True, slots=True)
class TeamView:
    name: str
    summary: str
    example: str
    members: tuple[tuple[str, str], ...]  # (member name, role)


@dataclass(frozen=True, slots=True)
class TeamStarted:
    team: str
    prompt: str  # what the team was given (the example, if /team had none)
    agents: tuple[AgentView, ...]


@dataclass(frozen=True, slots=True)
class BusView:
    depths: tuple[tuple[str, int], ...]  # (agent name, queued), deepest first
    states: tuple[tuple[str, int], ...]  # deliveries by state
    reclaimed: int  # leases redelivered after the last restart
