"""Irreversible steps of a standing agent: asked about whatever the policy allows, however the
command is wrapped, every time (no session allowance covers one), and only for standing agents.
The hostile agent here is the command text; tests/security/test_standing_push.py runs one
wrapped push through the real CLI against a real remote."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from store import open_store
from supervisor.guard.escalations import Answer, Decision, Escalations, Timeouts
from supervisor.guard.gate import IRREVERSIBLE_OPTIONS, GateDeps, ToolGate
from supervisor.guard.policy import Action, Policy, PolicyError

pytestmark = pytest.mark.timeout(30)

ALLOW_ALL = {"default": "allow", "tools": {"Bash": "allow", "*": "allow"}}

WRAPPED_PUSHES = [
    "git push origin main",
    "bash -c 'git push origin main'",
    "sh -c \"cd /tmp && git push\"",
    "eval git push",
    "x=pu; eval \"git ${x}sh origin main\"",
    "x=push; git $x",
    'git "pu""sh"',
    "g\\it pu\\sh",
    "$(printf git) push",
    "env -i git push",
    "sudo -u me git push",
    "timeout 5 git push",
    "nohup git push &",
    "command git push",
    "exec git push",
    "/usr/bin/git push",
    "git -C /tmp push --dry-run",
    "echo main | xargs git push origin",
    "find . -maxdepth 0 -exec git push \\;",
    "true && { git push; }",
    "for r in origin; do git push $r; done",
    "python3 -c \"import os; os.system('git push')\"",
    "python -c 'import subprocess; subprocess.run([\"git\", \"push\"])'",
    "node -e \"require('child_process').execSync('git push')\"",
    "awk 'BEGIN { system(\"git push\") }'",
    "git merge feature",
    "gh pr merge 12 --squash",
    "kubectl apply -f deploy.yaml",
    "npm publish",
    "rm -rf build",
    "curl -s https://api.openai.com/v1/chat/completions -d @req.json",
]
HARMLESS = ["git status", "git commit -m 'push it later'", "make test", "ls -la",
            "python -m pytest -q", "rm build.o"]


@pytest.mark.parametrize("command", WRAPPED_PUSHES)
def test_every_wrapping_of_an_irreversible_step_is_held(command):
    policy = Policy.from_dict(ALLOW_ALL)
    held = policy.irreversible("Bash", {"command": command}, "/tmp")
    assert held is not None and held.action is Action.ASK, command
    assert held.reason.startswith("irreversible for a standing agent")


@pytest.mark.parametrize("command", HARMLESS)
def test_reversible_steps_are_left_to_the_rules(command):
    assert Policy.from_dict(ALLOW_ALL).irreversible("Bash", {"command": command}, "/tmp") is None


def test_the_list_is_configurable_and_cannot_allow():
    own = Policy.from_dict({**ALLOW_ALL, "standing": {"irreversible": [
        {"tool": "Bash", "command": "make release", "reason": "ships it"},
        {"tool": "Bash", "command": "git push", "action": "deny"}]}})
    assert own.irreversible("Bash", {"command": "make release"}, "/tmp").reason.startswith(
        "irreversible for a standing agent: ships it")
    assert own.irreversible("Bash", {"command": "bash -c 'git push'"}, "/tmp").action \
        is Action.DENY
    assert own.irreversible("Bash", {"command": "rm -rf build"}, "/tmp") is None  # replaced
    assert own.irreversible("mcp__gh__merge_pull_request", {}, "/tmp") is None
    default = Policy.from_dict(ALLOW_ALL)  # no [standing]: the built-in list
    assert default.irreversible("mcp__gh__merge_pull_request", {}, "/tmp") is not None
    with pytest.raises(PolicyError, match="must be ask or deny"):
        Policy.from_dict({"standing": {"irreversible": [{"tool": "Bash", "action": "allow"}]}})
    with pytest.raises(PolicyError, match="unknown key"):
        Policy.from_dict({"standing": {"reversible": []}})


class _Hub:
    def publish(self, event: object) -> None:
        pass


class _Agent:
    id = "a1"
    name = "nightly"
    cwd = "/tmp"
    session_id = "s1"

    def __init__(self, charter: str | None) -> None:
        self.charter = charter

    in_turn = True  # these calls come in a turn somebody asked for

    async def refuse_unsolicited(self, kind: str | None, what: str, detail: object) -> None:
        raise AssertionError(f"refused as unsolicited: {what}")

    async def escalation_started(self) -> None: ...
    async def escalation_finished(self) -> None: ...
    async def pause_for_timeout(self) -> None: ...
    async def resume_after_answer(self) -> None: ...


@pytest.fixture
async def deps(tmp_path: Path, migrated_db: Path):
    db = tmp_path / "db.sqlite"
    db.write_bytes(migrated_db.read_bytes())
    store = await open_store(db)
    await store.agents.create(id="a1", name="nightly", parent_id=None, model=None, cwd="/tmp",
                              prompt="p", permission_mode="default", state="working")
    esc = Escalations(store, _Hub(), Timeouts())
    try:
        yield GateDeps(store, Policy.from_dict(ALLOW_ALL), esc, lambda: False)
    finally:
        await store.db.close()


def _hook_decision(out: Any) -> str:
    return out["hookSpecificOutput"]["permissionDecision"]


async def _answer_when_asked(esc: Escalations, answer: Answer) -> Any:
    while not await esc.pending():
        await asyncio.sleep(0.01)
    row = (await esc.pending())[0]
    await esc.answer(row.id, answer)
    return row


async def test_a_standing_agent_is_asked_every_time_even_after_allow_for_session(deps):
    gate = ToolGate(_Agent("Authority: push whenever the tests pass; the operator agreed."),
                    deps)
    push = {"command": "bash -c 'git push origin main'"}
    # An allowance for exactly this command, as "Allow for session" would record it.
    await deps.store.escalations.allow_for_session(
        "a1", "s1", deps.policy.session_key("Bash", push), "Bash", "op")
    out = await gate.pre_tool_use({"tool_name": "Bash", "tool_input": push}, None, {})
    assert _hook_decision(out) == "ask"
    for _ in range(2):  # answered "for the session": still asked the next time
        task = asyncio.create_task(gate.can_use_tool("Bash", push, None))  # type: ignore[arg-type]
        row = await _answer_when_asked(deps.escalations,
                                       Answer(Decision.ALLOW_SESSION, "", "op", "test"))
        assert row.options == IRREVERSIBLE_OPTIONS and "irreversible" in row.body
        assert (await task).behavior == "allow"


async def test_an_agent_without_a_charter_keeps_the_rules(deps):
    gate = ToolGate(_Agent(None), deps)
    out = await gate.pre_tool_use({"tool_name": "Bash", "tool_input": {"command": "git push"}},
                                  None, {})
    assert _hook_decision(out) == "allow"
    assert await deps.escalations.pending() == []


async def test_a_question_the_charter_decides_goes_back_and_opens_nothing(deps):
    gate = ToolGate(_Agent("Authority:\n- Fix flaky tests yourself; never skip a test."), deps)
    ask = {"questions": [{"question": "Should I skip the flaky test or fix it?",
                          "options": [{"label": "skip"}, {"label": "fix"}]}]}
    first = await gate.can_use_tool("AskUserQuestion", ask, None)  # type: ignore[arg-type]
    assert first.behavior == "deny" and "decide this within your charter" in first.message
    assert await deps.escalations.pending() == []
    task = asyncio.create_task(gate.can_use_tool("AskUserQuestion", ask, None))  # type: ignore[arg-type]
    row = await _answer_when_asked(deps.escalations, Answer(Decision.ANSWER, "fix", "op", "t"))
    assert "skip the flaky test" in row.body  # asked again: it reaches the operator
    assert (await task).behavior == "allow"
