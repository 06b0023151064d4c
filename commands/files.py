"""What agents hand out: /file fetches a file from a workspace, /results lists the results
agents reported with a confidence grade."""

from __future__ import annotations

import mimetypes
from typing import Any, ClassVar

from commands.base import (
    Arg,
    Attachment,
    Context,
    Opt,
    Param,
    Reply,
    Rest,
    Role,
    Text,
    UsageError,
)
from commands.render import ago


def size_text(n: int) -> str:
    return f"{n:,} bytes" if n < 10_000 else f"{n / 1000:,.0f} KB" if n < 10_000_000 \
        else f"{n / 1_000_000:,.1f} MB"


class FileCmd:
    name: ClassVar[str] = "file"
    summary: ClassVar[str] = "fetch a file from an agent's workspace"
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("agent", "agent name or id"),
        Rest("path", "the file, relative to the agent's workspace (links are not followed)"),
    )
    examples: ClassVar[tuple[str, ...]] = ("/file fixer report.md", "/file fixer out/diff.txt")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        wf = await ctx.api.files.read(args["agent"], args["path"])
        mime = mimetypes.guess_type(wf.name)[0] or "application/octet-stream"
        return Reply(blocks=(Text(f"📎 {wf.path} from {wf.agent.name}'s workspace "
                                  f"({size_text(len(wf.data))})."),),
                     attachments=(Attachment(wf.name, wf.data, mime),))


class ResultsCmd:
    name: ClassVar[str] = "results"
    summary: ClassVar[str] = ("recent results agents reported with a confidence grade, lowest "
                              "first")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("agent", "only this agent's (name or id)", required=False),
        Opt("--n", "n", "how many of the newest (default 20, at most 200)", "N"),
    )
    examples: ClassVar[tuple[str, ...]] = ("/results", "/results fixer", "/results --n 50")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        n = args["n"] or "20"
        if not n.isdigit() or not 1 <= int(n) <= 200:
            raise UsageError(f"--n takes a whole number from 1 to 200, not {n!r}")
        rows = await ctx.api.results.recent(args["agent"], int(n))
        if not rows:
            return Reply.text("No graded results yet: agents report them with their "
                              "report_result tool.")
        lines = []
        for r in rows:
            flag = "  ⚠️ needs review" if r.needs_review else ""
            lines.append(f"{r.confidence:>3}%  {r.agent_name}  {ago(r.at)} ago{flag}\n"
                         f"      {r.summary}")
            if r.needs_review and r.evidence:
                lines.append(f"      evidence: {r.evidence[:300]}")
        return Reply(blocks=(Text("Results, lowest confidence first", "title"),
                             Text("\n".join(lines), "code", "results.txt")))
