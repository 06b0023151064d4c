"""Agent commands: spawn, list, status, ask, pause, resume, stop, kill, logs, cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from commands.base import Arg, Button, Context, Opt, Param, Reply, Rest, Role, Text, UsageError
from commands.render import agent_line, ago, hosts_text, killswitch_line, money, snapshot_line
from supervisor.api import AgentState, AgentView


def project_config_summary(cwd: str) -> str:
    """What a directory's own Claude Code configuration would make an agent run or load."""
    root = Path(cwd)
    found = []
    for rel in (".claude/settings.json", ".claude/settings.local.json"):
        p = root / rel
        try:
            data = json.loads(p.read_text()) if p.is_file() else None
        except (OSError, ValueError):
            found.append(f"{rel} (unreadable)")
            continue
        if isinstance(data, dict):
            hooks = data.get("hooks") or {}
            names = ", ".join(sorted(hooks)) if isinstance(hooks, dict) else "?"
            found.append(f"{rel} (hooks: {names or 'none'})")
    for rel in (".mcp.json", "CLAUDE.md", ".claude/agents", ".claude/commands"):
        if (root / rel).exists():
            found.append(rel)
    return "; ".join(found) if found else "none found yet"


def agent_buttons(r: AgentView) -> tuple[Button, ...]:
    pause = (Button("▶ Resume", f"/resume {r.id}") if r.state == AgentState.PAUSED
             else Button("⏸ Pause", f"/pause {r.id}"))
    return (
        Button("ℹ Status", f"/status {r.id}"),
        Button("📜 Logs", f"/logs {r.id}"),
        pause,
        Button("⏹ Stop", f"/stop {r.id}", confirm=True),
        Button("💀 Kill", f"/kill {r.id}", confirm=True),
    )


class Spawn:
    name: ClassVar[str] = "spawn"
    summary: ClassVar[str] = "start a new agent with a first prompt"
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Arg("name", "a short name: a letter, then letters, digits, '.', '_' or '-'"),
        Opt("--model", "model", "model alias or id, e.g. sonnet", "M"),
        Opt("--cwd", "cwd", "an existing directory to work in (default: a fresh workspace)", "DIR"),
        Opt("--parent", "parent", "make it a child of this agent", "AGENT"),
        Opt("--mode", "mode", "permission mode, e.g. default, acceptEdits, plan", "MODE"),
        Opt("--role", "role", "its role on the bus: messages to role:<role> reach it", "ROLE"),
        Opt("--host", "host", "run it on a worker of this host (several hosts on one "
            "database; default: the worker with the most room)", "HOST"),
        Opt("--charter", "charter",
            "make it a standing agent with this charter (quoted text, or @file): goal, "
            "authority, what needs approval, what not to do, when to escalate", "TEXT|@FILE"),
        Opt("--repo", "repo", "work in a new worktree of this registered repository, on branch "
            "agent/<name>", "REPO"),
        Opt("--base", "base", "with --repo: the branch to start from (default: the "
            "repository's default branch)", "BRANCH"),
        Opt("--project-settings", "project_settings",
            "let the agent load the directory's own .claude settings, hooks, MCP servers and "
            "CLAUDE.md (off by default: they could run commands the policy never sees)",
            switch=True),
        Rest("prompt", "what the agent should do"),
    )
    examples: ClassVar[tuple[str, ...]] = (
        "/spawn fixer --model sonnet fix the failing tests",
        '/spawn triage --charter @charters/triage.md check the new issues',
    )

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        if args["repo"]:
            if args["cwd"]:
                raise UsageError("--repo and --cwd exclude each other: the worktree is the cwd")
            if args["host"]:
                raise UsageError("--repo runs the agent on this host (its worktree is here): "
                                 "drop --host")
            r, wt = await ctx.api.repos.spawn(
                args["name"], args["prompt"], repo=args["repo"], base=args["base"],
                by=ctx.caller, model=args["model"], parent=args["parent"],
                permission_mode=args["mode"], project_settings=bool(args["project_settings"]),
                role=args["role"], charter=args["charter"])
            where = f"a worktree of {wt.repo} on {wt.branch} (from {wt.base}): {r.cwd}"
        elif args["base"]:
            raise UsageError("--base needs --repo")
        else:
            r = await ctx.api.spawn(
                args["name"], args["prompt"], by=ctx.caller, model=args["model"],
                cwd=args["cwd"], parent=args["parent"], permission_mode=args["mode"],
                project_settings=bool(args["project_settings"]), role=args["role"],
                charter=args["charter"], host=args["host"],
            )
            where = r.cwd or "a fresh workspace on the worker it was placed on"
        blocks = [Text(f"Spawned {r.name} ({r.id}) in {where}")]
        if args["charter"] is not None:
            blocks.append(Text("It is a standing agent: its charter is part of its system "
                               "prompt, it has no session TTL, and every irreversible step "
                               "(push, merge, deploy, delete, paid APIs) waits for you."))
        if r.project_settings:
            blocks.append(Text("⚠ It loads the directory's own settings: "
                               + project_config_summary(r.cwd)))
        return Reply(
            blocks=tuple(blocks),
            buttons=(agent_buttons(r),),
        )


