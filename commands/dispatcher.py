"""The command registry, /help, and the one dispatcher that turns every error into a reply."""

from __future__ import annotations

import difflib
import logging
import secrets
from typing import Any, ClassVar

from commands.agents import Agents, Ask, Cost, Kill, Logs, Pause, Resume, Spawn, Status, Stop
from commands.approvals import AnswerCmd, Approve, Deny, Pending
from commands.base import (
    Arg,
    Command,
    Context,
    Param,
    Reply,
    Role,
    Text,
    parse_args,
    usage_line,
)
from commands.bus import BusCmd, InboxCmd, Messages, Send, TeamCmd
from commands.files import FileCmd, ResultsCmd
from commands.killswitch import KillAll, KillSwitchCmd
from commands.memory import MemoryCmd
from commands.operators import Invite, Operators, redact_codes
from commands.policy import PolicyCmd
from commands.record import AuditCmd, SearchCmd
from commands.repos import DiffCmd, MergeCmd, RepoCmd
from commands.reviews import OverturnCmd, ReviewsCmd
from commands.schedules import CronCmd, RemindCmd
from commands.web import TokenCmd, WebCmd
from supervisor.api import SupervisorError
from supervisor.redact import MASK
from supervisor.sanitize import MAX_INPUT_CHARS, TOO_LONG_FIX, clean, piece, too_long

logger = logging.getLogger(__name__)

MAX_COMMAND_CHARS = MAX_INPUT_CHARS  # the sanitiser's bound (supervisor/sanitize.py)
TEXT_ACTION = "text"  # the audit action of a message that is not a command
AUDIT_TEXT_CHARS = 500
# Not commands here, but typed as ones: what follows /start is an invite code, never audited.
SECRET_ARGS = frozenset({"start"})


