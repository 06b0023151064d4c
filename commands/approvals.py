"""Escalation commands: pending, approve, deny, answer."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Button, Context, Param, Reply, Rest, Role, Text, UsageError
from commands.render import ago
from supervisor.api import ALWAYS_ALLOW, EscalationView, Kind


def escalation_buttons(row: EscalationView) -> tuple[Button, ...]:
    if row.kind == Kind.PERMISSION:
        buttons: tuple[Button, ...] = (
            Button("✅ Allow", f"/approve {row.id}"),
            Button("❌ Deny", f"/deny {row.id}"),
            Button("🔁 Allow for session", f"/approve {row.id} session"),
        )
        if ALWAYS_ALLOW in row.options:  # a rule learned from answers is offered
            buttons += (Button(f"♾ {ALWAYS_ALLOW}", f"/approve {row.id} always"),)
        return buttons
    return tuple(Button(opt[:40], f"/answer {row.id} {i}") for i, opt in
                 enumerate(row.options[:8], start=1))


def detail_filename(row: EscalationView) -> str:
    """The name of the file holding an escalation's complete detail, unique per escalation."""
    return f"{row.id}-{row.detail_name or 'detail.txt'}"


def escalation_blocks(row: EscalationView) -> tuple[Text, ...]:
    """The escalation as blocks: what and why first, then the complete detail (a block with a
    filename, which front ends show whole or attach), then how to answer."""
    head = f"{row.id} · {row.title} · {ago(row.created_at)} ago"
    blocks = [Text("\n".join(p for p in (head, row.body) if p))]
    if row.detail:
        blocks.append(Text(row.detail, "code", detail_filename(row)))
    lines = []
    if row.options and row.kind != Kind.PERMISSION:
        lines.append("Options: " + "; ".join(f"{i}. {o}" for i, o in
                                              enumerate(row.options, start=1)))
    if row.kind == Kind.PERMISSION:
        scopes = "session|always" if ALWAYS_ALLOW in row.options else "session"
        lines.append(f"Answer: /approve {row.id} [{scopes}] or /deny {row.id} [reason]")
    elif row.kind != Kind.NOTICE:
        lines.append(f"Answer: /answer {row.id} <option number or text>")
    if lines:
        blocks.append(Text("\n".join(lines)))
    return tuple(blocks)


class Pending:
    name: ClassVar[str] = "pending"
    summary: ClassVar[str] = "open questions and permission requests of every agent, oldest first"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = ()
    examples: ClassVar[tuple[str, ...]] = ("/pending",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        rows = await ctx.api.pending()
        if not rows:
            return Reply.text("Nothing is waiting for you.")
        blocks = [Text(f"{len(rows)} waiting", "title")]
        blocks += [b for r in rows[:30] for b in escalation_blocks(r)]
        # Several requests of one agent for one tool: one tap answers them all.
        groups = tuple((Button(f"✅ All {n} of {name}'s {tool}",
                               f"/approve all {name} {tool}"),)
                       for name, tool, n in await ctx.api.pending_groups())
        return Reply(blocks=tuple(blocks),
                     buttons=groups + tuple(escalation_buttons(r) for r in rows[:10]))


class Approve:
    name: ClassVar[str] = "approve"
    summary: ClassVar[str] = ("allow a permission request once, or for the agent's session; "
                              "'/approve all <agent>' approves all of one agent's requests")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("id", "the request id from the message or /pending, or 'all'"),
        Rest("scope", "'session' to allow the same call for the rest of the session; "
                      "'always' to add the rule the request offers (admins; offered after "
                      "the same call was allowed three times in a row) (after 'all': the "
                      "agent, then optionally a tool name and 'session')", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/approve ab3k", "/approve ab3k session",
                                           "/approve ab3k always", "/approve all fixer",
                                           "/approve all fixer Bash")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        words = (args["scope"] or "").split()
        if args["id"] == "all":
            if not words:
                raise UsageError("after 'all' name the agent whose requests to approve")
            rest = words[1:]
            session = rest[-1:] == ["session"]
            rest = rest[:-1] if session else rest
            if len(rest) > 1:
                raise UsageError("after the agent, expected a tool name and/or 'session', got "
                                 f"{' '.join(words[1:])!r}")
            tool = rest[0] if rest else None
            approved = await ctx.api.approve_all(words[0], by=ctx.caller, session=session,
                                                 tool=tool)
            rows, name = approved.escalations, approved.agent.name
            what = f"{tool} " if tool else ""
            if not rows:
                return Reply.text(f"{name} has no open {what}permission requests.")
            return Reply.text(f"Approved {len(rows)} {what}request(s) of {name}: "
                              + ", ".join(r.id for r in rows))
        if words not in ([], ["session"], ["always"]):
            raise UsageError("expected nothing, 'session' or 'always' after the id, got "
                             f"{' '.join(words)!r}")
        if words == ["always"]:
            if ctx.caller.role < Role.ADMIN:
                raise UsageError("only an admin can add a rule to the policy; "
                                 f"/approve {args['id']} allows this call once")
            done = await ctx.api.approve(args["id"], by=ctx.caller, always=True)
            answer = done.answer or {}
            return Reply.text(f"Allowed: {done.title} ({done.id}), and from now on without "
                              f"asking: {str(answer.get('text') or '')}.",
                              "/policy rules lists the learned rules; /policy remove <n> "
                              "takes one back.")
        done = await ctx.api.approve(args["id"], by=ctx.caller, session=bool(words))
        scope = " for the rest of the session" if words else " once"
        return Reply.text(f"Allowed{scope}: {done.title} ({done.id}).")


class Deny:
    name: ClassVar[str] = "deny"
    summary: ClassVar[str] = "deny a permission request; the reason goes back to the agent"
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("id", "the request id"),
        Rest("reason", "why (the model reads it)", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/deny ab3k", "/deny ab3k use the staging bucket")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        reason = args["reason"] or ""
        done = await ctx.api.deny(args["id"], by=ctx.caller, reason=reason)
        why = f" Reason sent to the agent: {reason}" if reason else ""
        return Reply.text(f"Denied: {done.title} ({done.id}).{why}")


class AnswerCmd:
    name: ClassVar[str] = "answer"
    summary: ClassVar[str] = "answer an agent's question with an option number or free text"
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (Arg("id", "the question id"),
                                           Rest("text", "an option number, or your answer"))
    examples: ClassVar[tuple[str, ...]] = ("/answer k2mz 1", "/answer k2mz use port 8080")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        done = await ctx.api.answer(args["id"], args["text"], by=ctx.caller)
        return Reply.text(f"Answered {done.id}: {(done.answer or {}).get('text', '')}")
