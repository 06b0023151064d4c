"""The web console's HTML, rendered on the server: the regions a page is made of (the header,
Needs you, the fleet, an agent's transcript) and the pages around them, from the supervisor's
read models. Everything an agent or an operator wrote is escaped (Jinja2's autoescape): agents
are hostile and print markup into their output."""

# Jinja2 rather than html.escape by hand: autoescape escapes every value by default, so a
# forgotten escape cannot become an injection; the templates stay HTML a designer can read.

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2

from bot.web.stream import Rows
from bot.web.transcript import Entry, draw
from commands.base import Role
from commands.render import ago as commands_ago
from supervisor.api import (
    AgentState,
    EscalationView,
    Kind,
    SupervisorAPI,
    UnknownAgent,
)

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")
TRANSCRIPT_EVENTS = 200
ROWS = "\x00rows\x00"  # where a region's rows go in its template (no template prints NUL)
WORKING = (AgentState.WORKING, AgentState.STARTING)
VERDICTS = {"allow": "Allowed", "allow_session": "Allowed for the session",
            "deny": "Denied", "answer": "Answered"}
PLATFORMS = {"telegram": "Telegram", "slack": "Slack", "console": "the console",
             "web": "the web console", "http": "the HTTP API"}


def ago(ts: float | None, now: float | None = None) -> str:
    """"3m05s ago", as chat says it; "-" for never."""
    text = commands_ago(ts, now)
    return text if text == "-" else f"{text} ago"


def seconds_ago(age_s: float) -> str:
    """An age in seconds as `ago` says it ("3m05s ago")."""
    return ago(time.time() - age_s)


def gigabytes(n: int | None) -> str:
    return "memory unknown" if n is None else f"{n / 1e9:.1f} GB free"


def clock_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else "-"


def money(usd: float | None) -> str:
    return "-" if usd is None else f"${usd:,.2f}" if usd >= 0.1 or usd == 0 else f"${usd:.4f}"


def duration(start: float | None, end: float | None) -> str:
    if not start or not end:
        return "running" if start else "-"
    s = max(0.0, end - start)
    return f"{s:.1f}s" if s < 60 else f"{int(s // 60)}m{int(s % 60):02d}s"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update(ago=ago, clock=clock_time, money=money, gigabytes=gigabytes,
                       seconds_ago=seconds_ago)
    env.globals.update(VIEWER=Role.VIEWER, OPERATOR=Role.OPERATOR, ADMIN=Role.ADMIN,
                       duration=duration, platform_name=platform_name, verdict=verdict)
    return env


def platform_name(platform: str | None) -> str:
    return PLATFORMS.get(platform or "", platform or "?")


def verdict(row: EscalationView) -> str:
    decision = str((row.answer or {}).get("decision", ""))
    return VERDICTS.get(decision, row.status.replace("_", " ").capitalize())


def recommended(body: str) -> tuple[str, str]:
    """(the body without it, the agent's recommended answer line) from an escalation's body,
    which carries it as a line starting with ★ (supervisor/guard/recommend.py)."""
    keep, rec = [], ""
    for line in body.splitlines():
        if line.lstrip().startswith("★") and not rec:
            rec = line.lstrip().lstrip("★").strip().removeprefix("Recommended:").strip()
            rec = rec.replace(" (the first button)", "")  # chat's words; here it is first too
        else:
            keep.append(line)
    return "\n".join(keep).strip(), rec


@dataclass(frozen=True, slots=True)
class Request:
    """An escalation as Needs you shows it."""

    row: EscalationView
    agent: str
    body: str
    recommended: str

    @property
    def permission(self) -> bool:
        return self.row.kind == Kind.PERMISSION


