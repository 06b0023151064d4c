"""An agent's bus tools, in its in-process MCP server: bound to the agent's identity when the
server is built, so the sender of every message is the agent itself, never a field it fills in.

send_message, check_messages, list_agents, subscribe, report_status, notify_when_idle,
spawn_agent. A message is never consent: nothing here answers an escalation, approves a tool
call or changes a policy.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from claude_agent_sdk import SdkMcpTool, tool

from supervisor.bus.core import OPERATOR, SYSTEM_SENDER, TYPES, Bus, Sender
from supervisor.errors import SupervisorError


class Identity(Protocol):
    id: str
    name: str
    parent_id: str | None


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if error:
        out["is_error"] = True
    return out


def _error(exc: SupervisorError) -> dict[str, Any]:
    return _text(f"error: {exc.what}" + (f" {exc.fix}" if exc.fix else ""), error=True)


def _int(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(str(value).lstrip("#"))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class FleetHooks:
    """What the tools need from the pool."""

    roster: Callable[[], list[tuple[str, str, str]]]  # (name, state, roles) of live agents
    # (agent name or id, seconds) -> True once it is idle, False if it never was in time
    wait_idle: Callable[[str, float], Awaitable[bool]]
    # (parent id, name, prompt, model) -> the child's name; raises SupervisorError if refused
    spawn_child: Callable[[str, str, str, str | None], Awaitable[str]]


IDLE_NOTICE_S = 3600.0  # how long notify_when_idle waits before its one notice expires


class AgentBusTools:
    """The tools of one agent, bound to its identity."""

    def __init__(self, bus: Bus, agent: Identity, fleet: FleetHooks) -> None:
        self.bus = bus
        self.agent = agent
        self.me = Sender(agent.id, agent.name)
        self.fleet = fleet

    async def send_message(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            sent = await self.bus.send(self.me, str(args.get("to") or ""),
                                       str(args.get("type") or "info"),
                                       str(args.get("body") or ""),
                                       reply_to=_int(args.get("reply_to")),
                                       dedup_key=args.get("dedup_key") or None)
        except SupervisorError as exc:
            return _error(exc)
        return _text(sent.summary(), error=sent.message_id is None)

    async def _one(self, wanted: int) -> dict[str, Any]:
        msg, rows = await self.bus.status(wanted)
        if msg.sender != self.agent.id:
            return _text(f"error: message #{wanted} is not yours", error=True)
        lines = [f"#{msg.id} {msg.type} to {msg.recipient}:"]
        lines += [f"  {r.recipient}: {r.state}" + (f" ({r.reason})" if r.reason else "")
                  for r in rows] or ["  (the operator: shown as a notice)"]
        return _text("\n".join(lines))

    async def check_messages(self, args: dict[str, Any]) -> dict[str, Any]:
        wanted = _int(args.get("message_id"))
        try:
            if wanted is not None:
                return await self._one(wanted)
            lines = []
            for msg in await self.bus.store.bus.recent(self.agent.id, 10):
                if msg.sender != self.agent.id:
                    continue
                _, rows = await self.bus.status(msg.id)
                states = ", ".join(f"{r.recipient} {r.state}" for r in rows) or "operator"
                lines.append(f"#{msg.id} {msg.type} to {msg.recipient} "
                             f"({time.strftime('%H:%M:%S', time.gmtime(msg.created_at))}): "
                             f"{states}")
        except SupervisorError as exc:
            return _error(exc)
        waiting = len(self.bus.inbox(self.agent.id))
        lines.append(f"{waiting} message(s) queued for you (they arrive as your next turn).")
        return _text("\n".join(lines))

    async def list_agents(self, args: dict[str, Any]) -> dict[str, Any]:
        role = str(args.get("role") or "").strip()
        rows = [r for r in self.fleet.roster() if not role or role in r[2].split(",")]
        return _text("\n".join(f"{n}: {s}" + (f" (roles: {roles})" if roles else "")
                                for n, s, roles in rows) or "no agents")

    async def subscribe(self, args: dict[str, Any]) -> dict[str, Any]:
        topic = str(args.get("topic") or "").strip().removeprefix("topic:").removeprefix("#")
        if not topic:
            return _text("error: name a topic", error=True)
        try:
            if args.get("unsubscribe"):
                await self.bus.unsubscribe(self.agent.id, f"topic:{topic}")
                return _text(f"unsubscribed from topic:{topic}")
            await self.bus.subscribe(self.agent.id, f"topic:{topic}")
        except SupervisorError as exc:
            return _error(exc)
        return _text(f"subscribed to topic:{topic}")

    async def report_status(self, args: dict[str, Any]) -> dict[str, Any]:
        live = dict(self.bus.members.live())
        to = live.get(self.agent.parent_id or "", OPERATOR)
        try:
            sent = await self.bus.send(self.me, to, "status", str(args.get("text") or ""))
        except SupervisorError as exc:
            return _error(exc)
        return _text(sent.summary(), error=sent.message_id is None)

    async def notify_when_idle(self, args: dict[str, Any]) -> dict[str, Any]:
        target = str(args.get("agent") or "").strip()
        if not target:
            return _text("error: name the agent", error=True)
        fleet, bus, me = self.fleet, self.bus, self.me

        async def watch() -> None:
            idle = await fleet.wait_idle(target, IDLE_NOTICE_S)
            text = (f"{target} is idle now." if idle else
                    f"{target} did not become idle within {IDLE_NOTICE_S / 60:.0f} minutes; "
                    "this notice has expired.")
            with contextlib.suppress(SupervisorError):
                await bus.send(SYSTEM_SENDER, me.name, "status", text, agent_id=me.id)

        bus.spawn_task(f"bus-idle:{me.id}:{target}", watch())
        return _text(f"You will get one status message when {target} is idle (or in "
                     f"{IDLE_NOTICE_S / 60:.0f} minutes, if it is not by then).")

    async def spawn_agent(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            name = await self.fleet.spawn_child(
                self.agent.id, str(args.get("name") or ""), str(args.get("prompt") or ""),
                str(args["model"]) if args.get("model") else None)
        except SupervisorError as exc:
            return _error(exc)
        return _text(f"spawned {name}, your child; it is working on its prompt. It can "
                     "report_status to you, and send_message reaches it by name.")

    def tools(self) -> list[SdkMcpTool[Any]]:
        return [
            tool("send_message",
                 "Send a message to another agent (by name), to a role (role:<name>), a topic "
                 "(topic:<name>), everyone (*), or the operator. It is pushed to the recipient: "
                 "an idle one gets it at once, a busy one when its turn ends. Types: "
                 + ", ".join(TYPES) + " (interrupt stops the recipient's running turn). Use "
                 "reply_to with the id of the message you answer; dedup_key makes a retry safe.",
                 {"type": "object",
                  "properties": {"to": {"type": "string"},
                                 "type": {"type": "string", "enum": list(TYPES)},
                                 "body": {"type": "string"},
                                 "reply_to": {"type": "integer"},
                                 "dedup_key": {"type": "string"}},
                  "required": ["to", "body"]})(self.send_message),
            tool("check_messages",
                 "Whether your messages were delivered and read: with message_id, that one per "
                 "recipient; without, a summary of the last ones you sent.",
                 {"type": "object", "properties": {"message_id": {"type": "integer"}}},
                 )(self.check_messages),
            tool("list_agents", "The live agents: name, state, roles. Optional role filter.",
                 {"type": "object", "properties": {"role": {"type": "string"}}},
                 )(self.list_agents),
            tool("subscribe",
                 "Receive the messages sent to topic:<topic> (unsubscribe: true to stop).",
                 {"type": "object", "properties": {"topic": {"type": "string"},
                                                   "unsubscribe": {"type": "boolean"}},
                  "required": ["topic"]})(self.subscribe),
            tool("report_status", "Tell your parent agent (or the operator, if you have none) "
                 "how your work stands, in a line or two.",
                 {"type": "object", "properties": {"text": {"type": "string"}},
                  "required": ["text"]})(self.report_status),
            tool("notify_when_idle", "Get one status message when another agent is idle "
                 "(the notice expires after an hour).",
                 {"type": "object", "properties": {"agent": {"type": "string"}},
                  "required": ["agent"]})(self.notify_when_idle),
            tool("spawn_agent", "Start a child agent with a prompt, under Switchboard's limits "
                 "(fleet size, depth, children, rates, memory). Kill and budget apply to it "
                 "with you.",
                 {"type": "object", "properties": {"name": {"type": "string"},
                                                   "prompt": {"type": "string"},
                                                   "model": {"type": "string"}},
                  "required": ["name", "prompt"]})(self.spawn_agent),
        ]


def bus_tools(bus: Bus, agent: Identity, fleet: FleetHooks) -> list[SdkMcpTool[Any]]:
    return AgentBusTools(bus, agent, fleet).tools()


BUS_TOOL_NAMES = ("send_message", "check_messages", "list_agents", "subscribe", "report_status",
                  "notify_when_idle", "spawn_agent")
