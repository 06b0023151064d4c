"""The web console from chat: /web (a one-time sign-in link) and /token (the HTTP API's
per-operator tokens: issue, list, revoke)."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Context, Param, Reply, Rest, Role, Text, UsageError
from commands.render import ago
from supervisor.api.web import LINK_TTL_S

NO_LISTENER = ("The web console is off: Switchboard has no HTTP listener.",
               "Set SWITCHBOARD_HTTP_PORT (e.g. 8080) and restart; see docs/web.md.")


class WebCmd:
    name: ClassVar[str] = "web"
    summary: ClassVar[str] = "a one-time link that signs you in to the web console"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = ()
    examples: ClassVar[tuple[str, ...]] = ("/web",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        base = ctx.api.web.url
        if base is None:
            return Reply.error(*NO_LISTENER)
        link = await ctx.api.web.link(ctx.caller)
        minutes = LINK_TTL_S / 60
        return Reply(blocks=(
            Text("Sign in to the web console:", "title"),
            Text(f"{base}/signin/{link.token}", "code"),
            Text(f"It works once, for {minutes:.0f} minutes, and signs in as you "
                 f"({ctx.caller.role.name.lower()}). Do not forward it."),
        ), audit="sign-in link issued")


class TokenCmd:
    name: ClassVar[str] = "token"
    summary: ClassVar[str] = ("HTTP API tokens: '/token new <label>', '/token list', "
                              "'/token revoke <id>'")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "new, list (default) or revoke", required=False),
        Rest("what", "new: a label saying what uses it; revoke: the token's id",
             required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/token new deploy-script", "/token list",
                                           "/token revoke t-1a2b3c4d")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action = (args["action"] or "list").lower()
        what = (args["what"] or "").strip()
        admin = ctx.caller.role >= Role.ADMIN
        if action == "new":
            token = await ctx.api.web.issue_token(ctx.caller, what)
            return Reply(blocks=(
                Text(f"API token {token.id} ({token.label}), acting as you "
                     f"({ctx.caller.role.name.lower()}):", "title"),
                Text(token.secret, "code"),
                Text("Send it as 'Authorization: Bearer <token>'. It is shown only now; "
                     f"'/token revoke {token.id}' ends it, and so does the kill switch."),
            ), audit=f"API token {token.id} issued ({token.label})")
        if action == "list":
            rows = await ctx.api.web.tokens(None if admin else ctx.caller.id)
            if not rows:
                return Reply.text("No live API tokens. '/token new <label>' makes one.")
            lines = [f"{r.id} {r.label} — {r.operator}, " + (
                f"last used {ago(r.last_seen)} ago" if r.last_seen else "never used")
                for r in rows]
            return Reply(blocks=(Text("API tokens", "title"), Text("\n".join(lines))))
        if action == "revoke":
            if not what:
                raise UsageError("name the token to revoke, e.g. /token revoke t-1a2b3c4d")
            gone = await ctx.api.web.revoke_token(what.split()[0], by=ctx.caller, admin=admin)
            return Reply.text(f"Revoked API token {gone.id} ({gone.label}) of {gone.operator}.")
        raise UsageError(f"unknown action {action!r}; use new, list or revoke")
