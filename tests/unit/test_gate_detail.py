"""The gate puts the whole call into an escalation's detail (a plan used to be clipped to
3,000 characters; a blocked command's notice to 1,500)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from store import open_store
from supervisor.guard.escalations import Answer, Decision, Escalations, Timeouts
from supervisor.guard.gate import GateDeps, ToolGate
from supervisor.guard.policy import Policy

pytestmark = pytest.mark.timeout(30)


class _Hub:
    def publish(self, event: object) -> None:
        pass


class _Agent:
    id = "a1"
    name = "planner"
    cwd = "/tmp"
    session_id = None

    in_turn = True  # these calls come in a turn somebody asked for

    async def refuse_unsolicited(self, kind: str | None, what: str, detail: object) -> None:
        raise AssertionError(f"refused as unsolicited: {what}")

    async def escalation_started(self) -> None: ...
    async def escalation_finished(self) -> None: ...
    async def pause_for_timeout(self) -> None: ...
    async def resume_after_answer(self) -> None: ...


@pytest.fixture
async def gate(tmp_path: Path):
    store = await open_store(tmp_path / "db.sqlite")
    await store.agents.create(id="a1", name="planner", parent_id=None, model=None, cwd="/tmp",
                              prompt="p", permission_mode="default", state="working")
    esc = Escalations(store, _Hub(), Timeouts())
    try:
        yield ToolGate(_Agent(), GateDeps(store, Policy.load(None), esc, lambda: False)), esc
    finally:
        await store.db.close()


async def test_a_long_plan_is_kept_whole(gate):
    g, esc = gate
    plan = "".join(f"{i}. step\n" for i in range(600)) + "601. force-push to main\n"
    task = asyncio.create_task(g._exit_plan_mode({"plan": plan}))
    while not await esc.pending():
        await asyncio.sleep(0.01)
    row = (await esc.pending())[0]
    assert row.detail == plan and row.detail_name == "plan.md" and len(plan) > 3000
    await esc.answer(row.id, Answer(Decision.ANSWER, "Keep planning", "me", "test"))
    assert "more planning" in (await task).message


async def test_a_blocked_command_is_reported_whole(gate, tmp_path):
    g, esc = gate
    command = "echo " + "x" * 2000 + "; git push --force origin main"
    await g._blocked("Bash", {"command": command}, "force-push rewrites shared history", "r")
    notices = await esc.store.escalations.undelivered("t")
    assert [(n.detail, n.detail_name) for n in notices] == [(command, "command.sh")]
    assert notices[0].body.startswith("force-push rewrites shared history")
