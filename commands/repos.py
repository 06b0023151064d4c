"""Repository commands: /repo (add, list, remove, fetch, archives, gc), /diff, /merge."""

from __future__ import annotations

from typing import Any, ClassVar

from commands.base import Arg, Attachment, Context, Param, Reply, Role, Text, UsageError
from commands.render import ago

ACTIONS = ("add", "list", "remove", "fetch", "archives", "gc")


class RepoCmd:
    name: ClassVar[str] = "repo"
    summary: ClassVar[str] = ("repositories agents work on: add, list, remove, fetch, archives "
                              "(what GC kept of removed worktrees), gc")
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "add | list | remove | fetch | archives | gc"),
        Arg("name", "the repository's short name", required=False),
        Arg("source", "for add: a git URL (credentials from the settings) or a local path",
            required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/repo add tool https://example.com/me/tool.git",
                                           "/repo list", "/repo archives tool")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action, name, source = args["action"], args["name"], args["source"]
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if action in ("add", "remove", "fetch") and not name:
            raise UsageError(f"/repo {action} needs the repository's name")
        if action == "add":
            if not source:
                raise UsageError("/repo add needs a URL or a path after the name")
            r = await ctx.api.repos.add(name, source, by=ctx.caller)
            return Reply.text(f"Added repository {r.name} (default branch {r.default_branch}).",
                              f"Spawn agents on it with /spawn <agent> --repo {r.name} <prompt>.")
        if action == "remove":
            r = await ctx.api.repos.remove(name, by=ctx.caller)
            return Reply.text(f"Removed repository {r.name} and its bare clone.")
        if action == "fetch":
            moved = await ctx.api.repos.fetch(name, by=ctx.caller)
            return Reply.text(f"Fetched {name}: " + (f"moved {', '.join(moved)}." if moved
                                                      else "no local branch moved."))
        if action == "archives":
            return await _archives(ctx, name)
        if action == "gc":
            gc = await ctx.api.repos.gc()
            lines = [f"GC removed {len(gc.removed)} worktree(s)"
                     + (f": {', '.join(gc.removed)}" if gc.removed else ".")]
            lines += [f"  {agent}'s work kept on {ref}" for agent, ref in gc.archived]
            if gc.kept:
                lines.append("Kept (could not be archived; see the log): " + ", ".join(gc.kept))
            return Reply.text(*lines)
        return await _list(ctx)


async def _list(ctx: Context) -> Reply:
    repos = await ctx.api.repos.list()
    if not repos:
        return Reply.text("No repositories. Add one with /repo add <name> <url-or-path>.")
    blocks = [Text(f"{len(repos)} repositor{'y' if len(repos) == 1 else 'ies'}", "title")]
    for r in repos:
        blocks.append(Text(f"{r.name}: {r.url} (default {r.default_branch}, fetched "
                           f"{ago(r.fetched_at)})"))
        blocks += [Text(f"  {w.agent_name} on {w.branch} from {w.base} ({w.state})")
                   for w in r.worktrees]
    return Reply(blocks=tuple(blocks))


async def _archives(ctx: Context, name: str | None) -> Reply:
    rows = await ctx.api.repos.archives(name)
    if not rows:
        return Reply.text("No archive branches: GC has not had to keep any work.")
    return Reply(blocks=(Text(f"{len(rows)} archive branch(es)", "title"),
                         *(Text(f"{a.repo}: {a.ref} ({a.commit[:10]}, {a.agent_name}'s "
                                f"{a.reason}, {ago(a.created_at)})") for a in rows)))


class DiffCmd:
    name: ClassVar[str] = "diff"
    summary: ClassVar[str] = "what an agent changed on its branch: a summary, the diff as a file"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id"),)
    examples: ClassVar[tuple[str, ...]] = ("/diff fixer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        d = await ctx.api.repos.diff(args["agent"])
        w = d.worktree
        blocks = [Text(f"{w.agent_name}: {w.branch} against {w.base} ({w.repo})", "title"),
                  Text(d.summary or "No committed changes.", "code" if d.summary else "plain")]
        if d.uncommitted:
            blocks.append(Text(f"Uncommitted: {len(d.uncommitted)} path(s): "
                               + ", ".join(d.uncommitted[:20])))
        files = (Attachment(f"{w.agent_name}.diff", d.diff.encode()),) if d.diff else ()
        return Reply(blocks=tuple(blocks), attachments=files)


class MergeCmd:
    name: ClassVar[str] = "merge"
    summary: ClassVar[str] = "merge an agent's branch into its base when clean; a conflict is " \
                             "reported with its paths and nothing changes"
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id"),)
    examples: ClassVar[tuple[str, ...]] = ("/merge fixer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        m = await ctx.api.repos.merge(args["agent"], by=ctx.caller)
        w = m.worktree
        if m.kind == "conflict":
            return Reply(blocks=(
                Text(f"{w.branch} does not merge cleanly into {w.base}: {len(m.conflicts)} "
                     "conflicting path(s). Nothing was changed.", "error"),
                Text("\n".join(m.conflicts), "code"),
                Text(f"Ask {w.agent_name} to merge {w.base} into its branch and resolve them, "
                     "then /merge again.")), ok=False)
        if m.kind == "up to date":
            return Reply.text(f"{w.base} already has everything on {w.branch}.")
        return Reply.text(f"Merged {w.branch} into {w.base} ({m.kind}, {(m.commit or '')[:10]}).")
