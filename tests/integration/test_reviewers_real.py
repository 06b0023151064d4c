"""Reviewer agents (issue 27, acceptance 4) with the real CLI on the mock Anthropic API: an
agent whose charter has a Reviews section settles another agent's request within it (the tool
runs, the audit row holds its reasoning, the operator gets a quiet notice); a request outside
it, the reviewer's own request and a review not decided in time reach the operator; the
operator overturns an approval (it cannot be unrun: the agent is told) and a denial (the call
is then allowed, with nobody asked)."""

from __future__ import annotations

import json
import re

import pytest

from bot.app import Switchboard
from commands.base import Caller, Role
from supervisor.api import REVIEW_NOTICE
from tests.conftest import make_settings, run, wait_for
from tests.fakes.mock_anthropic import bus_directive, directive_of

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

ALICE = Caller("tg:1", "alice", Role.OPERATOR, "telegram")
CHARTER = """\
Goal: settle the other agents' routine requests.
Reviews:
- Bash touch or cat of files in their own workspace
Escalate:
- anything that uses the network: curl, wget
"""
REASON = "touching a file in its own workspace is routine, as my charter says"
DENIAL = "a notes file is the operator's to make"
REQUEST = re.compile(r"Review request (r[a-z0-9]+)")


def reviewer_model(body: dict) -> dict | None:
    """The reviewer's side of the mock model: decide each review request by what it asks."""
    text = bus_directive(directive_of(body))
    found = REQUEST.search(text)
    if found is None:
        return None
    decision = {"review_id": found.group(1), "decision": "allow", "reasoning": REASON}
    if "asks the operator a question" in text:
        decision.update(decision="answer", answer="touch it")
    if "notes.txt" in text:
        decision.update(decision="deny", reasoning=DENIAL)
    if "slow.txt" in text:
        return {"text": "I need longer to think about this one."}
    return {"tool": "mcp__switchboard__review_decision", "input": decision}


async def idle(agent) -> None:
    await wait_for(lambda: agent.state == "idle" and not agent.busy, 90, f"{agent.name} idle")


async def asked(app, agent, kind: str = "permission"):
    async def found():
        rows = [r for r in await app.pool.escalations.pending(agent.id) if r.kind == kind]
        return rows[0] if rows else None

    await wait_for(found, 90, f"a {kind} request of {agent.name} for the operator")
    return await found()


async def permissions(app, agent) -> list:
    return [r for r in await app.store.escalations.undelivered("t")
            if r.kind == "permission" and r.agent_id == agent.id]


