"""/policy: the rules learned from the operator's answers, listed and taken back."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Context, Param, Reply, Role, Text, UsageError

ACTIONS = ("rules", "remove")


class PolicyCmd:
    name: ClassVar[str] = "policy"
    summary: ClassVar[str] = ("rules learned from your answers ('Always allow'): list them, or "
                              "take one back")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "rules | remove"),
        Arg("number", "for remove: the rule's number from /policy rules", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/policy rules", "/policy remove 2")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action, number = args["action"], args["number"]
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if action == "remove":
            if ctx.caller.role < Role.OPERATOR:
                raise UsageError("only an operator or an admin can remove a rule")
            if not number or not number.isdigit():
                raise UsageError("/policy remove needs the rule's number, from /policy rules")
            gone = await ctx.api.policy.remove(int(number))
            return Reply.text(f"Removed learned rule {gone.id}: {gone.words}.",
                              "That call asks you again from now on.")
        rules = ctx.api.policy.rules()
        if not rules:
            return Reply.text("No learned rules. After you allow the same call of an agent "
                              "three times in a row, its next request offers ♾ Always allow.")
        blocks = [Text(f"{len(rules)} learned rule(s), in {ctx.api.policy.file}", "title")]
        blocks += [Text(f"{r.id}. {r.words}\n   added by {r.by} via {r.via}, {r.at}, after "
                        f"{r.approvals} approvals") for r in rules]
        blocks.append(Text("Take one back with /policy remove <number>."))
        return Reply(blocks=tuple(blocks))
