"""A standing agent end to end, with the real CLI and the mock Anthropic API (issue 14,
acceptance 3, the standing part): its charter reaches the model's system prompt; a question its
charter decides goes back to it once and the operator is not asked; it outlives the session TTL
(its idle CLI is parked instead); the wake path resumes its session; and a question it must ask
(approval for a push) reaches the operator."""

from __future__ import annotations

import json

import pytest

from bot.app import Switchboard
from tests.conftest import make_settings, run, wait_for

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

CHARTER = """\
Goal: keep the main branch green.
Authority:
- Fix flaky tests yourself; never skip a test to make it pass.
Needs approval:
- Pushing, merging or deploying anything.
"""
DECIDED = {"questions": [{"question": "The flaky test fails again. Should I skip it or fix it?",
                          "header": "Flaky", "multiSelect": False,
                          "options": [{"label": "skip", "description": "skip it"},
                                      {"label": "fix", "description": "fix it"}]}]}
MUST_ASK = {"question": "Tests pass now. May I push the fix to main?"}


def system_text(body: dict) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system or "")


def tool_results(mock) -> list[str]:
    out = []
    for body in list(mock.requests):
        for msg in body.get("messages", []):
            for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    c = block.get("content")
                    out.append(c if isinstance(c, str) else json.dumps(c))
    return out


async def test_a_standing_agent_decides_what_its_charter_covers_and_asks_the_rest(
        short_home, mock_api, tmp_path):
    (short_home / "t").mkdir(exist_ok=True)
    settings = make_settings(short_home, mock_api, session_ttl_s=1.0, ttl_warn_s=0.0,
                             standing_idle_stop_s=2.0, watchdog_interval_s=0.2)
    charter = tmp_path / "charter.md"
    charter.write_text(CHARTER)
    async with Switchboard(settings) as app:
        reply = await run(app, f"/spawn nightly --cwd {tmp_path} --charter @{charter} "
                               f"TOOL AskUserQuestion {json.dumps(DECIDED)}")
        assert reply.ok and "standing agent" in reply.plain(), reply.plain()
        agent = await app.pool.fleet.get("nightly")
        await wait_for(lambda: agent.state == "idle" and not agent.busy, 90, "the first turn")
        results = tool_results(mock_api)
        assert any("decide this within your charter" in r and "Fix flaky tests yourself" in r
                   for r in results), results
        assert any("Fix flaky tests yourself" in system_text(b) for b in mock_api.requests)
        escalations = await app.store.escalations.undelivered("t")
        assert [r for r in escalations if r.kind != "notice"] == [], "the operator was asked"
        status = await run(app, "/status nightly")
        assert "charter" in status.plain() and "Needs approval" in status.plain()

        # Past the TTL it is not stopped: once idle long enough its CLI is parked.
        async def parked() -> bool:
            moves = await app.store.agents.transitions(agent.id)
            return agent.process is None and any("parked" in t.reason for t in moves)

        await wait_for(parked, 30, "the idle CLI to be parked")
        assert agent.state == "idle" and agent.session_id
        notices = [r.title for r in await app.store.escalations.undelivered("t")]
        assert not any("TTL" in t for t in notices), notices

        # The scheduler's wake path: a message resumes the session on a new CLI.
        before = len(mock_api.requests)
        wake = f"TOOL mcp__switchboard__ask_operator {json.dumps(MUST_ASK)}"
        sent = await app.api.standing.wake("nightly", wake, by="scheduler", dedup_key="slot-1")
        assert not sent.duplicate
        again = await app.api.standing.wake("nightly", wake, by="scheduler", dedup_key="slot-1")
        assert again.duplicate  # the same slot twice is stored once

        async def asked():
            rows = [r for r in await app.pool.escalations.pending(agent.id)
                    if r.kind == "question"]
            return rows[0] if rows else None

        await wait_for(asked, 90, "the push question to reach the operator")
        row = await asked()
        assert row is not None and "push the fix" in row.body
        resumed = mock_api.requests[before]
        assert "flaky test fails again" in json.dumps(resumed["messages"])  # same session
        assert (await run(app, f"/answer {row.id} not yet, wait for the review")).ok
        await wait_for(lambda: agent.state == "idle" and not agent.busy, 90, "the woken turn")
        assert any("not yet, wait for the review" in r for r in tool_results(mock_api))
        assert len(await app.store.charters.sendbacks(agent.id)) == 1
