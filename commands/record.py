"""The record from chat: /audit (who did what) and /search (plain words over bus messages,
turns and the audit), each match a short line, the whole text as a file."""

from __future__ import annotations

import re
import time
from typing import Any, ClassVar

from commands.base import Arg, Attachment, Context, Param, Reply, Rest, Role, Text, UsageError
from supervisor.api import AuditView, SearchView

SHOWN = 20  # lines in the reply; every match is in the file
_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")
_UNIT_DAYS = {"m": 1 / 1440, "h": 1 / 24, "d": 1.0, "w": 7.0}


def span_days(text: str) -> float | None:
    """'30m', '12h', '3d', '2w' as days; None if `text` is not a span."""
    m = _SPAN.match(text.strip().lower())
    return float(m.group(1)) * _UNIT_DAYS[m.group(2)] if m else None


def _when(at: float) -> str:
    return time.strftime("%a %H:%M", time.localtime(at))


def _span_words(days: float) -> str:
    return f"{days * 24:g} hour(s)" if days < 1 else f"{days:g} day(s)"


class AuditCmd:
    name: ClassVar[str] = "audit"
    summary: ClassVar[str] = ("who did what: operator actions of the last days, of one operator "
                              "or naming one agent")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("who", "an operator's name or an agent's (optional)", required=False),
        Arg("since", "how far back: 30m, 12h, 3d, 2w (default 7d)", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/audit", "/audit dev", "/audit alice 2d",
                                           "/audit 12h")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        who, since = args["who"], args["since"]
        if who and since is None and span_days(who) is not None:
            who, since = None, who
        days = 7.0
        if since is not None:
            found = span_days(since)
            if found is None:
                raise UsageError(f"{since!r} is not a time span: use 30m, 12h, 3d or 2w")
            days = found
        rows = await ctx.api.record.audit(who, days)
        about = f" of or about {who}" if who else ""
        if not rows:
            return Reply.text(f"No operator actions{about} in the last {_span_words(days)}.")
        lines = [_audit_line(r) for r in rows]
        blocks = [Text(f"{len(rows)} action(s){about} in the last {_span_words(days)}, newest "
                       "first", "title"), Text("\n".join(lines[:SHOWN]), "code")]
        files: tuple[Attachment, ...] = ()
        if len(lines) > SHOWN:
            blocks.append(Text(f"... and {len(lines) - SHOWN} more: all of them are in audit.txt"))
            files = (Attachment("audit.txt", ("\n".join(
                f"{_audit_line(r)}\n    {r.result}" for r in rows) + "\n").encode()),)
        return Reply(blocks=tuple(blocks), attachments=files)


def _audit_line(r: AuditView) -> str:
    mark = "✓" if r.ok else "✗"
    args = " ".join(r.args.split())
    return (f"{_when(r.at)} {r.user_name or r.user_id} ({r.platform}) {mark} /{r.action}"
            + (f" {args[:80]}" if args else ""))


class SearchCmd:
    name: ClassVar[str] = "search"
    summary: ClassVar[str] = ("find words in bus messages, turns' prompts and results, and the "
                              "audit, of the last days")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Rest("words", "every word must be there (any case); start with a span such as 3d to "
                      "look further back than 7 days"),
    )
    examples: ClassVar[tuple[str, ...]] = ("/search flaky login", "/search 30d staging deploy")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        words = args["words"].split()
        days = 7.0
        if words and (found := span_days(words[0])) is not None:
            days, words = found, words[1:]
        if not words:
            raise UsageError("give the words to look for after the span: /search 3d <words>")
        return _found(await ctx.api.record.search(" ".join(words), days))


def _found(view: SearchView) -> Reply:
    quoted = " ".join(view.words)
    span = _span_words(view.days)
    if not view.hits:
        return Reply.text(f"Nothing holds {quoted!r} in the last {span}.",
                          "Try fewer words, or look further back: /search 30d <words>.")
    lines = [f"{_when(h.at)} {h.ref} · {h.who}: {h.snippet}" for h in view.hits]
    blocks = [Text(f"{len(lines)} match(es) for {quoted!r} in the last {span}, newest first",
                   "title"), Text("\n".join(lines[:SHOWN]), "code")]
    if len(lines) > SHOWN:
        blocks.append(Text(f"... and {len(lines) - SHOWN} more."))
    blocks.append(Text("The whole text of each is in search.txt."))
    whole = "\n\n".join(f"== {_when(h.at)} {h.ref} · {h.who}\n{h.text}" for h in view.hits)
    return Reply(blocks=tuple(blocks),
                 attachments=(Attachment("search.txt", (whole + "\n").encode()),))
