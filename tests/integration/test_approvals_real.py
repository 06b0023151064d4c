"""Tool-time policy and escalations with the real CLI and the mock Anthropic API."""

from __future__ import annotations

import json

import pytest

from bot.app import Switchboard
from commands.base import Caller, Role
from tests.conftest import make_settings, run, wait_for

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

ALICE = Caller("tg:1", "alice", Role.OPERATOR, "telegram")
BOB = Caller("slack:U2", "bob", Role.OPERATOR, "slack")


def tool_results(mock) -> list[str]:
    """Every tool_result the CLI sent back to the model, as text."""
    out = []
    for body in mock.requests:
        for msg in body.get("messages", []):
            content = msg.get("content")
            if msg.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    c = block.get("content")
                    out.append(c if isinstance(c, str) else json.dumps(c))
    return out


async def open_escalation(app, kind="permission", timeout=60):
    holder = {}

    async def found():
        rows = [r for r in await app.pool.escalations.pending() if r.kind == kind]
        if rows:
            holder["row"] = rows[0]
        return bool(rows)

    await wait_for(found, timeout, f"an open {kind} escalation")
    return holder["row"]


async def spawn(app, name, prompt, cwd):
    reply = await run(app, f"/spawn {name} --cwd {cwd} {prompt}")
    assert reply.ok, reply.plain()
    return await app.pool.get(name)


async def test_blocklisted_command_is_denied_without_asking(real_app, mock_api, tmp_path):
    runner = await spawn(real_app, "pusher", "BASH: git push --force origin main", tmp_path)
    await wait_for(lambda: runner.state == "idle", 60)
    assert [r for r in await real_app.store.escalations.open_rows()] == []
    results = tool_results(mock_api)
    assert any("Blocked by Switchboard policy" in r for r in results), results
    notices = [r for r in await real_app.store.escalations.undelivered("t") if r.kind == "notice"]
    assert any("blocked by policy" in n.title for n in notices)
    events = await real_app.store.events.tail(runner.id, 50)
    assert any(e.kind == "policy_denied" for e in events)


async def test_ask_escalates_and_approval_runs_the_command(real_app, tmp_path):
    runner = await spawn(real_app, "toucher", "BASH: touch approved.txt", tmp_path)
    row = await open_escalation(real_app)
    assert runner.state == "waiting"
    assert "touch approved.txt" in row.body and row.tool_name == "Bash"
    assert not (tmp_path / "approved.txt").exists()
    pending = await run(real_app, "/pending")
    assert row.id in pending.plain()
    reply = await real_app.run_command(ALICE, f"/approve {row.id}")
    assert reply.ok, reply.plain()
    await wait_for(lambda: runner.state == "idle", 60)
    assert (tmp_path / "approved.txt").exists()
    states = [t.to_state for t in await real_app.store.agents.transitions(runner.id)]
    assert "waiting" in states


async def test_denial_reason_reaches_the_model(real_app, mock_api, tmp_path):
    runner = await spawn(real_app, "denied", "BASH: touch nope.txt", tmp_path)
    row = await open_escalation(real_app)
    reply = await real_app.run_command(ALICE, f"/deny {row.id} use the staging bucket instead")
    assert reply.ok, reply.plain()
    await wait_for(lambda: runner.state == "idle", 60)
    assert not (tmp_path / "nope.txt").exists()
    assert any("use the staging bucket instead" in r for r in tool_results(mock_api))


async def test_allow_for_session_suppresses_the_next_identical_request(real_app, tmp_path):
    runner = await spawn(real_app, "repeat", "BASH: touch again.txt", tmp_path)
    row = await open_escalation(real_app)
    assert (await real_app.run_command(ALICE, f"/approve {row.id} session")).ok
    await wait_for(lambda: runner.state == "idle", 60)
    (tmp_path / "again.txt").unlink()
    assert (await run(real_app, "/ask repeat BASH: touch again.txt")).ok
    await wait_for(lambda: (tmp_path / "again.txt").exists() and runner.state == "idle", 60)
    asked = [r for r in await real_app.store.escalations.undelivered("t")
             if r.kind == "permission"]
    assert len(asked) == 1


async def test_first_answer_wins_and_the_second_is_told_who(real_app, tmp_path):
    runner = await spawn(real_app, "race", "BASH: touch raced.txt", tmp_path)
    row = await open_escalation(real_app)
    first = await real_app.run_command(ALICE, f"/approve {row.id}")
    second = await real_app.run_command(BOB, f"/deny {row.id}")
    assert first.ok and not second.ok
    assert "alice" in second.plain() and "telegram" in second.plain()
    await wait_for(lambda: runner.state == "idle", 60)
    assert (tmp_path / "raced.txt").exists()


