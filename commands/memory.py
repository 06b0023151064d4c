"""/memory: a project's managed memory (docs/memory.md): show it, replace its curated region,
search it and what was trimmed into its archive."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Context, Param, Reply, Rest, Role, Text, UsageError

ACTIONS = ("show", "edit", "search")


class MemoryCmd:
    name: ClassVar[str] = "memory"
    summary: ClassVar[str] = ("a project's memory: show it, edit its curated region (yours), "
                              "search it and its archive")
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "show | edit | search"),
        Arg("project", "a repository's name, an agent on the project, or its directory"),
        Rest("text", "edit: the new curated region; search: the words to find",
             required=False),
    )
    examples: ClassVar[tuple[str, ...]] = (
        "/memory show tool", "/memory search tool flaky test",
        "/memory edit tool Run `make test` before pushing. The API keys live in Vault.")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action, ref, text = args["action"], args["project"], args["text"] or ""
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if action == "search":
            project, lines = await ctx.api.memory.search(ref, text)
            if not lines:
                return Reply.text(f"Nothing in {project}'s memory or archive holds {text!r}.")
            return Reply(blocks=(Text(f"{len(lines)} line(s) of {project}'s memory and archive "
                                      f"with {text!r}", "title"),
                                 Text("\n".join(lines), "code", "memory-search.txt")))
        if action == "edit":
            if ctx.caller.role < Role.OPERATOR:
                return Reply.error("/memory edit needs the operator role; you are viewer.",
                                   "Ask an admin to change your role.")
            if not text.strip():
                raise UsageError("/memory edit needs the new curated region after the project")
            view = await ctx.api.memory.edit(ref, text)
            return Reply.text(f"The curated region of {view.project} is now "
                              f"{len(view.curated.encode()):,} bytes; agents started on it from "
                              "now on get it.")
        view = await ctx.api.memory.show(ref)
        managed = "\n".join(view.managed) or "(nothing yet: a line is added at each finished "\
                                            "turn)"
        return Reply(blocks=(
            Text(f"Memory of {view.project}", "title"),
            Text("Curated (yours):", "title"),
            Text(view.curated or "(empty: /memory edit sets it)", "code", "curated.md"),
            Text(f"Managed ({len(view.managed)} line(s), {view.archived} archived):", "title"),
            Text(managed, "code", "managed.md"),
            Text(f"An agent started on it gets {len(view.slice.encode()):,} bytes of it."),
        ))
