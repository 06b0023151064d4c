"""Escalation commands: pending, approve, deny, answer."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Button, Context, Param, Reply, Rest, Role, Text, UsageError
from commands.render import ago
from store.escalations import EscalationRow
from supervisor.escalations import Answer, Decision, Kind


def escalation_buttons(row: EscalationRow) -> tuple[Button, ...]:
    if row.kind == Kind.PERMISSION:
        return (
            Button("✅ Allow", f"/approve {row.id}"),
            Button("❌ Deny", f"/deny {row.id}"),
            Button("🔁 Allow for session", f"/approve {row.id} session"),
        )
    return tuple(Button(opt[:40], f"/answer {row.id} {i}") for i, opt in
                 enumerate(row.options[:8], start=1))


def detail_filename(row: EscalationRow) -> str:
    """The name of the file holding an escalation's complete detail, unique per escalation."""
    return f"{row.id}-{row.detail_name or 'detail.txt'}"


def escalation_blocks(row: EscalationRow) -> tuple[Text, ...]:
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
        lines.append(f"Answer: /approve {row.id} [session] or /deny {row.id} [reason]")
    elif row.kind != Kind.NOTICE:
        lines.append(f"Answer: /answer {row.id} <option number or text>")
    if lines:
        blocks.append(Text("\n".join(lines)))
    return tuple(blocks)


def _answer(ctx: Context, decision: Decision, text: str = "") -> Answer:
    return Answer(decision, text, ctx.caller.name, ctx.caller.platform)


class Pending:
    name: ClassVar[str] = "pending"
    summary: ClassVar[str] = "open questions and permission requests of every agent, oldest first"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = ()
    examples: ClassVar[tuple[str, ...]] = ("/pending",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        rows = await ctx.pool.escalations.pending()
        if not rows:
            return Reply.text("Nothing is waiting for you.")
        blocks = [Text(f"{len(rows)} waiting", "title")]
        blocks += [b for r in rows[:30] for b in escalation_blocks(r)]
        return Reply(blocks=tuple(blocks),
                     buttons=tuple(escalation_buttons(r) for r in rows[:10]))


class Approve:
    name: ClassVar[str] = "approve"
    summary: ClassVar[str] = ("allow a permission request once, or for the agent's session; "
                              "'/approve all <agent>' approves all of one agent's requests")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("id", "the request id from the message or /pending, or 'all'"),
        Rest("scope", "'session' to allow the same call for the rest of the session "
                      "(after 'all': the agent, then optionally 'session')", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/approve ab3k", "/approve ab3k session",
                                           "/approve all fixer")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        words = (args["scope"] or "").split()
        if args["id"] == "all":
            if not words:
                raise UsageError("after 'all' name the agent whose requests to approve")
            runner = await ctx.pool.get(words[0])
            session = words[1:] == ["session"]
            if words[1:] and not session:
                raise UsageError(f"expected 'session' after the agent, got {' '.join(words[1:])!r}")
            rows = [r for r in await ctx.pool.escalations.pending(runner.id)
                    if r.kind == Kind.PERMISSION]
            if not rows:
                return Reply.text(f"{runner.name} has no open permission requests.")
            decision = Decision.ALLOW_SESSION if session else Decision.ALLOW
            for row in rows:
                await ctx.pool.escalations.answer(row.id, _answer(ctx, decision))
            return Reply.text(f"Approved {len(rows)} request(s) of {runner.name}: "
                              + ", ".join(r.id for r in rows))
        if words not in ([], ["session"]):
            raise UsageError(f"expected nothing or 'session' after the id, got {' '.join(words)!r}")
        row = await ctx.pool.escalations.get(args["id"])
        if row is not None and row.kind != Kind.PERMISSION and row.status == "open":
            raise UsageError(f"{row.id} is a question, not a permission request: use "
                             f"/answer {row.id} <text>")
        decision = Decision.ALLOW_SESSION if words else Decision.ALLOW
        done = await ctx.pool.escalations.answer(args["id"], _answer(ctx, decision))
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
        done = await ctx.pool.escalations.answer(args["id"], _answer(ctx, Decision.DENY, reason))
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
        esc = ctx.pool.escalations
        row = await esc.get(args["id"])
        text = args["text"]
        if row is not None and row.status == "open":
            if row.kind == Kind.PERMISSION:
                raise UsageError(f"{row.id} is a permission request: use /approve {row.id} or "
                                 f"/deny {row.id} [reason]")
            if text.isdigit() and row.options:
                index = int(text)
                if not 1 <= index <= len(row.options):
                    raise UsageError(f"option {index} does not exist; pick 1 to "
                                     f"{len(row.options)} or type an answer")
                text = row.options[index - 1]
            elif row.options and not row.free_text and text not in row.options:
                raise UsageError("pick one of: " + ", ".join(row.options))
        done = await esc.answer(args["id"], _answer(ctx, Decision.ANSWER, text))
        return Reply.text(f"Answered {done.id}: {text}")
