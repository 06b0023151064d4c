"""Rules learned from answers (issue 27): after the operator allowed the same call of an agent
three times in a row, its next request offers "♾ Always allow" with the rule in words; taking it
adds the rule to the policy file with its author, and that exact call then runs without a push.
Never offered for what a rule denies (the blocklist) or asks about. A real Switchboard and its
SQLite store, the fake claude CLI asking `can_use_tool` (ASKTOOL), behind the real front desk on
a fake chat."""

from __future__ import annotations

import json
import tomllib

import pytest

from bot.kit import FrontDesk
from supervisor.api import ALWAYS_ALLOW
from tests.conftest import wait_for
from tests.fakes.fake_chat import FakeChat
from tests.integration.test_guards_once import ALICE, desk_with, idle_agent, last  # noqa: F401
from tests.integration.test_kit import add_staff, dm, says, taps

pytestmark = pytest.mark.timeout(120)
BOB_ID = "200"  # test_kit's operator (not an admin)


def tool(command: str) -> str:
    return "ASKTOOL Bash " + json.dumps({"command": command})


async def request(app, desk: FrontDesk, chat: FakeChat, command: str):
    """Ask the agent to make the call; the request it opens, or None when its turn ended
    without one (the call was decided without the operator)."""
    before = {r.id for r in await app.api.pending()}
    done = len([t for t in chat.texts(dm(ALICE)) if "dev finished" in t])
    await says(desk, ALICE, f"/ask dev {tool(command)}")
    opened: list = []

    async def settled() -> bool:
        opened[:] = [r for r in await app.api.pending() if r.id not in before]
        return bool(opened) or len([t for t in chat.texts(dm(ALICE))
                                    if "dev finished" in t]) > done

    await wait_for(settled, 30, f"a request or the end of the turn for {command!r}")
    return opened[0] if opened else None


async def finished(app) -> None:
    runner = await app.pool.fleet.get("dev")
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 30, "dev idle")


async def card_of(chat: FakeChat, esc_id: str):
    """The request's card in the chat, once the front desk has shown it."""
    def shown():
        return [m for m in chat.sent(dm(ALICE)) if esc_id in m.text and m.buttons]

    await wait_for(shown, 20, f"the card of {esc_id}")
    return shown()[-1]


async def allow_three_times(app, desk, chat, command: str) -> None:
    for _ in range(3):
        row = await request(app, desk, chat, command)
        assert row is not None and ALWAYS_ALLOW not in row.options, row
        assert "♾" not in " ".join(label for r in (await card_of(chat, row.id)).buttons
                                   for label, _ in r)
        await says(desk, ALICE, f"/approve {row.id}")
        await finished(app)


async def test_three_approvals_offer_a_rule_and_taking_it_ends_pushes(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        await allow_three_times(app, desk, chat, "npm test")

        fourth = await request(app, desk, chat, "npm test")
        assert fourth is not None and ALWAYS_ALLOW in fourth.options
        assert ("Allowed 3 times in a row. ♾ Always allow adds a rule to the policy file: "
                "allow dev to run exactly `npm test`.") in fourth.body
        card = (await card_of(chat, fourth.id))
        always = next(action for row in card.buttons for label, action in row
                      if label == f"♾ {ALWAYS_ALLOW}")
        await taps(desk, ALICE, card, always)
        await finished(app)
        reply = chat.texts(dm(ALICE))
        assert any("from now on without asking: learned rule 1: allow dev to run exactly "
                   "`npm test`" in t for t in reply), reply[-3:]

        # The rule is in the policy file, with who added it; the file still holds the rest.
        path = app.settings.home / "policy.toml"
        data = tomllib.loads(path.read_text())
        assert data["learned"] == [{"id": 1, "agent": "dev", "tool": "Bash",
                                    "call": "Bash:npm test", "by": "alice", "via": "fake",
                                    "at": data["learned"][0]["at"], "approvals": 3}]
        assert data["rules"] and "# Learned rule 1: added by alice via fake" in path.read_text()

        # The fifth: allowed by the rule, no request, no push.
        pushes = len(chat.sent(dm(ALICE)))
        assert await request(app, desk, chat, "npm test") is None
        await finished(app)
        new = [m.text for m in chat.sent(dm(ALICE))[pushes:]]
        assert not any("wants to use" in t for t in new), new
        # Exactly that call: another command still asks.
        other = await request(app, desk, chat, "npm test --update-snapshots")
        assert other is not None and ALWAYS_ALLOW not in other.options
        await says(desk, ALICE, f"/deny {other.id}")
        await finished(app)

        # /policy rules lists it; /policy remove takes it back, and the call asks again.
        await says(desk, ALICE, "/policy rules")
        listing = last(chat)
        assert "1. allow dev to run exactly `npm test`" in listing
        assert "added by alice via fake" in listing and str(path) in listing
        await says(desk, ALICE, "/policy remove 1")
        assert "Removed learned rule 1" in last(chat)
        assert "learned" not in tomllib.loads(path.read_text())
        again = await request(app, desk, chat, "npm test")
        assert again is not None and ALWAYS_ALLOW in again.options  # still three in a row
        await says(desk, ALICE, f"/deny {again.id}")
        await finished(app)


async def test_no_rule_is_offered_for_what_a_rule_denies_or_asks(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "dev")
        # `sudo` is asked about by a rule of the built-in policy: approvals teach nothing.
        await allow_three_times(app, desk, chat, "sudo ls")
        fourth = await request(app, desk, chat, "sudo ls")
        assert fourth is not None and ALWAYS_ALLOW not in fourth.options
        assert "Always allow" not in fourth.body
        # `/approve <id> always` on a request that offers no rule adds none, and says why.
        await says(desk, ALICE, f"/approve {fourth.id} always")
        text = last(chat)
        assert f"{fourth.id} offers no rule" in text and "three" not in text, text
        assert not (app.settings.home / "policy.toml").exists()
        await says(desk, ALICE, f"/deny {fourth.id}")
        await finished(app)
        # A blocklisted command is refused by the policy: no request, so nothing to learn.
        for _ in range(4):
            assert await request(app, desk, chat, "gh pr merge 12") is None
            await finished(app)
        assert not (app.settings.home / "policy.toml").exists()


async def test_only_an_admin_adds_a_rule_and_a_denial_restarts_the_count(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await add_staff(app)
        await idle_agent(app, desk, chat, "dev")
        await allow_three_times(app, desk, chat, "make lint")
        fourth = await request(app, desk, chat, "make lint")
        assert fourth is not None and ALWAYS_ALLOW in fourth.options
        bob = type(ALICE)(BOB_ID, "bob")
        await says(desk, bob, f"/approve {fourth.id} always")
        assert "only an admin can add a rule" in chat.texts(dm(bob))[-1]
        assert not (app.settings.home / "policy.toml").exists()
        await says(desk, ALICE, f"/deny {fourth.id} not today")
        await finished(app)
        # After a denial the same call must be allowed three times in a row again.
        fifth = await request(app, desk, chat, "make lint")
        assert fifth is not None and ALWAYS_ALLOW not in fifth.options
        await says(desk, ALICE, f"/deny {fifth.id}")
        await finished(app)
