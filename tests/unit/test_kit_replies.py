"""The one rule for what a plain reply means (bot/kit/replies.py), as Telegram's replies and
Slack's threads both use it: an escalation's copy is answered or denied, an agent's card (its
thread) messages the agent or answers its open free-text question, anything else means
nothing. Over a fleet of dicts."""

from __future__ import annotations

from types import SimpleNamespace

from bot.kit.ports import ChatId, MessageId
from bot.kit.replies import reply_line
from supervisor.api import Kind

C = ChatId("C1")


class Fleet:
    """The fleet calls the rule makes."""

    def __init__(self) -> None:
        self.copies: dict[MessageId, str] = {}  # message -> escalation id
        self.cards: dict[MessageId, str] = {}  # message -> agent id
        self.rows: dict[str, SimpleNamespace] = {}

    async def escalation_for_message(self, platform, chat, message):
        return self.copies.get(message)

    async def escalation(self, esc_id):
        return self.rows.get(esc_id)

    async def agent_for_card(self, platform, chat, message):
        return self.cards.get(message)

    async def pending(self, agent_id=None):
        return [r for r in self.rows.values() if agent_id in (None, r.agent_id)]


def row(esc_id: str, kind: Kind, agent_id: str = "a1", free_text: bool = False):
    return SimpleNamespace(id=esc_id, kind=kind, agent_id=agent_id, free_text=free_text)


async def test_a_reply_to_a_question_answers_it_and_to_a_permission_request_denies_it():
    fleet = Fleet()
    fleet.rows = {"q1": row("q1", Kind.QUESTION, free_text=True), "p1": row("p1", Kind.PERMISSION)}
    fleet.copies = {MessageId("10"): "q1", MessageId("11"): "p1"}
    assert await reply_line(fleet, "telegram", C, MessageId("10"), "use 8080") == \
        "/answer q1 use 8080"
    assert await reply_line(fleet, "telegram", C, MessageId("11"), "not there") == \
        "/deny p1 not there"


async def test_a_reply_to_an_agents_card_answers_its_open_question_else_messages_it():
    fleet = Fleet()
    fleet.cards = {MessageId("20"): "a1"}
    assert await reply_line(fleet, "slack", C, MessageId("20"), "go on") == "/ask a1 go on"
    # A permission request or a question with fixed options is not answered by free text.
    fleet.rows = {"p1": row("p1", Kind.PERMISSION), "q0": row("q0", Kind.QUESTION),
                  "o1": row("o1", Kind.QUESTION, agent_id="a2", free_text=True)}
    assert await reply_line(fleet, "slack", C, MessageId("20"), "go on") == "/ask a1 go on"
    fleet.rows["q1"] = row("q1", Kind.PLAN, free_text=True)
    assert await reply_line(fleet, "slack", C, MessageId("20"), "yes") == "/answer q1 yes"


async def test_a_reply_to_anything_else_means_nothing():
    fleet = Fleet()
    fleet.cards = {MessageId("20"): "a1"}
    assert await reply_line(fleet, "telegram", C, MessageId("12345"), "hello") is None