async def test_a_reviewer_settles_what_its_charter_covers_and_the_operator_overrules(
        short_home, mock_api, tmp_path):
    (short_home / "t").mkdir(exist_ok=True)
    mock_api.on_request = reviewer_model
    charter = tmp_path / "reviewer.md"
    charter.write_text(CHARTER)
    work = tmp_path / "dev"
    work.mkdir()
    async with Switchboard(make_settings(short_home, mock_api)) as app:
        assert (await run(app, f"/spawn rev --cwd {tmp_path} --charter @{charter} "
                               "TEXT: ready")).ok
        rev = await app.pool.fleet.get("rev")
        await idle(rev)

        # Within the charter: the reviewer allows it, the tool runs, nobody is asked.
        assert (await run(app, f"/spawn dev --cwd {work} BASH: touch reviewed.txt")).ok
        dev = await app.pool.fleet.get("dev")
        await wait_for(lambda: (work / "reviewed.txt").exists(), 90, "the reviewed call to run")
        await idle(dev)
        assert await permissions(app, dev) == [], "the operator was asked"
        (allowed,) = await app.api.reviews.recent(5)
        assert allowed.status == "allow" and allowed.reviewer_name == "rev"
        assert allowed.reasoning == REASON and "touch reviewed.txt" in allowed.summary
        audit = [a for a in await app.store.audit.recent(20) if a.platform == "reviewer"]
        assert [(a.user_name, a.action, a.result) for a in audit] == [
            ("rev", "review allow", REASON)]
        assert allowed.id in audit[0].args and "dev" in audit[0].args
        notices = [r for r in await app.store.escalations.undelivered("t")
                   if r.ref_id == allowed.id]
        assert len(notices) == 1 and notices[0].kind == "notice"
        assert notices[0].title == "🧑‍⚖️ rev allowed dev's request"
        assert notices[0].tool_name == REVIEW_NOTICE  # the chats give it an overturn button
        assert REASON in notices[0].body and f"/overturn {allowed.id}" in notices[0].body
        # The reviewer's turn of review requests is quiet: its decision has its own notice.
        said = [r.title for r in await app.store.escalations.undelivered("t")
                if r.agent_id == rev.id]
        assert said.count("rev finished") == 1, said  # its first turn only

        # A question (AskUserQuestion) within the charter: the reviewer answers it.
        question = {"questions": [{"question": "Should I touch or cat the files in my "
                                   "workspace?", "header": "Files", "multiSelect": False,
                                   "options": [{"label": "touch it", "description": "touch"},
                                               {"label": "cat it", "description": "cat"}]}]}
        assert (await run(app, f"/ask dev TOOL AskUserQuestion {json.dumps(question)}")).ok

        async def answered():
            rows = await app.api.reviews.recent(1)
            return rows and rows[0].kind == "question" and rows[0].status == "answer"

        await wait_for(answered, 90, "the reviewer's answer")
        await idle(dev)
        assert [r for r in await app.store.escalations.undelivered("t")
                if r.kind == "question"] == []

        # Outside the charter (the network is the operator's): the operator is asked.
        assert (await run(app, "/ask dev BASH: curl -s http://example.invalid/")).ok
        row = await asked(app, dev)
        assert "curl" in (row.detail or "")
        assert len(await app.api.reviews.recent(10)) == 2  # never offered to the reviewer
        assert (await app.run_command(ALICE, f"/deny {row.id} no network")).ok
        await idle(dev)

        # The reviewer's own request goes to a human, though its charter covers the call.
        assert (await run(app, "/ask rev BASH: touch mine.txt")).ok
        own = await asked(app, rev)
        assert "touch mine.txt" in (own.detail or "")
        assert (await app.run_command(ALICE, f"/approve {own.id}")).ok
        await idle(rev)

        # The operator overturns the approval: it already ran, so the agent is told.
        reply = await app.run_command(ALICE, f"/overturn {allowed.id}")
        assert reply.ok, reply.plain()
        assert "already ran: it cannot be unrun" in reply.plain()
        assert "dev was told" in reply.plain()
        await wait_for(lambda: any(f"approval of your call (review {allowed.id})" in d
                                   for b in mock_api.requests
                                   for d in [bus_directive(directive_of(b))]),
                       60, "dev to be told of the overturn")
        again = await app.run_command(ALICE, f"/overturn {allowed.id}")
        assert not again.ok and "overturned already by alice" in again.plain()
        await idle(dev)

        # A denial, overturned: the call is allowed from then on, nobody asked again.
        assert (await run(app, "/ask dev BASH: touch notes.txt")).ok

        async def decided():
            rows = await app.api.reviews.recent(1)
            return rows[0] if rows and "notes" in rows[0].summary and rows[0].status != "open" \
                else None

        await wait_for(decided, 90, "the reviewer's decision on notes.txt")
        denied = await decided()
        await idle(dev)
        assert not (work / "notes.txt").exists()
        assert denied.status == "deny" and denied.reasoning == DENIAL
        assert (await app.run_command(ALICE, f"/overturn {denied.id}")).ok
        await idle(dev)
        before = len(await app.api.reviews.recent(50))
        assert (await run(app, "/ask dev BASH: touch notes.txt")).ok
        await wait_for(lambda: (work / "notes.txt").exists(), 60, "the allowed call to run")
        await idle(dev)
        assert len(await app.api.reviews.recent(50)) == before
        # Only the curl ever reached the operator.
        assert [r.id for r in await permissions(app, dev)] == [row.id]
        listing = (await run(app, "/reviews")).plain()
        assert "overturned by alice" in listing and DENIAL in listing

        # A reviewer that does not decide within the bound hands the request over.
        app.api.reviews.desk.timeout_s = 2.0
        assert (await run(app, "/ask dev BASH: touch slow.txt")).ok
        slow = await asked(app, dev)
        assert slow.body.startswith("Reviewer rev did not decide within 2 s: it is yours.")
        assert (await app.run_command(ALICE, f"/approve {slow.id}")).ok
        await wait_for(lambda: (work / "slow.txt").exists(), 60, "the operator's approval")
        assert (await app.api.reviews.recent(1))[0].status == "handed_over"
