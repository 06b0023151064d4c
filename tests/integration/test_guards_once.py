"""Each guard of an operator's /ask applies once on its way in (issue 24): typed in a chat, it
is cleaned and bounded once (the front desk), rate limited once per limit (the operator's
commands, the agent's messages), refused once while halted (the pool's admission), and its
length checked once against the prompt limit (where the bus stores it). A real Switchboard,
its SQLite store and the fake claude CLI, behind the real front desk on a fake chat."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import Switchboard
from bot.kit import FrontDesk, Incoming, Sender
from commands.base import Caller, Role
from tests.conftest import wait_for
from tests.fakes.fake_chat import FakeChat
from tests.integration.test_kit import PLATFORM, dm, open_desk, says

pytestmark = pytest.mark.timeout(90)

ALICE = Sender("100", "alice")  # the seeded admin of open_desk
ADMIN_CALLER = Caller(f"{PLATFORM}:{ALICE.user_id}", ALICE.name, Role.ADMIN, PLATFORM)


@pytest.fixture
def desk_with(fake_settings) -> Callable[..., Any]:
    """`async with desk_with(commands_per_minute=3) as (app, desk, chat): ...`"""

    @asynccontextmanager
    async def make(**changes: Any) -> AsyncIterator[tuple[Switchboard, FrontDesk, FakeChat]]:
        chat = FakeChat(PLATFORM)
        async with Switchboard(fake_settings.with_(**changes)) as app:
            desk = await open_desk(app, chat)
            try:
                yield app, desk, chat
            finally:
                await desk.stop()

    return make


def last(chat: FakeChat) -> str:
    """The newest reply in Alice's chat: agents' notices (ℹ️ a finished ...) arrive in their
    own time, also after the reply to the command that caused them."""
    return [t for t in chat.texts(dm(ALICE)) if not t.startswith("ℹ️")][-1]


async def idle_agent(app: Switchboard, desk: FrontDesk, chat: FakeChat, name: str) -> None:
    await says(desk, ALICE, f"/spawn {name} hello")
    assert "Spawned" in last(chat) or name in last(chat), last(chat)
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 20, f"{name} idle")


async def test_one_ask_counts_once_against_the_command_rate(desk_with):
    """Commands and messages share one limiter: an /ask is one command (not two), so with
    3 a minute the spawn and two asks pass and the fourth command is refused."""
    async with desk_with(commands_per_minute=3, messages_per_minute=100) as (app, desk, chat):
        await idle_agent(app, desk, chat, "a")
        await says(desk, ALICE, "/ask a one")
        assert last(chat).startswith("Sent to a"), last(chat)
        await says(desk, ALICE, "/ask a two")
        assert last(chat).startswith("Sent to a"), last(chat)
        await says(desk, ALICE, "/agents")
        assert "at most 3 commands per minute" in last(chat), last(chat)


async def test_one_ask_counts_once_against_the_agents_message_rate(desk_with):
    async with desk_with(commands_per_minute=100, messages_per_minute=2) as (app, desk, chat):
        await idle_agent(app, desk, chat, "a")
        for text in ("one", "two"):
            await says(desk, ALICE, f"/ask a {text}")
            assert last(chat).startswith("Sent to a"), last(chat)
        await says(desk, ALICE, "/ask a three")
        assert "messages to a" in last(chat), last(chat)
        bodies = [m.body for m in await app.store.bus.recent(None, 20)]
        assert bodies.count("one") == bodies.count("two") == 1 and "three" not in bodies


async def test_a_halted_fleet_refuses_an_ask_with_the_one_message(desk_with):
    """Refused once, first, before the agent is looked up: the reply is the kill switch's
    message and what to do, said once, and nothing is stored."""
    async with desk_with() as (app, desk, chat):
        await idle_agent(app, desk, chat, "a")
        await app.api.halt(by=ADMIN_CALLER)
        # The kill switch's own notice reaches this admin's chat through the hub, in its own
        # time: wait for it, so the last message read below is the reply to the /ask.
        await wait_for(lambda: any("Kill switch triggered" in t for t in chat.texts(dm(ALICE))),
                       20, "the kill switch notice")
        await desk.flush(5)
        before = len(await app.store.bus.recent(None, 50))
        for ref in ("a", "nobody"):
            await says(desk, ALICE, f"/ask {ref} hello")
            text = last(chat)
            assert text.count("Refused: the kill switch is on") == 1, text
            assert "/killswitch off confirm" in text, text
        assert len(await app.store.bus.recent(None, 50)) == before


async def test_typed_text_is_cleaned_once_and_bounded_once(desk_with):
    """The note counts what the front desk removed; the agent's message is that clean text,
    and an over-long message gets the front desk's refusal, not a second one."""
    async with desk_with(max_prompt_chars=50) as (app, desk, chat):
        await idle_agent(app, desk, chat, "a")
        await desk.on_message(Incoming(dm(ALICE), ALICE, "/ask a red\x1b[2J\x07 alert"))
        await desk.flush(5)
        text = last(chat)
        assert text.startswith("Sent to a") and "5 characters" in text, text
        bodies = [m.body for m in await app.store.bus.recent(None, 20)]
        assert "red alert" in bodies, bodies
        # The prompt limit, once, where the message is stored: the bus's words.
        await says(desk, ALICE, "/ask a " + "y" * 51)
        text = last(chat)
        assert text.count("the limit is 50") == 1 and "51 characters" in text, text
        await says(desk, ALICE, "/ask a " + "z" * 200_001)
        text = last(chat)
        assert text.count("the limit is 200,000") == 1 and "too long" in text, text