class Regions:
    """Renders the console's regions and pages for a role, reading the supervisor's API."""

    def __init__(self, api: Callable[[], SupervisorAPI], links: Callable[[], Any],
                 answered: Callable[[], tuple[str, ...]],
                 last_seen: Mapping[str, float]) -> None:
        self.env = environment()
        self._api = api
        self._links = links
        self._answered = answered
        self._last_seen = last_seen

    def page(self, template: str, **values: Any) -> str:
        return self.env.get_template(template).render(**values)

    async def region(self, topic: str, role: Role) -> str | Rows:
        """One topic of the event stream (bot/web/stream.py) as HTML."""
        if topic == "header":
            return await self.header(role)
        if topic == "needs":
            return await self.needs(role)
        if topic == "fleet":
            return await self.fleet(role)
        if topic.startswith("agent:"):
            return await self.agent(topic.removeprefix("agent:"), role)
        raise ValueError(f"no such region {topic!r}")

    # -- regions --------------------------------------------------------------------------------

    async def header(self, role: Role) -> str:
        api = self._api()
        agents = api.agents()
        waiting = len([e for e in await api.pending() if e.kind != Kind.NOTICE])
        spend = await api.turns.spent_today()
        counts = {"working": sum(a.state in WORKING for a in agents), "needs you": waiting,
                  "paused": sum(a.state == AgentState.PAUSED for a in agents),
                  "idle": sum(a.state == AgentState.IDLE for a in agents)}
        return self.page("header.html", role=role, counts=counts, halt=api.halt_state(),
                         spend=spend, links=list(self._links()), live=len(agents))

    async def needs(self, role: Role) -> str:
        api = self._api()
        names = {a.id: a.name for a in api.agents(include_ended=True)}
        open_rows = [self._request(e, names) for e in await api.pending()
                     if e.kind != Kind.NOTICE]
        answered = []
        for esc_id in self._answered():
            row = await api.escalation(esc_id)
            if row is not None and row.status != "open" and row.kind != Kind.NOTICE:
                answered.append(self._request(row, names))
        return self.page("needs.html", role=role, requests=open_rows, answered=answered,
                         groups=await api.pending_groups())

    def _request(self, row: EscalationView, names: Mapping[str, str]) -> Request:
        body, rec = recommended(row.body)
        return Request(row, names.get(row.agent_id or "", row.agent_id or "Switchboard"),
                       body, rec)

    async def fleet(self, role: Role) -> Rows:
        """The fleet as rows, one an agent: the stream sends only the rows that changed."""
        api = self._api()
        agents = api.agents()
        names = {a.id: a.name for a in api.agents(include_ended=True)}
        spend = await api.turns.spent_today()
        turns = {line.key: line.turns for line in (await api.spend()).by_agent}
        trees = {w.agent_id: w for repo in await api.repos.list() for w in repo.worktrees}
        row = self.env.get_template("fleet_row.html")
        rows = tuple((a.id, row.render(role=role, a=a, names=names, spend=spend, turns=turns,
                                       trees=trees, last_seen=self._last_seen))
                     for a in agents)
        # The hosts (one on SQLite) below the rows; a heartbeat's age only when it is late, so
        # a healthy fleet's region keeps its shape and the stream sends only changed rows.
        head, tail = self.page("fleet.html", agents=agents, rows=ROWS,
                               hosts=await api.hosts()).split(ROWS)
        return Rows(head, rows, tail)

    async def agent(self, ref: str, role: Role) -> str:
        api = self._api()
        detail = await api.agent(ref)
        log = await api.logs(detail.id, TRANSCRIPT_EVENTS)
        turns = await api.turns.recent(detail.id, 20)
        entries: list[Entry] = draw(log.entries)
        sent = [m for m in await api.messages(detail.id, 30) if m.sender == detail.name]
        inbox = await api.inbox(detail.id)
        pending = await api.pending(detail.id)
        return self.page("agent_live.html", role=role, a=detail, entries=entries, turns=turns,
                         inbox=inbox, outbox=sent, pending=pending,
                         files=sorted({e.path for e in entries if e.path}))

    async def agent_exists(self, ref: str) -> str:
        """The agent's id, or UnknownAgent."""
        for a in self._api().agents(include_ended=True):
            if ref in (a.id, a.name):
                return a.id
        raise UnknownAgent(ref)


__all__ = ["Regions", "Request", "ago", "clock_time", "duration", "environment", "money",
           "recommended", "verdict"]
