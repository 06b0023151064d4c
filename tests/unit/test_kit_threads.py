"""The kit for a platform whose operators share one channel (Slack): the per-chat pace kept in
code, pinned cards found again after a restart, and what concerns an agent sent under its card
even before the first tick. On a fake chat and an injected clock; no real sleeps."""

from __future__ import annotations

import asyncio

import pytest

from bot.kit.cards import StatusCards
from bot.kit.outbox import Outbox, Pace
from bot.kit.ports import AgentView, ChatId, MessageId
from commands.base import Reply
from tests.fakes.fake_chat import FakeChat, FakeClock

C = ChatId("C1")


async def test_the_pace_spaces_calls_after_a_burst_and_a_newer_edit_replaces_a_queued_one():
    clock, chat = FakeClock(auto=True), FakeChat()
    box = Outbox(chat, clock, pace=Pace(per_s=2.0, burst=3))
    first = await box.send(C, Reply.text("card"))
    sends = [box.send(C, Reply.text(f"m{i}")) for i in range(4)]
    edits = [box.edit(C, first, Reply.text(f"card v{i}")) for i in range(5)]
    await asyncio.gather(*sends, *edits)
    assert chat.texts(C)[1:] == ["m0", "m1", "m2", "m3"]
    # 3 at once (the burst), then one every 0.5 s: the platform's limit is never reached.
    assert clock.sleeps == [0.5] * 3
    assert [c[0] for c in chat.calls].count("edit") == 1  # five edits of one message: merged
    assert chat.sent(C)[0].text == "card v4"
    await box.aclose()


class Fleet:
    """The fleet calls pinned cards make, over dicts."""

    def __init__(self, clock: FakeClock) -> None:
        self.views = {"a1": AgentView("a1", "fixer", "working", True, None,
                                      clock.now(), 0, 0.0)}
        self.cards: dict[tuple[str, str, ChatId], MessageId] = {}

    async def agent(self, agent_id):
        return self.views.get(agent_id)

    async def card(self, platform, agent_id, chat):
        return self.cards.get((platform, agent_id, chat))

    async def record_card(self, platform, agent_id, chat, message):
        self.cards[(platform, agent_id, chat)] = message


@pytest.fixture
async def rig():
    clock, chat = FakeClock(), FakeChat()
    fleet, box = Fleet(clock), Outbox(chat, clock)

    async def viewers():
        return [C]

    cards = StatusCards(fleet, box, clock, viewers, interval_s=1.0,  # type: ignore[arg-type]
                        pinned=True)
    yield clock, chat, fleet, box, cards
    await box.aclose()


async def test_a_pinned_card_is_recorded_and_found_again_after_a_restart(rig):
    clock, chat, fleet, box, cards = rig
    cards._dirty.add("a1")
    await cards.tick()
    await box.flush(5)
    await cards.tick()  # records what the last tick sent
    (card,) = chat.sent(C)
    assert fleet.cards == {(chat.platform, "a1", C): card.id}
    # A new run (a restart): the card is edited, not sent again.
    again = StatusCards(fleet, box, clock, cards.viewers, pinned=True)  # type: ignore[arg-type]
    fleet.views["a1"] = AgentView("a1", "fixer", "killed", False, None, clock.now(), 1, 0.1)
    again._dirty.add("a1")
    await again.tick()
    await box.flush(5)
    assert len(chat.sent(C)) == 1 and "killed" in chat.sent(C)[0].text
    assert await again.anchor("a1", C) == card.id


async def test_the_anchor_sends_the_card_first_when_no_tick_has_yet(rig):
    clock, chat, fleet, box, cards = rig
    anchor = await cards.anchor("a1", C)  # a turn that ended before the first tick
    (card,) = chat.sent(C)
    assert anchor == card.id and "fixer" in card.text
    assert await cards.anchor("a1", C) == card.id  # once
    assert await cards.anchor(None, C) is None


async def test_a_tick_while_the_anchor_looks_up_the_card_leaves_one_card(rig):
    """Regression: the anchor looked for a recorded card, a tick sent the card meanwhile, and
    the anchor then sent a second one (a loaded machine; the answer went under the second)."""
    clock, chat, fleet, box, cards = rig
    lookup, gate, recorded = asyncio.Event(), asyncio.Event(), fleet.card

    async def slow_card(*args):
        lookup.set()
        await gate.wait()
        return await recorded(*args)

    fleet.card = slow_card  # type: ignore[method-assign]
    anchoring = asyncio.create_task(cards.anchor("a1", C))
    await lookup.wait()
    fleet.card = recorded  # type: ignore[method-assign]
    cards._dirty.add("a1")
    await cards.tick()  # sends the card while the anchor waits
    gate.set()
    anchor = await anchoring
    await box.flush(5)
    (card,) = chat.sent(C)
    assert anchor == card.id
