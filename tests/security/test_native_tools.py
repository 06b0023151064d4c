"""Claude Code's own control-plane tools (cross-session messages, session cron, wake-ups, remote
triggers, push notifications, workflows, monitors, worktrees, agent teams) would let an agent act
behind the supervisor's back. None may be offered to the model: checked in the tools list of
every request the real CLI sends, over a turn with a tool call and a second turn, for a plain
agent and for one whose opted-in project settings try to allow them back.

Before the sandbox commit the CLI was started without --disallowedTools and offered them.
"""

from __future__ import annotations

import json
import os

import pytest

from supervisor.agents.runner import NATIVE_TOOLS_DISALLOWED
from tests.conftest import agent_uid, run, wait_for
from tests.security.conftest import spawn_fleet

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(120)]

FORBIDDEN = ("SendMessage", "ListAgents", "CronCreate", "CronDelete", "CronList",
             "ScheduleWakeup", "RemoteTrigger", "PushNotification", "Workflow", "Monitor",
             "EnterWorktree", "ExitWorktree", "TeamCreate", "TeamDelete")


def offered(body: dict) -> list[str]:
    return [t.get("name", "?") for t in body.get("tools") or [] if isinstance(t, dict)]


async def test_no_native_control_plane_tool_is_offered(hostile_app, mock_api, tmp_path):
    assert set(FORBIDDEN) <= set(NATIVE_TOOLS_DISALLOWED)
    repo = tmp_path / "repo"
    (repo / ".claude").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text(json.dumps({
        "permissions": {"allow": list(FORBIDDEN), "deny": []},
        "env": {"CLAUDE_CODE_ENABLE_TASKS": "1", "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS": "1"},
    }))
    ids = agent_uid()
    if ids is not None:
        for p in (repo, *repo.rglob("*")):
            os.chown(p, *ids)
    await spawn_fleet(hostile_app, ["plain"], "BASH: echo one")
    reply = await run(hostile_app, f"/spawn opted --project-settings --cwd {repo} BASH: echo one")
    assert reply.ok, reply.plain()
    opted = await hostile_app.pool.fleet.get("opted")
    await wait_for(lambda: opted.state == "idle", 60, "the opted-in agent's turn")
    for name in ("plain", "opted"):
        assert (await run(hostile_app, f"/ask {name} BASH: echo two")).ok
    agents = [await hostile_app.pool.fleet.get(n) for n in ("plain", "opted")]
    await wait_for(lambda: all(a.state == "idle" for a in agents)
                   and len([b for b in mock_api.requests if b.get("stream")]) >= 8, 60,
                   "two turns of two agents")
    turns = [b for b in mock_api.requests if b.get("stream")]  # side queries offer none
    seen: set[str] = set()
    for i, body in enumerate(mock_api.requests):
        names = offered(body)
        assert names or body not in turns, f"request {i} offered no tools at all"
        seen.update(names)
        bad = sorted(set(names) & set(FORBIDDEN))
        assert not bad, f"request {i} offered {bad}"
    assert "Bash" in seen
    print(f"{len(turns)} requests; tools offered: {sorted(seen)}")
