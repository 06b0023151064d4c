"""How an agent's CLI is started: its environment (the allowlist, then its sandbox: bwrap's
arguments, the repository wall) and the SDK options (our launcher as the CLI, the gate's
callbacks, hooks and MCP tools, the system prompt, the session to resume, the transcript's copy
in the bucket). Kept apart from supervisor/agents/runner.py, which decides when a CLI starts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from claude_agent_sdk import ClaudeAgentOptions, SessionStore
from claude_agent_sdk.types import SystemPromptPreset

from supervisor import launcher as launcher_module
from supervisor.agents.transcripts import MirrorOnly
from supervisor.config import Settings
from supervisor.errors import AgentFailed, InvalidRequest
from supervisor.guard.charter import system_prompt as charter_prompt
from supervisor.process.agent import launcher_files
from supervisor.process.network import NetPlan, mode_for, plan
from supervisor.process.sandbox import (
    _place_file,
    agent_dirs,
    bwrap_args,
    prepare,
    sandbox_env,
)
from supervisor.process.workdir import examine

if TYPE_CHECKING:
    from supervisor.agents.runner import AgentRunner, RunnerDeps

# Claude Code's own tools that would bypass the supervisor: cross-session messaging, session
# cron, remote triggers, workflows, monitors, worktrees and agent teams. Our MCP tools (bus,
# scheduler, worktrees) replace them. Checked against the real CLI's request in the tests.
NATIVE_TOOLS_DISALLOWED = (
    "SendMessage", "ListAgents", "CronCreate", "CronDelete", "CronList", "ScheduleWakeup",
    "RemoteTrigger", "PushNotification", "Workflow", "Monitor", "EnterWorktree",
    "ExitWorktree", "TeamCreate", "TeamDelete", "SendUserMessage",
)


def context_note(settings: Settings) -> str:
    """What every agent's system prompt says about the shared context."""
    return (f"Shared context: {settings.context_dir.resolve()} (also in $SWITCHBOARD_CONTEXT_DIR) "
            "holds Markdown notes every agent of this Switchboard may read and write: "
            "decisions, plans, conventions, hand-offs. Read what is there before you start; "
            "write down what the others should know. Keep it short, one topic per file.")


def _sandbox(r: AgentRunner, deps: RunnerDeps, env: dict[str, str]) -> dict[str, str]:
    """Prepare the agent's private directory; the variables that put it in its sandbox."""
    iso = deps.isolation
    net = network_plan(r, deps, env)
    if not iso.ok:
        if not deps.settings.allow_unisolated_agents:
            raise AgentFailed(None, "", f"agents are not started unisolated: {iso.problem}")
        wall = deps.repo_wall(r.id)
        return dict(wall.env) if wall is not None else {}
    idmap = None
    if not Path(r.cwd).is_relative_to(deps.settings.workspaces.resolve()):
        try:  # an operator's --cwd: checked again at every start, its owner may have changed
            idmap = examine(deps.settings, iso, r.cwd, check_mapping=False).idmap(iso)
        except InvalidRequest as exc:
            raise AgentFailed(None, "", str(exc)) from None
    dirs = agent_dirs(deps.settings, r.id)
    gateway = deps.gateway is not None and deps.gateway.active
    prepare(deps.settings, iso, dirs, Path(r.cwd), env, login=not gateway)
    wall = deps.repo_wall(r.id)
    argv = bwrap_args(deps.settings, iso, dirs, Path(r.cwd), env, deps.real_cli,
                      ro_extra=launcher_files(deps.launcher),
                      peers=(Path(p) for p in deps.peer_dirs(r.id)),
                      binds=wall.binds if wall is not None else (),
                      net=net.binds if net.mode != "open" else None)
    return sandbox_env(iso, dirs, argv, Path(r.cwd), idmap) | (wall.env if wall else {}) \
        | net.env


def network_plan(r: AgentRunner, deps: RunnerDeps, env: dict[str, str]) -> NetPlan:
    """The agent's network (supervisor/process/network.py); refused when the mode the operator
    asked for cannot be made here."""
    gateway = deps.gateway
    socket = gateway.socket if gateway is not None and gateway.active else None
    mode, why = mode_for(deps.settings, deps.isolation, socket)
    if not mode:
        raise AgentFailed(None, "", f"{why}. Fix that, or set egress = open.")
    if mode == "open" or gateway is None or gateway.upstream is None:
        return NetPlan("open")
    return plan(mode, socket, gateway.port, launcher_files(deps.launcher)[2],
                gateway.proxy.socket, env.get(gateway.upstream.var, ""))


