"""Operator management: /invite (one-time codes) and /operators (list, set role, remove)."""

from __future__ import annotations

import re
import time
from typing import Any, ClassVar

from commands.base import Arg, Context, Param, Reply, Role, Text, UsageError
from supervisor.api import INVITE_ALPHABET, INVITE_LENGTH
from supervisor.redact import MASK, SECRETS

_CODE_SHAPED = re.compile(rf"(?<![A-Za-z0-9])[{INVITE_ALPHABET}]{{{INVITE_LENGTH}}}"
                          r"(?![A-Za-z0-9])", re.IGNORECASE)


def redact_codes(text: str) -> str:
    """Text fit for the audit table: the argument of /start and anything shaped like an invite
    code (a stranger may paste one without /start) become ***."""
    return _CODE_SHAPED.sub(MASK, SECRETS(text))


class Invite:
    name: ClassVar[str] = "invite"
    summary: ClassVar[str] = "make a one-time code (valid 1 hour) that adds whoever sends it"
    role: ClassVar[Role] = Role.ADMIN
    params: ClassVar[tuple[Param, ...]] = (
        Arg("role", "viewer, operator (default) or admin", required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/invite", "/invite viewer")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        invite = await ctx.api.create_invite(args["role"] or "operator", by=ctx.caller)
        minutes = invite.ttl_s / 60
        until = time.strftime("%H:%M", time.localtime(invite.expires_at))
        return Reply(blocks=(
            Text(f"Invite code for a new {invite.role}:", "title"),
            Text(f"/start {invite.code}", "code"),
            Text(f"They send that to the bot within {minutes:.0f} minutes. It works once."),
        ), audit=f"invite code issued ({invite.role}), expires {until}")


class Operators:
    name: ClassVar[str] = "operators"
    summary: ClassVar[str] = ("list operators; '/operators role <platform:id> <role>' or "
                              "'/operators remove <platform:id>' changes them")
    role: ClassVar[Role] = Role.ADMIN
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "'role' or 'remove'", required=False),
        Arg("who", "platform:user_id, e.g. telegram:12345", required=False),
        Arg("new_role", "viewer, operator or admin", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/operators", "/operators role telegram:42 admin",
                                           "/operators remove telegram:42")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action = args["action"]
        if action is None:
            rows = await ctx.api.operators()
            if not rows:
                return Reply.text("No operators yet: /invite makes a code for one.")
            lines = [f"{r.platform}:{r.user_id} {r.name} — {r.role} (added by {r.added_by})"
                     for r in rows]
            return Reply(blocks=(Text("Operators", "title"), Text("\n".join(lines))))
        if action not in ("role", "remove"):
            raise UsageError(f"unknown action {action!r}; use 'role' or 'remove'")
        who = args["who"] or ""
        if action == "remove":
            gone = await ctx.api.remove_operator(who, by=ctx.caller)
            return Reply.text(f"Removed {who} ({gone.name}).")
        now = await ctx.api.set_role(who, args["new_role"] or "", by=ctx.caller)
        return Reply.text(f"{who} ({now.name}) is now {now.role}.")