async def test_timeout_reminds_then_denies(short_home, mock_api, tmp_path):
    settings = make_settings(short_home, mock_api, approval_reminder_s=1.0,
                             approval_timeout_s=2.5)
    (short_home / "t").mkdir(exist_ok=True)
    async with Switchboard(settings) as app:
        runner = await spawn(app, "slowpoke", "BASH: touch late.txt", tmp_path)
        row = await open_escalation(app)
        await wait_for(lambda: runner.state == "idle", 60, "the default after the timeout")
        done = await app.store.escalations.get(row.id)
        assert done.status == "expired" and done.answer["decision"] == "deny"
        titles = [r.title for r in await app.store.escalations.undelivered("t")
                  if r.kind == "notice"]
        assert any(t.startswith("Reminder:") for t in titles), titles
        assert any("denied" in t for t in titles), titles
        assert not (tmp_path / "late.txt").exists()
        late = await app.run_command(ALICE, f"/approve {row.id}")
        assert not late.ok and "expired" in late.plain()


async def test_ask_user_question_answered_with_an_option(real_app, mock_api, tmp_path):
    question = {"questions": [{"question": "Which colour?", "header": "Colour", "multiSelect": False,
                               "options": [{"label": "Red", "description": "warm"},
                                           {"label": "Blue", "description": "cool"}]}]}
    runner = await spawn(real_app, "asker", f"TOOL AskUserQuestion {json.dumps(question)}",
                         tmp_path)
    row = await open_escalation(real_app, "question")
    assert row.options == ("Red", "Blue") and "Which colour?" in row.body
    reply = await real_app.run_command(ALICE, f"/answer {row.id} 2")
    assert reply.ok, reply.plain()
    await wait_for(lambda: runner.state == "idle", 60)
    assert any("Blue" in r for r in tool_results(mock_api)), tool_results(mock_api)


async def test_ask_operator_answered_with_free_text(real_app, mock_api, tmp_path):
    args = json.dumps({"question": "Which port should I use?"})
    runner = await spawn(real_app, "porter", f"TOOL mcp__switchboard__ask_operator {args}",
                         tmp_path)
    row = await open_escalation(real_app, "question")
    assert row.body == "Which port should I use?" and row.free_text
    reply = await real_app.run_command(ALICE, f"/answer {row.id} use 8080, not 80")
    assert reply.ok, reply.plain()
    await wait_for(lambda: runner.state == "idle", 60)
    assert any("use 8080, not 80" in r for r in tool_results(mock_api)), tool_results(mock_api)


async def test_kill_while_waiting_cancels_the_request(real_app, tmp_path):
    runner = await spawn(real_app, "doomed", "BASH: touch never.txt", tmp_path)
    row = await open_escalation(real_app)
    assert (await run(real_app, "/kill doomed")).ok
    done = await real_app.store.escalations.get(row.id)
    assert done.status == "cancelled"
    assert runner.state == "killed"
    assert not (tmp_path / "never.txt").exists()


async def test_exit_plan_mode_is_an_escalation_with_choices(real_app, mock_api, tmp_path):
    plan = json.dumps({"plan": "1. read the code\n2. fix the bug"})
    reply = await run(real_app, f"/spawn planner --mode plan --cwd {tmp_path} "
                                f"TOOL ExitPlanMode {plan}")
    assert reply.ok, reply.plain()
    runner = await real_app.pool.get("planner")
    row = await open_escalation(real_app, "plan")
    assert row.options == ("Approve plan", "Keep planning") and row.body
    assert (await real_app.run_command(ALICE, f"/answer {row.id} 2")).ok
    await wait_for(lambda: runner.state == "idle", 60)
    assert any("Keep planning" in r or "more planning" in r for r in tool_results(mock_api))


async def test_batch_approve_for_one_agent(real_app, tmp_path):
    runner = await spawn(real_app, "batch", "BASH: touch b1.txt", tmp_path)
    await open_escalation(real_app)
    reply = await real_app.run_command(ALICE, "/approve all batch")
    assert reply.ok and "Approved 1 request(s) of batch" in reply.plain(), reply.plain()
    await wait_for(lambda: runner.state == "idle", 60)
    assert (tmp_path / "b1.txt").exists()
    none_left = await real_app.run_command(ALICE, "/approve all batch")
    assert "no open permission requests" in none_left.plain()