def cli_options(r: AgentRunner, deps: RunnerDeps, env: dict[str, str]) -> ClaudeAgentOptions:
    """What the SDK starts the agent's CLI with: through our launcher, in its sandbox, with the
    gate's callbacks and tools, and nothing of the host's own settings."""
    settings = deps.settings
    keys = sorted(k for k in env if k not in launcher_module.CONTROL)
    env.update(
        {
            launcher_module.TAG_VAR: r.tag,
            launcher_module.CLI_VAR: str(deps.real_cli),
            launcher_module.KEYS_VAR: ",".join(keys),
            launcher_module.PARENT_VAR: str(os.getpid()),
            launcher_module.NICE_VAR: str(settings.agent_nice),
        }
    )
    if deps.cpu_group is not None:
        env[launcher_module.CPU_GROUP_VAR] = deps.cpu_group
    return ClaudeAgentOptions(
        cwd=r.cwd,
        model=r.model or settings.default_model,
        cli_path=str(deps.launcher),
        env=env,
        can_use_tool=r.gate.can_use_tool,
        hooks=r.gate.hooks(),  # type: ignore[arg-type]
        mcp_servers=r.gate.mcp_servers(),
        permission_mode=r.permission_mode,  # type: ignore[arg-type]
        system_prompt=system_prompt(settings, r.charter),
        resume=r.session_id,
        max_buffer_size=settings.max_line_bytes,
        # Only what Switchboard gives the agent: no user, project or local settings (their
        # hooks would run unchecked), no MCP servers but ours, unless the operator allowed
        # the project's own for this agent (/spawn --project-settings).
        setting_sources=["project"] if r.project_settings else [],
        strict_mcp_config=not r.project_settings,
        disallowed_tools=list(NATIVE_TOOLS_DISALLOWED),
        # The bucket gets every transcript line as it is written ("eager"), so a container
        # lost in the middle of a turn loses none of it.
        session_store=cast(SessionStore, MirrorOnly(deps.session_store))
        if deps.session_store is not None else None,
        session_store_flush="eager",
        extra_args=memory_prompt(r, deps),
    )


MEMORY_FILE = ".switchboard-memory.md"


def memory_prompt(r: AgentRunner, deps: RunnerDeps) -> dict[str, str | None]:
    """The project memory's slice, appended to the system prompt from a file in the agent's
    own home (never on its command line, where every process could read it): the flag that
    names the file, or nothing when the agent has no project or its memory is empty."""
    text = deps.memory.slice(r.id, r.cwd) if deps.memory is not None else ""
    if not text:
        return {}
    home = agent_dirs(deps.settings, r.id).home
    home.mkdir(parents=True, exist_ok=True)
    path = home / MEMORY_FILE
    # Placed, not written: the agent could have left a link by that name in its home.
    # (0600 and the agent uid's through its descriptor: no chmod by name after the rename.)
    _place_file(text.encode(), path, deps.isolation)
    return {"append-system-prompt-file": str(path)}


def system_prompt(settings: Settings, charter: str | None) -> SystemPromptPreset:
    """Claude Code's own prompt, with the shared-context note and a standing agent's charter."""
    notes = [context_note(settings)]
    if charter is not None:
        notes.append(charter_prompt(charter))
    return {"type": "preset", "preset": "claude_code", "append": "\n\n".join(notes)}


# Every credential the CLI could use. With the model gateway, none reaches the agent: it gets
# the gateway's address and a token of its own instead (supervisor/guard/gateway.py).
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                   "ANTHROPIC_BASE_URL")


def agent_env(r: AgentRunner, deps: RunnerDeps) -> dict[str, str]:
    """The agent's environment: the allowlist, the gateway's token in place of the key, then
    what puts it in its sandbox."""
    env = deps.settings.agent_environment()
    gateway = deps.gateway
    if gateway is not None and gateway.active:
        for name in CREDENTIAL_VARS:
            env.pop(name, None)
        env.update(gateway.issue(r.id, r.name))
    cwd = Path(r.cwd)
    if not cwd.is_dir() and cwd.is_relative_to(deps.settings.workspaces.resolve()):
        cwd.mkdir(parents=True)  # a new container: the workspace comes back empty
    env.update(_sandbox(r, deps, env))
    return env


def token_revoker(r: AgentRunner, deps: RunnerDeps,
                  env: dict[str, str]) -> Callable[[], None] | None:
    """What revokes the token this process was started with (and no later one of the agent's)
    when the process is ended: None without the gateway."""
    gateway = deps.gateway
    if gateway is None or gateway.upstream is None:
        return None
    token = env.get(gateway.upstream.var)

    def revoke() -> None:
        gateway.revoke(r.id, token)
    return revoke
