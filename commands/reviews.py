"""Reviewer agents' decisions for the operator: /reviews lists them, /overturn overrules one
(docs/reviewers.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Context, Opt, Param, Reply, Rest, Role, Text, UsageError
from commands.render import ago

OUTCOMES = {"open": "⏳ with the reviewer", "allow": "✅ allowed",
            "allow_session": "🔁 allowed for the session", "deny": "❌ denied",
            "answer": "💬 answered", "handed_over": "↗ handed to the operator",
            "cancelled": "✖ cancelled"}


class ReviewsCmd:
    name: ClassVar[str] = "reviews"
    summary: ClassVar[str] = ("requests reviewer agents settled or were offered, newest first, "
                              "with their reasoning")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Opt("--n", "n", "how many of the newest (default 20, at most 200)", "N"),
    )
    examples: ClassVar[tuple[str, ...]] = ("/reviews", "/reviews --n 50")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        n = args["n"] or "20"
        if not n.isdigit() or not 1 <= int(n) <= 200:
            raise UsageError(f"--n takes a whole number from 1 to 200, not {n!r}")
        rows = await ctx.api.reviews.recent(int(n))
        if not rows:
            return Reply.text("No reviews yet: an agent spawned with a charter that has a "
                              "Reviews: section settles the requests it covers.")
        lines = []
        for r in rows:
            over = f"  ↩ overturned by {r.overturned_by}" if r.overturned_by else ""
            first = r.summary.splitlines()[0] if r.summary else ""
            lines.append(f"{r.id}  {r.reviewer_name} on {r.agent_name}'s {r.kind}: "
                         f"{OUTCOMES.get(r.status, r.status)}{over}  ({ago(r.at)} ago)\n"
                         f"      {first[:200]}")
            if r.status == "answer":
                lines.append(f"      answer: {r.answer[:300]}")
            if r.reasoning:
                lines.append(f"      reasoning: {r.reasoning[:500]}")
            elif r.answer and r.status == "handed_over":
                lines.append(f"      why: {r.answer[:300]}")
        return Reply(blocks=(Text("Reviewer decisions, newest first (/overturn <id>)", "title"),
                             Text("\n".join(lines), "code", "reviews.txt")))


class OverturnCmd:
    name: ClassVar[str] = "overturn"
    summary: ClassVar[str] = ("overrule a reviewer agent's decision: take an open review, "
                              "allow what it denied, revoke what it allowed, answer instead")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("id", "the review id (from its notice or /reviews)"),
        Rest("answer", "for a question: your answer, which the agent gets", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/overturn rk3m", "/overturn rq7a use the staging db")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        done = await ctx.api.reviews.overturn(args["id"], by=ctx.caller,
                                              text=args["answer"] or "")
        r = done.review
        return Reply.text(f"Overturned {r.reviewer_name}'s decision on {r.agent_name}'s "
                          f"{r.kind} ({r.id}): {done.done}")
