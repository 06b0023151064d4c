"""What a plain reply to one of our messages means: one rule for every platform, which only
says which message (in which chat) the operator replied to: Telegram a reply to a message,
Slack a message in a thread (the thread's top message)."""

from __future__ import annotations

from bot.kit.ports import ChatId, FleetPort, MessageId
from supervisor.api import Kind
from supervisor.sanitize import CleanText, piece

# An agent's open escalations that a plain text answers (a permission request needs a decision).
FREE_TEXT_KINDS = (Kind.QUESTION, Kind.PLAN)


async def reply_line(fleet: FleetPort, platform: str, chat: ChatId, message: MessageId,
                     text: CleanText, *, card_of: str | None = None) -> CleanText | None:
    """The command a reply of `text` to `message` stands for, or None when the message is
    neither of these:

    - a copy of an escalation: a question is answered with the text, a permission request
      denied with it as the reason;
    - an agent's status card (Slack: the top of its thread): the text answers the agent's open
      free-text question if it has one, else it is a message to the agent. `card_of`: the
      agent whose card the front end knows `message` to be (posted, maybe not recorded yet)."""
    esc_id = await fleet.escalation_for_message(platform, chat, message)
    if esc_id is not None:
        row = await fleet.escalation(esc_id)
        verb = "deny" if row is not None and row.kind == Kind.PERMISSION else "answer"
        return piece(text, f"/{verb} {esc_id} {text}")
    agent_id = card_of or await fleet.agent_for_card(platform, chat, message)
    if agent_id is None:
        return None
    for row in await fleet.pending(agent_id):
        if row.kind in FREE_TEXT_KINDS and row.free_text:
            return piece(text, f"/answer {row.id} {text}")
    return piece(text, f"/ask {agent_id} {text}")


__all__ = ["reply_line"]