class Help:
    name: ClassVar[str] = "help"
    summary: ClassVar[str] = "list the commands, or explain one"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (Arg("command", "a command name", required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/help", "/help spawn")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        wanted = (args["command"] or "").lstrip("/")
        if wanted:
            cmd = COMMANDS.get(wanted)
            if cmd is None:
                close = difflib.get_close_matches(wanted, COMMANDS, n=1, cutoff=0.6)
                return Reply.error(f"There is no command /{wanted}.",
                                   (f"Did you mean /{close[0]}? " if close else "")
                                   + "Send /help for the list of commands.")
            return Reply(blocks=(Text(describe(cmd), "code"),))
        lines = [f"{usage_line(c.name, c.params)}\n    {c.summary}" for c in REGISTRY]
        return Reply(blocks=(Text("Switchboard commands", "title"), Text("\n".join(lines), "code"),
                             Text("Send /help <command> for details and examples.")))


def describe(cmd: Command) -> str:
    lines = [f"Usage: {usage_line(cmd.name, cmd.params)}", cmd.summary]
    for p in cmd.params:
        label = getattr(p, "flag", None) or f"<{p.name}>"
        lines.append(f"  {label}: {p.help}")
    if cmd.examples:
        lines.append("Examples: " + "  ".join(cmd.examples))
    lines.append(f"Needs role: {cmd.role.name.lower()}")
    return "\n".join(lines)


REGISTRY: tuple[Command, ...] = (
    Spawn(), Agents(), Status(), Ask(), Pause(), Resume(), Stop(), Kill(), Logs(), Cost(),
    Pending(), Approve(), Deny(), AnswerCmd(), KillAll(), KillSwitchCmd(), Invite(), Operators(),
    Send(), InboxCmd(), Messages(), BusCmd(), TeamCmd(), CronCmd(), RemindCmd(),
    RepoCmd(), DiffCmd(), MergeCmd(), PolicyCmd(), AuditCmd(), SearchCmd(), FileCmd(),
    ResultsCmd(), MemoryCmd(), WebCmd(), TokenCmd(), ReviewsCmd(), OverturnCmd(),
    Help(),
)
COMMANDS: dict[str, Command] = {c.name: c for c in REGISTRY}


def _error_reply(exc: BaseException, cmd: Command) -> Reply:
    """Every error as text: a supervisor error says what went wrong and what to do (a
    request of the wrong form, with the command's usage); anything else is a bug, logged
    under a ref the operator can quote."""
    if isinstance(exc, SupervisorError):
        if exc.usage:
            return Reply.error(f"/{cmd.name}: {exc.what}.",
                               f"Usage: {usage_line(cmd.name, cmd.params)}")
        return Reply.error(exc.what, exc.fix)
    ref = secrets.token_hex(3)
    logger.error("command failed ref=%s", ref, exc_info=exc)
    return Reply.error(f"Something went wrong inside Switchboard (ref {ref}).",
                       "The details are in the log under that ref; the command may be retried.")


def split_command(text: str) -> tuple[str, str]:
    # Split at the first whitespace of any kind (space, newline, tab); the rest is kept as is.
    head, *tail = text.strip().split(maxsplit=1) or [""]
    rest = tail[0] if tail else ""
    name = head.lstrip("/").split("@", 1)[0].lower()  # Telegram appends @botname in groups
    return name, rest


class Dispatcher:
    def __init__(self, registry: tuple[Command, ...] = REGISTRY) -> None:
        self.commands = {c.name: c for c in registry}

    async def dispatch(self, ctx: Context, line: str) -> Reply:
        """`line` as a front end cleaned it (a `CleanText`, passed through), or as a caller
        that cleaned nothing sent it (cleaned here, the same one way)."""
        cleaned = clean(line)
        if cleaned.problem:
            reply = Reply.error(too_long(len(line), MAX_COMMAND_CHARS), TOO_LONG_FIX)
            await self._audit(ctx, TEXT_ACTION, f"{len(line):,} characters", reply)
            return reply
        text = cleaned.text
        if not text.strip().startswith("/"):
            reply = Reply.error("Commands start with '/'.",
                                "For example /agents, or /help for the list.")
            # Audited like any command (an invite code pasted bare is masked).
            await self._audit(ctx, TEXT_ACTION, redact_codes(text.strip())[:AUDIT_TEXT_CHARS],
                              reply)
            return reply
        name, rest = split_command(text)
        cmd = self.commands.get(name)
        if cmd is None:
            reply = Reply.error(f"Unknown command /{name}.", self._suggest(name))
            await self._audit(ctx, name, rest, reply)
            return reply
        if ctx.caller.role < cmd.role:
            reply = Reply.error(
                f"/{name} needs the {cmd.role.name.lower()} role; you are "
                f"{ctx.caller.role.name.lower()}.", "Ask an admin to change your role.")
            await self._audit(ctx, name, rest, reply)
            return reply
        try:
            if name != "killall":  # the kill switch is never rate limited
                ctx.api.admit_command(ctx.caller)
            args = parse_args(cmd.params, piece(text, rest))
            reply = await cmd.execute(ctx, args)
        except Exception as exc:  # noqa: BLE001 - every error becomes a reply, in one place
            reply = _error_reply(exc, cmd)
        await self._audit(ctx, name, rest, reply)
        return reply

    def _suggest(self, name: str) -> str:
        """What to send instead of a mistyped command: the closest name, if one is close."""
        close = difflib.get_close_matches(name, self.commands, n=1, cutoff=0.6)
        if close:
            return f"Did you mean /{close[0]}? Send /help for the list of commands."
        return "Send /help for the list of commands."

    async def _audit(self, ctx: Context, name: str, rest: str, reply: Reply) -> None:
        if name in SECRET_ARGS and rest:
            rest = MASK
        result = reply.audit if reply.audit is not None else reply.plain()[:500]
        await ctx.api.audit(ctx.caller, name, rest, ok=reply.ok, result=result)
