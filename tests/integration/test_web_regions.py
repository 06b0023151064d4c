"""The web console's regions rendered from a running Switchboard (the fake CLI): an agent's
output with markup arrives as text, never as markup; Needs you shows the whole question with
its recommended answer and buttons for an operator, none for a viewer; the fleet lists every
agent with its spend; the transcript draws a shell call with its output."""

from __future__ import annotations

import json

import pytest

from bot.web.render import Regions
from commands.base import Role
from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(60)
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def regions(app) -> Regions:
    return Regions(lambda: app.api, lambda: app.links, lambda: (), {})


async def idle(app, name: str) -> str:
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 20, f"{name} idle")
    return runner.id


async def test_a_hostile_agents_markup_is_escaped_in_every_region(fake_app):
    assert (await run(fake_app, f"/spawn evil {HOSTILE}")).ok
    agent_id = await idle(fake_app, "evil")
    r = regions(fake_app)
    page = await r.agent(agent_id, Role.ADMIN)
    assert "<script>" not in page and "<img" not in page
    assert "ECHO: &lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    fleet = (await r.fleet(Role.ADMIN)).whole()
    assert "<script>" not in fleet and f'href="/agents/{agent_id}"' in fleet


async def test_needs_you_shows_the_question_whole_with_buttons_only_for_operators(fake_app):
    assert (await run(fake_app, "/spawn dev hello")).ok
    await idle(fake_app, "dev")
    ask = {"question": "Ship it? " + "x" * 3000 + " <b>end</b>",
           "options": ["Yes", "No"], "recommended": "no", "why": "tests are red"}
    assert (await run(fake_app, f"/ask dev MCP ask_operator {json.dumps(ask)}")).ok
    rows: list = []

    async def opened() -> bool:
        rows[:] = await fake_app.api.pending()
        return bool(rows)

    await wait_for(opened, 20, "the question")
    r = regions(fake_app)
    op = await r.needs(Role.OPERATOR)
    assert "x" * 3000 + " &lt;b&gt;end&lt;/b&gt;" in op  # never cut, never markup
    assert "★ Recommended: No: tests are red" in op
    assert 'name="verb" value="answer"' in op and ">No</button>" in op
    viewer = await r.needs(Role.VIEWER)
    assert "x" * 3000 in viewer
    assert "<form" not in viewer and "<button" not in viewer
    header = await r.header(Role.VIEWER)
    assert "<b>1</b> needs you" in header and "KILL ALL" not in header
    assert "KILL ALL" in await r.header(Role.ADMIN)


async def test_the_fleet_and_the_transcript(fake_app):
    assert (await run(fake_app, "/spawn a one")).ok
    assert (await run(fake_app, "/spawn b two")).ok
    a = await idle(fake_app, "a")
    await idle(fake_app, "b")
    r = regions(fake_app)
    fleet = (await r.fleet(Role.OPERATOR)).whole()
    assert fleet.count('class="agent state-idle"') == 2
    assert 'value="pause"' in fleet and 'value="kill"' in fleet
    assert "<form" not in (await r.fleet(Role.VIEWER)).whole()
    page = await r.agent(a, Role.VIEWER)
    assert "ECHO: one" in page and "<h2>Turns</h2>" in page
