"""/team with the real CLI and the mock API: one command spawns the built-in developer →
reviewer → tester team, and its example runs end to end through the bus. The mock is
scripted to play the model the way the template's prompts ask each member to act."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import run, wait_for
from tests.fakes.mock_anthropic import _last_user_message, _tool_result_text, directive_of

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

SEND = "mcp__switchboard__send_message"


def _member(body: dict[str, Any]) -> str | None:
    first = next((m for m in body.get("messages") or [] if m.get("role") == "user"), None)
    text = str(first.get("content") if first else "")
    found = re.search(r"You are the (developer|reviewer|tester) of a three-agent team", text)
    return found.group(1) if found else None


def play(body: dict[str, Any]) -> dict[str, Any] | None:
    """What each member does on its turn, as its prompt tells it."""
    member = _member(body)
    if member is None or _tool_result_text(_last_user_message(body) or {}) is not None:
        return None  # not a member's turn, or a tool's result: the mock's own rules
    said = directive_of(body)
    msg_id = (re.findall(r'<message [^>]*id="(\d+)"', said) or ["0"])[-1]
    if member == "developer":
        if 'from="test" type="result"' in said:
            return {"text": "DONE: the tester reports the change passes"}
        if "Your task:" in said:
            return {"tool": SEND, "input": {"to": "rev", "type": "task",
                                            "body": "Added --version to cli.py, see cli.py:12"}}
    if member == "reviewer" and 'from="dev" type="task"' in said:
        return {"tool": SEND, "input": {"to": "test", "type": "task", "reply_to": int(msg_id),
                                        "body": "Looks good; please test --version"}}
    if member == "tester" and 'from="rev" type="task"' in said:
        return {"tool": SEND, "input": {"to": "dev", "type": "result", "reply_to": int(msg_id),
                                        "body": "ran pytest tests/test_cli.py: 3 passed"}}
    return {"text": "ready"}


async def test_team_spawns_three_members_in_one_command_and_works_through_the_bus(
        real_app, mock_api):
    listing = (await run(real_app, "/team list")).plain()
    assert "devteam" in listing and "dev (developer), rev (reviewer), test (tester)" in listing
    mock_api.on_request = play
    reply = await run(real_app, "/team devteam")
    assert reply.ok, reply.plain()
    assert re.search(r"Started team devteam: dev \(\w+\), rev \(\w+\), test \(\w+\)",
                     reply.plain())
    dev = await real_app.pool.fleet.get("dev")

    async def done():
        last = await real_app.store.turns.recent(dev.id, 1)
        return last and last[0].result_text and last[0].result_text.startswith("DONE")

    await wait_for(done, 120, "the team's example to finish")
    chain = [(m.sender, m.recipient, m.type) for m in await real_app.api.messages(None, 50)
             if m.sender != "operator"]
    assert chain == [("dev", "rev", "task"), ("rev", "test", "task"), ("test", "dev", "result")]
    for m in await real_app.api.messages(None, 50):
        await wait_for(lambda m=m: _all_consumed(real_app, m.id), 60, f"#{m.id} consumed")
    roles = {r.name: real_app.pool.roles[r.id] for r in real_app.pool.fleet.live()}
    assert roles == {"dev": ("developer",), "rev": ("reviewer",), "test": ("tester",)}
    audit = [a for a in await real_app.store.audit.recent(20)
             if a.action == "team" and a.args.startswith("devteam")]
    assert len(audit) == 1 and audit[0].ok  # the whole team: one audited action


async def _all_consumed(app, message_id):
    view = await app.api.message(message_id)
    return all(d.state == "consumed" for d in view.deliveries)
