"""Files out of agents' workspaces: /file fetches one for the operator."""

from __future__ import annotations

import mimetypes
from typing import Any, ClassVar

from commands.base import Arg, Attachment, Context, Param, Reply, Rest, Role, Text


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