class Agents:
    name: ClassVar[str] = "agents"
    summary: ClassVar[str] = "list agents (add 'all' to include stopped, failed and killed ones)"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (Arg("which", "'all' to include ended agents",
                                                required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/agents", "/agents all")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        which = args["which"]
        if which not in (None, "all"):
            raise UsageError(f"expected nothing or 'all', got {which!r}")
        agents = ctx.api.agents(include_ended=which == "all")
        if not agents:
            return Reply.text("No agents running. Start one with /spawn <name> <prompt>.")
        return Reply(
            blocks=(Text(f"{len(agents)} agent(s)", "title"),
                    *(Text(agent_line(a)) for a in agents)),
            buttons=tuple(agent_buttons(a) for a in agents[:20] if a.live),
        )


class Status:
    name: ClassVar[str] = "status"
    summary: ClassVar[str] = "fleet overview, or one agent in detail"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id", required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/status", "/status fixer")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        if not args["agent"]:
            fleet = await ctx.api.fleet()
            summary = ", ".join(f"{n} {s}" for s, n in fleet.counts) or "no live agents"
            text = (f"Switchboard: {summary}. Spent {money(fleet.spent_usd)} in all."
                    f" Database {fleet.db_bytes / 1e6:.1f} MB ({fleet.retention}).")
            snap = ctx.api.persistence.snapshot()
            hosts = hosts_text(await ctx.api.hosts())
            return Reply.text(text + "\n" + killswitch_line(ctx.api.halt_state())
                              + ("\n" + snapshot_line(snap) if snap else "")
                              + ("\n" + hosts if hosts else ""))
        r = await ctx.api.agent(args["agent"])
        lines = [
            f"state: {r.state}" + (f" (tool: {r.current_tool})" if r.current_tool else ""),
            f"model: {r.effective_model or 'CLI default'}",
            f"cwd: {r.cwd}",
            f"session: {r.session_id or '-'}",
            f"turns: {r.turns}, cost: {money(r.cost_usd)}, queued: {r.queued}",
            f"age: {ago(r.created_at)}" + (f", turn running {ago(r.turn_started_at)}"
                                           if r.turn_started_at else ""),
        ]
        if r.cli_pid:
            lines.append(f"pid: {r.cli_pid} (launcher {r.launcher_pid})")
        if r.parent_id:
            lines.append(f"parent: {r.parent_id}")
        if r.last_error and r.state in (AgentState.FAILED, AgentState.RESUME_FAILED):
            lines.append(f"last error: {r.last_error}")
        if r.last_answer:
            lines.append(f"last answer: {r.last_answer[:500]}")
        charter = (Text("standing agent, charter:\n" + r.charter[:3000]),) if r.charter else ()
        return Reply(
            blocks=(Text(agent_line(r), "title"), Text("\n".join(lines)), *charter),
            buttons=(agent_buttons(r),) if r.live else (),
        )


class Ask:
    name: ClassVar[str] = "ask"
    summary: ClassVar[str] = "send a message to an agent; it becomes the agent's next turn"
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id"),
                                           Rest("text", "the message"))
    examples: ClassVar[tuple[str, ...]] = ("/ask fixer also run the linter",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        sent = await ctx.api.ask(args["agent"], args["text"])
        r, ahead = sent.agent, sent.ahead
        where = "now" if ahead == 0 else f"after {ahead} queued message(s)"
        note = ""
        if r.state in (AgentState.STOPPED, AgentState.FAILED):
            note = " The agent was not running: it restarts and resumes its session."
        elif r.state == AgentState.PAUSED:
            note = " The agent is paused: the message runs when you /resume it."
        return Reply.text(f"Sent to {r.name}; it runs {where}.{note}")


class _Lifecycle:
    name: ClassVar[str]
    summary: ClassVar[str]
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id"),)
    examples: ClassVar[tuple[str, ...]] = ()


class Pause(_Lifecycle):
    name: ClassVar[str] = "pause"
    summary: ClassVar[str] = "freeze every process of an agent (SIGSTOP), mid-turn included"
    examples: ClassVar[tuple[str, ...]] = ("/pause fixer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        paused = await ctx.api.pause(args["agent"])
        r = paused.agent
        return Reply(blocks=(Text(f"Paused {r.name}: {paused.processes} process(es) frozen."),),
                     buttons=((Button("▶ Resume", f"/resume {r.id}"),),))


class Resume(_Lifecycle):
    name: ClassVar[str] = "resume"
    summary: ClassVar[str] = "continue a paused agent"
    examples: ClassVar[tuple[str, ...]] = ("/resume fixer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        r = await ctx.api.resume(args["agent"])
        return Reply.text(f"Resumed {r.name}; it is {r.state}.")


class Stop(_Lifecycle):
    name: ClassVar[str] = "stop"
    summary: ClassVar[str] = "interrupt the current turn and close the agent (its session is kept)"
    examples: ClassVar[tuple[str, ...]] = ("/stop fixer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        r = await ctx.api.stop(args["agent"])
        return Reply.text(f"Stopped {r.name}. /ask {r.name} <text> restarts it on its session.")


class Kill(_Lifecycle):
    name: ClassVar[str] = "kill"
    summary: ClassVar[str] = "kill an agent and all its children: every process, no session restart"
    examples: ClassVar[tuple[str, ...]] = ("/kill fixer",)

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        result = await ctx.api.kill(args["agent"])
        if not result.killed:
            return Reply.text(f"{result.agent.name} was already killed.")
        names = ", ".join(r.name for r in result.killed)
        return Reply.text(f"Killed {len(result.killed)} agent(s): {names}.")


class Logs:
    name: ClassVar[str] = "logs"
    summary: ClassVar[str] = "the last n events of an agent (default 20, at most 500)"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("agent", "agent name or id"),
        Arg("n", "how many events", required=False, kind=int, low=1, high=500),
    )
    examples: ClassVar[tuple[str, ...]] = ("/logs fixer", "/logs fixer 50")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        log = await ctx.api.logs(args["agent"], args["n"] or 20)
        r = log.agent
        shown = [e for e in log.entries if e.summary]
        if not shown:
            return Reply.text(f"{r.name} has no output yet.")
        body = "\n".join(f"[{e.kind}] {e.summary}" for e in shown)
        return Reply(blocks=(Text(f"Last {len(shown)} event(s) of {r.name}", "title"),
                             Text(body, "code")))


class Cost:
    name: ClassVar[str] = "cost"
    summary: ClassVar[str] = "spend and tokens, per agent and per model"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (Arg("agent", "agent name or id", required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/cost", "/cost fixer")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        spend = await ctx.api.spend(args["agent"])
        title = f"Spend of {spend.agent.name}" if spend.agent else "Spend, all agents"
        lines = [f"total: {money(spend.total_usd)} over {spend.turns} turn(s)"]
        lines += [f"  {c.label}: {money(c.cost_usd)} ({c.turns} turns, "
                  f"{c.input_tokens} in / {c.output_tokens} out tokens)" for c in spend.by_agent]
        if spend.by_model:
            lines.append("by model:")
            lines += [f"  {c.label}: {money(c.cost_usd)} ({c.input_tokens} in / "
                      f"{c.output_tokens} out tokens)" for c in spend.by_model]
        return Reply(blocks=(Text(title, "title"), Text("\n".join(lines))))
