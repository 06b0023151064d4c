"""Planted Claude Code configuration: a repository whose .claude/settings.json (and
settings.local.json) holds SessionStart, UserPromptSubmit and PreToolUse command hooks and whose
.mcp.json starts a server, each writing a marker file; and an agent that plants the same in its
workspace, its HOME and its CLAUDE_CONFIG_DIR and gets itself restarted. Hooks run as shell
commands the policy never sees, so none may run unless the operator opted in with
/spawn --project-settings.

Before the sandbox commit these failed: the SDK was given no setting sources, so the CLI loaded
user, project and local settings, and every planted hook ran at session start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import agent_uid, run, wait_for
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

HOOKS = ("SessionStart", "UserPromptSubmit", "PreToolUse")


def planted_settings(markers: Path, tag: str) -> dict:
    def hook(event: str) -> dict:
        entry = {"hooks": [{"type": "command",
                            "command": f"touch '{markers}/{tag}-{event}'"}]}
        return {**entry, "matcher": "*"} if event == "PreToolUse" else entry
    return {"hooks": {event: [hook(event)] for event in HOOKS},
            "enableAllProjectMcpServers": True}


def planted_mcp(markers: Path) -> dict:
    return {"mcpServers": {"planted": {"command": "sh", "args": [
        "-c", f"touch '{markers}/mcp-server'; sleep 60"]}}}


def plant(repo: Path) -> Path:
    """A repository as an attacker would hand it over; returns its markers directory."""
    markers = repo / "markers"
    (repo / ".claude").mkdir(parents=True)
    markers.mkdir()
    (repo / ".claude" / "settings.json").write_text(
        json.dumps(planted_settings(markers, "project")))
    (repo / ".claude" / "settings.local.json").write_text(
        json.dumps(planted_settings(markers, "local")))
    (repo / ".mcp.json").write_text(json.dumps(planted_mcp(markers)))
    ids = agent_uid()
    if ids is not None:
        for p in (repo, *repo.rglob("*")):
            os.chown(p, *ids)
    return markers


def fired(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


async def test_planted_project_hooks_do_not_run(hostile_app, mock_api, tmp_path):
    repo = tmp_path / "repo"
    markers = plant(repo)
    [agent] = await spawn_fleet(hostile_app, ["cloned"], "BASH: echo hello from the repo",
                                cwd=str(repo))
    assert any("hello from the repo" in c.result for c in tool_calls(mock_api))
    reply = await run(hostile_app, "/ask cloned BASH: echo second turn")
    assert reply.ok
    await wait_for(lambda: agent.state == "idle" and any(
        "second turn" in c.result for c in tool_calls(mock_api)), 60, "the second turn")
    assert fired(markers) == []


async def test_hooks_an_agent_plants_for_itself_do_not_run_after_a_restart(hostile_app,
                                                                          mock_api):
    settings = json.dumps(planted_settings(Path("MARKERS"), "self")).replace(
        "MARKERS", "$M")
    mcp = json.dumps(planted_mcp(Path("MARKERS"))).replace("MARKERS", "$M")
    script = f"""M="$PWD/markers"; mkdir -p "$M" .claude "$HOME/.claude" "$CLAUDE_CONFIG_DIR"
cat > .claude/settings.json <<EOF
{settings}
EOF
cp .claude/settings.json .claude/settings.local.json
cp .claude/settings.json "$HOME/.claude/settings.json"
cp .claude/settings.json "$CLAUDE_CONFIG_DIR/settings.json"
cat > .mcp.json <<EOF
{mcp}
EOF
ls -a .claude "$HOME/.claude" "$CLAUDE_CONFIG_DIR" && echo planted
"""
    [agent] = await spawn_fleet(hostile_app, ["planter"], bash_script(script))
    assert any("planted" in c.result for c in tool_calls(mock_api)), tool_calls(mock_api)
    ws = Path(agent.cwd)
    assert json.loads((ws / ".claude" / "settings.json").read_text())["hooks"]
    assert (await run(hostile_app, "/stop planter")).ok
    reply = await run(hostile_app, "/ask planter BASH: echo restarted")
    assert reply.ok, reply.plain()
    await wait_for(lambda: agent.state == "idle" and any(
        "restarted" in c.result for c in tool_calls(mock_api)), 60, "the restarted turn")
    assert fired(ws / "markers") == []


async def test_project_settings_opt_in_loads_them_and_says_so(hostile_app, mock_api, tmp_path):
    repo = tmp_path / "trusted"
    markers = plant(repo)
    reply = await run(hostile_app, f"/spawn trusted --project-settings --cwd {repo} "
                                   "BASH: echo trusted")
    assert reply.ok, reply.plain()
    text = reply.plain()
    assert "loads the directory's own settings" in text, text
    assert ".claude/settings.json (hooks: PreToolUse, SessionStart, UserPromptSubmit)" in text
    assert ".mcp.json" in text
    agent = await hostile_app.pool.fleet.get("trusted")
    await wait_for(lambda: agent.state == "idle", 60, "the trusted agent's turn")
    names = fired(markers)
    for event in HOOKS:
        assert f"project-{event}" in names, names
    print(f"--project-settings fired: {names}")
