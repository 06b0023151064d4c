"""Operator management: /invite (one-time codes) and /operators (list, set role, remove)."""

from __future__ import annotations

import re
import secrets
import time
from typing import Any, ClassVar

from commands.base import Arg, Context, Param, Reply, Role, Text, UsageError
from supervisor.redact import MASK, SECRETS

INVITE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
INVITE_LENGTH = 10
ROLES = ("viewer", "operator", "admin")
_CODE_SHAPED = re.compile(rf"(?<![A-Za-z0-9])[{INVITE_ALPHABET}]{{{INVITE_LENGTH}}}"
                          r"(?![A-Za-z0-9])", re.IGNORECASE)


def redact_codes(text: str) -> str:
    """Text fit for the audit table: the argument of /start and anything shaped like an invite
    code (a stranger may paste one without /start) become ***."""
    return _CODE_SHAPED.sub(MASK, SECRETS(text))


def _role(word: str | None, default: str = "operator") -> str:
    role = (word or default).lower()
    if role not in ROLES:
        raise UsageError(f"unknown role {word!r}; roles are {', '.join(ROLES)}")
    return role


class Invite:
    name: ClassVar[str] = "invite"
    summary: ClassVar[str] = "make a one-time code (valid 1 hour) that adds whoever sends it"
    role: ClassVar[Role] = Role.ADMIN
    params: ClassVar[tuple[Param, ...]] = (
        Arg("role", "viewer, operator (default) or admin", required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/invite", "/invite viewer")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        role = _role(args["role"])
        code = "".join(secrets.choice(INVITE_ALPHABET) for _ in range(INVITE_LENGTH))
        SECRETS.add(code)  # shown once, to the admin; never in a log line (PTB logs at DEBUG)
        expires = await ctx.pool.store.operators.create_invite(code, role, ctx.caller.id,
                                                               ctx.settings.invite_ttl_s)
        minutes = ctx.settings.invite_ttl_s / 60
        until = time.strftime("%H:%M", time.localtime(expires))
        return Reply(blocks=(
            Text(f"Invite code for a new {role}:", "title"),
            Text(f"/start {code}", "code"),
            Text(f"They send that to the bot within {minutes:.0f} minutes. It works once."),
        ), audit=f"invite code issued ({role}), expires {until}")


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
        repo = ctx.pool.store.operators
        action = args["action"]
        if action is None:
            rows = await repo.list()
            if not rows:
                return Reply.text("No operators yet: /invite makes a code for one.")
            lines = [f"{r.platform}:{r.user_id} {r.name} — {r.role} (added by {r.added_by})"
                     for r in rows]
            return Reply(blocks=(Text("Operators", "title"), Text("\n".join(lines))))
        if action not in ("role", "remove"):
            raise UsageError(f"unknown action {action!r}; use 'role' or 'remove'")
        who = args["who"] or ""
        platform, _, user_id = who.partition(":")
        if not platform or not user_id:
            raise UsageError(f"name the operator as platform:user_id, got {who!r}")
        if f"{platform}:{user_id}" == ctx.caller.id:
            raise UsageError("you cannot change or remove yourself")
        current = await repo.get(platform, user_id)
        if current is None:
            return Reply.error(f"{who} is not an operator.", "Send /operators to list them.")
        if action == "remove":
            await repo.remove(platform, user_id)
            return Reply.text(f"Removed {who} ({current.name}).")
        role = _role(args["new_role"], "")
        await repo.upsert(platform, user_id, current.name, role, ctx.caller.id)
        return Reply.text(f"{who} ({current.name}) is now {role}.")
