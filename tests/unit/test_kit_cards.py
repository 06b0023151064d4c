"""Status cards on an injected clock: many events between two ticks make one send or one edit
per viewer, the card shows the current tool and the agent's latest lines, a dead agent's card
gets its last state and no buttons; no real sleeps."""

from __future__ import annotations

import asyncio

import pytest

from bot.kit.cards import StatusCards
from bot.kit.outbox import Outbox
from bot.kit.ports import ActivityKind, AgentActivity, AgentView, ChatId
from commands.base import Button
from tests.fakes.fake_chat import FakeChat, FakeClock

A, B = ChatId("a"), ChatId("b")
BUTTONS = (Button("⏸ Pause", "/pause a1"), Button("💀 Kill", "/kill a1", confirm=True))


class Agents:
    """The one fleet call status cards make."""

    def __init__(self) -> None:
        self.views: dict[str, AgentView] = {}

    async def agent(self, agent_id: str) -> AgentView | None:
        return self.views.get(agent_id)


@pytest.fixture
async def rig():
    clock, chat, agents = FakeClock(), FakeChat(), Agents()
    outbox = Outbox(chat, clock)

    async def viewers():
        return [A, B]

    cards = StatusCards(agents, outbox, clock, viewers, interval_s=2.0)  # type: ignore[arg-type]
    task = asyncio.create_task(cards.run())
    yield clock, chat, agents, outbox, cards
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await outbox.aclose()


def view(clock, state="working", *, tool="Bash", turns=0, live=True):
    return AgentView("a1", "fixer", state, live, tool, clock.now() - 65, turns, 0.0125,
                     BUTTONS if live else ())


async def tick(clock, outbox, seconds=2.0):
    await clock.advance(seconds)
    await outbox.flush(5)


def calls(chat, method):
    return [c for c in chat.calls if c[0] == method]


async def test_events_between_ticks_become_one_card_then_one_edit(rig):
    clock, chat, agents, outbox, cards = rig
    agents.views["a1"] = view(clock)
    for i in range(30):
        cards.note(AgentActivity("a1", ActivityKind.TEXT, f"step {i}: looking at tests"))
    cards.note(AgentActivity("a1", ActivityKind.TOOL, "Bash: pytest -q tests/unit"))
    await tick(clock, outbox, 1.0)
    assert chat.calls == []  # the interval has not passed
    await tick(clock, outbox, 1.0)
    assert len(calls(chat, "send")) == 2  # one card per viewer, not one per event
    (card,) = chat.sent(A)
    assert card.silent and "fixer" in card.text and "working" in card.text
    assert "tool: Bash: pytest -q tests/unit" in card.text
    assert "step 29" in card.text and "step 26" in card.text and "step 25" not in card.text
    assert "elapsed: 1m07s" in card.text and "turns: 0" in card.text
    assert [label for label, _ in card.buttons[0]] == ["⏸ Pause", "💀 Kill"]

    # A long turn stays visible: more lines stream, the card follows with a single edit.
    for i in range(30, 40):
        cards.note(AgentActivity("a1", ActivityKind.TEXT, f"step {i}\n\nstill going"))
    cards.note(AgentActivity("a1", ActivityKind.TOOL, "Edit app.py"))
    await tick(clock, outbox)
    assert len(calls(chat, "edit")) == 2 and len(calls(chat, "send")) == 2
    card = chat.sent(A)[0]
    assert card.edits == 1 and "Edit app.py" in card.text and "step 39" in card.text
    assert "elapsed: 1m09s" in card.text

    await tick(clock, outbox)  # nothing happened: nothing sent
    assert len(chat.calls) == 4


async def test_an_unchanged_card_is_not_edited_and_a_dead_agent_s_card_is_final(rig):
    clock, chat, agents, outbox, cards = rig
    agents.views["a1"] = view(clock)
    cards.note(AgentActivity("a1", ActivityKind.STATE, "working"))
    await tick(clock, outbox)
    cards.note(AgentActivity("a1", ActivityKind.STATE, "working"))
    await tick(clock, outbox, 0.0)  # woken by nothing: still one send per viewer
    assert len(calls(chat, "send")) == 2
    agents.views["a1"] = view(clock, "killed", tool=None, turns=1, live=False)
    cards.note(AgentActivity("a1", ActivityKind.STATE, "killed"))
    await tick(clock, outbox)
    card = chat.sent(B)[0]
    assert "killed" in card.text and "tool: -" in card.text and "turns: 1" in card.text
    assert card.buttons == []
    cards.note(AgentActivity("a1", ActivityKind.STATE, "killed"))
    await tick(clock, outbox)
    assert len(calls(chat, "send")) == 2 and len(calls(chat, "edit")) == 2


async def test_a_card_whose_first_send_is_still_queued_is_edited_once_it_is_out(rig):
    clock, chat, agents, outbox, cards = rig
    agents.views["a1"] = view(clock)
    chat.gate.clear()  # the platform is slow
    cards.note(AgentActivity("a1", ActivityKind.TEXT, "first"))
    await clock.advance(2.0)
    cards.note(AgentActivity("a1", ActivityKind.TEXT, "second"))
    await clock.advance(2.0)
    chat.gate.set()
    await outbox.flush(5)
    await tick(clock, outbox)
    assert len(calls(chat, "send")) == 2
    assert all("second" in m.text for m in chat.sent(A) + chat.sent(B))
