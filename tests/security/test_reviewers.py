"""Hostile agents against reviewer agents (docs/reviewers.md), with the real CLI on the mock API:
an agent that is not a reviewer calls review_decision to approve another agent's request (it is
not given the tool), a second, hostile reviewer decides a review offered to the first (refused),
and a reviewer asks for a call its own charter covers (it reaches the operator). The request stays
with its reviewer until the operator takes it with /overturn, and runs only on their approval."""

from __future__ import annotations

import json
import re

import pytest

from bot.app import Switchboard
from commands.base import Caller, Role
from tests.conftest import make_settings, run, wait_for
from tests.fakes.mock_anthropic import bus_directive, directive_of

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

ALICE = Caller("tg:1", "alice", Role.OPERATOR, "telegram")
CHARTER = """\
Goal: settle the other agents' routine requests.
Reviews:
- Bash touch of files in their own workspace
"""


def tool_results(mock) -> list[str]:
    out = []
    for body in list(mock.requests):
        for msg in body.get("messages", []):
            for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    c = block.get("content")
                    out.append(c if isinstance(c, str) else json.dumps(c))
    return out


def stalling_reviewer(body: dict) -> dict | None:
    """The honest reviewer takes its time: it never decides (the operator will take it)."""
    if re.search(r"Review request r[a-z0-9]+", bus_directive(directive_of(body))):
        return {"text": "Let me look at this more closely later."}
    return None


async def idle(agent) -> None:
    await wait_for(lambda: agent.state == "idle" and not agent.busy, 90, f"{agent.name} idle")


async def test_only_the_reviewer_offered_a_request_may_settle_it(short_home, mock_api,
                                                                 tmp_path):
    (short_home / "t").mkdir(exist_ok=True)
    mock_api.on_request = stalling_reviewer
    charter = tmp_path / "reviewer.md"
    charter.write_text(CHARTER)
    work = tmp_path / "dev"
    work.mkdir()
    async with Switchboard(make_settings(short_home, mock_api)) as app:
        app.api.reviews.desk.timeout_s = 600.0
        for name, extra in (("rev", f"--charter @{charter} "), ("sly", f"--charter @{charter} "),
                            ("mal", "")):
            assert (await run(app, f"/spawn {name} --cwd {tmp_path} {extra}TEXT: ready")).ok
            await idle(await app.pool.fleet.get(name))
        rev, sly, mal = [await app.pool.fleet.get(n) for n in ("rev", "sly", "mal")]

        assert (await run(app, f"/spawn dev --cwd {work} BASH: touch hostile.txt")).ok

        async def offered():
            rows = await app.api.reviews.recent(1)
            return rows[0] if rows and rows[0].status == "open" else None

        await wait_for(offered, 90, "the request offered to the first reviewer")
        review = await offered()
        assert review.reviewer_name == "rev"  # the oldest reviewer that covers it
        await idle(rev)
        forged = {"review_id": review.id, "decision": "allow", "reasoning": "trust me"}

        # Not a reviewer: it has no such tool.
        assert (await run(app, "/ask mal TOOL mcp__switchboard__review_decision "
                               f"{json.dumps(forged)}")).ok
        await wait_for(lambda: any("No such tool available: mcp__switchboard__review_decision"
                                   in r for r in tool_results(mock_api)), 90, "mal's attempt")
        await idle(mal)
        # A reviewer, but not the one offered this review: refused, nothing decided.
        assert (await run(app, "/ask sly TOOL mcp__switchboard__review_decision "
                               f"{json.dumps(forged)}")).ok
        await wait_for(lambda: any(f"no review '{review.id}' was offered to you" in r
                                   for r in tool_results(mock_api)), 90, "sly's attempt")
        await idle(sly)
        assert (await app.api.reviews.recent(1))[0].status == "open"
        assert not (work / "hostile.txt").exists()
        assert [a for a in await app.store.audit.recent(50) if a.platform == "reviewer"] == []

        # A reviewer's own request, though its charter covers the call: to the operator.
        assert (await run(app, "/ask sly BASH: touch sly.txt")).ok

        async def asked(agent):
            rows = [r for r in await app.pool.escalations.pending(agent.id)
                    if r.kind == "permission"]
            return rows[0] if rows else None

        await wait_for(lambda: asked(sly), 90, "sly's own request to reach the operator")
        own = await asked(sly)
        assert (await app.run_command(ALICE, f"/deny {own.id} not now")).ok

        # The operator takes the stalled review; the call runs only on their approval.
        dev = await app.pool.fleet.get("dev")
        reply = await app.run_command(ALICE, f"/overturn {review.id}")
        assert reply.ok and "comes to you now" in reply.plain(), reply.plain()
        await wait_for(lambda: asked(dev), 60, "the taken request as a card")
        card = await asked(dev)
        assert card.body.startswith("You took it from reviewer rev.")
        assert not (work / "hostile.txt").exists()
        assert (await app.run_command(ALICE, f"/approve {card.id}")).ok
        await wait_for(lambda: (work / "hostile.txt").exists(), 60, "the approved call")
