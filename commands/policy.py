"""/policy: the rules learned from the operator's answers, listed and taken back; and a
candidate policy (a file, or one more rule) replayed on the recorded tool calls."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Attachment, Context, Opt, Param, Reply, Rest, Role, Text, UsageError
from supervisor.api import PolicyTestView

ACTIONS = ("rules", "remove", "test")
SHOWN_CHANGES = 15  # changed calls listed in the reply; all of them go in the file


class PolicyCmd:
    name: ClassVar[str] = "policy"
    summary: ClassVar[str] = ("rules learned from your answers ('Always allow'): list them, or "
                              "take one back; test a policy file or one rule on the last days' "
                              "tool calls")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "rules | remove | test"),
        Opt("--days", "days", "for test: how many days of recorded calls to replay (default 7)",
            "N"),
        Rest("what", "for remove: the rule's number from /policy rules; for test: a policy "
                     "file's path or one rule as a TOML inline table", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = (
        "/policy rules", "/policy remove 2", "/policy test /etc/switchboard/policy.toml",
        '/policy test --days 30 {tool = "Bash", command = "npm test", action = "allow"}')

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action, what = args["action"], (args["what"] or "").strip()
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if action == "test":
            if ctx.caller.role < Role.ADMIN:
                raise UsageError("only an admin can test a policy (it reads a file on the "
                                 "supervisor's host)")
            return _tested(await ctx.api.policy.test(what, _days(args["days"])))
        if action == "remove":
            if ctx.caller.role < Role.OPERATOR:
                raise UsageError("only an operator or an admin can remove a rule")
            if not what.isdigit():
                raise UsageError("/policy remove needs the rule's number, from /policy rules")
            gone = await ctx.api.policy.remove(int(what))
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


def _days(text: str | None) -> float:
    if text is None:
        return 7.0
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--days needs a number, got {text!r}") from None


def _tested(view: PolicyTestView) -> Reply:
    def line(action: str, verb: str) -> str:
        now, then = view.now[action], view.then[action]
        return f"{verb} {then:,}" + (f" (now {now:,})" if then != now else " (same as now)")

    head = (f"Replayed {view.calls:,} tool call(s) of {view.agents} agent(s) from the last "
            f"{view.days:g} day(s) against {view.source}: it would "
            f"{line('allow', 'allow')}, {line('ask', 'ask')}, {line('deny', 'deny')}.")
    if not view.calls:
        return Reply.text(head, "Nothing was recorded in that time: try more --days.")
    if not view.changed:
        return Reply.text(head, "No call would be decided differently.")
    rows = [f"{c.agent}: {c.call}: {c.now} -> {c.then}" for c in view.changed]
    blocks = [Text(head), Text(f"{len(rows):,} call(s) change:", "title"),
              Text("\n".join(rows[:SHOWN_CHANGES]), "code")]
    files: tuple[Attachment, ...] = ()
    if len(rows) > SHOWN_CHANGES:
        blocks.append(Text(f"... and {len(rows) - SHOWN_CHANGES:,} more: all of them are in "
                           "policy-test.txt"))
        files = (Attachment("policy-test.txt", ("\n".join(rows) + "\n").encode()),)
    return Reply(blocks=tuple(blocks), attachments=files)
