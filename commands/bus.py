"""Bus commands: /send to an agent, role, topic or everyone; /inbox, /messages and /bus to see
the traffic."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Context, Opt, Param, Reply, Rest, Role, Text, UsageError
from commands.render import ago
from supervisor.api import MessageView

TYPES = ("task", "result", "question", "info", "status", "interrupt")


def message_line(m: MessageView, *, body_chars: int = 120) -> str:
    body = " ".join(m.body.split())
    if len(body) > body_chars:
        body = body[:body_chars - 1] + "…"
    states = ", ".join(f"{d.recipient} {d.state}" for d in m.deliveries) or "notice"
    reply = f" ↩#{m.reply_to}" if m.reply_to else ""
    return (f"#{m.id} {ago(m.created_at)} ago · {m.sender} → {m.recipient} · {m.type}{reply}"
            f" · [{states}]\n    {body}")


class Send:
    name: ClassVar[str] = "send"
    summary: ClassVar[str] = ("send a message on the bus to an agent, role:<role>, "
                              "topic:<topic> or * (everyone)")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Opt("--type", "type", "task (default), question, info, status, result or interrupt "
                              "(interrupts the running turn)", "TYPE"),
        Arg("to", "an agent's name, role:<role>, topic:<topic>, or *"),
        Rest("text", "the message"),
    )
    examples: ClassVar[tuple[str, ...]] = ("/send role:reviewer please look at PR 12",
                                           "/send * stand down, tests are red",
                                           "/send --type interrupt fixer stop and commit")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        kind = (args["type"] or "task").lower()
        if kind not in TYPES:
            raise UsageError(f"--type must be one of {', '.join(TYPES)}, got {kind!r}")
        sent = await ctx.api.send(args["to"], args["text"], by=ctx.caller, kind=kind)
        if sent.message_id is None:
            return Reply.error("Not sent: " + "; ".join(sent.refused),
                               "Wait, or put the rest into one message.")
        return Reply.text(f"Sent #{sent.message_id} to {args['to']}: "
                          + ", ".join(sent.queued) + "."
                          + ("" if not sent.refused else " " + "; ".join(sent.refused)))


class InboxCmd:
    name: ClassVar[str] = "inbox"
    summary: ClassVar[str] = "what is waiting for an agent on the bus, in delivery order"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id"),)
    examples: ClassVar[tuple[str, ...]] = ("/inbox reviewer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        rows = await ctx.api.inbox(args["agent"])
        if not rows:
            return Reply.text(f"Nothing is waiting for {args['agent']}.")
        return Reply(blocks=(Text(f"{len(rows)} message(s) for {args['agent']}", "title"),
                             Text("\n".join(message_line(m) for m in rows))))


class Messages:
    name: ClassVar[str] = "messages"
    summary: ClassVar[str] = ("the last bus messages (of one agent, or all), with each "
                              "recipient's delivery state")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("agent", "agent name or id (default: all)", required=False),
        Arg("n", "how many (default 20)", required=False, kind=int, low=1, high=200),
    )
    examples: ClassVar[tuple[str, ...]] = ("/messages", "/messages reviewer 50")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        agent: str | None = args["agent"]
        n: int | None = args["n"]
        if agent is not None and agent.isdigit() and n is None:  # /messages 50
            n, agent = int(agent), None
        rows = await ctx.api.messages(agent, n or 20)
        if not rows:
            return Reply.text("No messages yet. /send puts one on the bus.")
        return Reply(blocks=(Text(f"Last {len(rows)} message(s)", "title"),
                             Text("\n".join(message_line(m) for m in rows))))


class BusCmd:
    name: ClassVar[str] = "bus"
    summary: ClassVar[str] = "the bus at a glance: queue depth per agent, deliveries by state"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = ()
    examples: ClassVar[tuple[str, ...]] = ("/bus",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        view = await ctx.api.bus_state()
        depths = ", ".join(f"{name} {n}" for name, n in view.depths) or "every inbox is empty"
        states = ", ".join(f"{n} {s}" for s, n in view.states) or "no messages yet"
        lines = [f"queued: {depths}", f"deliveries: {states}"]
        if view.reclaimed:
            lines.append(f"redelivered after the last restart: {view.reclaimed}")
        return Reply(blocks=(Text("Bus", "title"), Text("\n".join(lines))))


class TeamCmd:
    name: ClassVar[str] = "team"
    summary: ClassVar[str] = ("start a whole team from a template (/team list shows them); its "
                              "members work through the bus")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("template", "a template's name, or 'list'"),
        Opt("--prefix", "prefix", "name the members <prefix>-<member>", "P"),
        Opt("--cwd", "cwd", "one existing directory they all work in (default: a workspace "
                            "each)", "DIR"),
        Rest("prompt", "what the team should do (default: the template's example)",
             required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/team list",
                                           "/team devteam --cwd ~/src/tool add a --version flag")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        if args["template"] == "list":
            lines = [f"{t.name}: {t.summary}\n    members: "
                     + ", ".join(f"{m} ({r})" for m, r in t.members)
                     + (f"\n    example: /team {t.name} {t.example}" if t.example else "")
                     for t in ctx.api.teams()]
            return Reply(blocks=(Text("Team templates", "title"),
                                 Text("\n".join(lines) or "none")))
        started = await ctx.api.team(args["template"], args["prompt"], by=ctx.caller,
                                     prefix=args["prefix"], cwd=args["cwd"])
        names = ", ".join(f"{a.name} ({a.id})" for a in started.agents)
        return Reply.text(f"Started team {started.team}: {names}. Task: {started.prompt}")
