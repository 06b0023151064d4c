"""Files the operator sends an agent: a photo or document in reply to one of the agent's
messages (Telegram: its card or an escalation's copy; Slack: its thread). Who may, which agent,
how big: decided here once for every platform, before a byte is downloaded; the supervisor
stores it (safe name, no overwrite) and tells the agent."""

from __future__ import annotations

from bot.kit.ports import (
    ChatError,
    ChatId,
    FileTooBig,
    FleetPort,
    IncomingFile,
    MessageId,
    Sender,
)
from commands.base import Caller, Reply, Role
from commands.files import size_text

NOT_A_REPLY = Reply.error(
    "I do not know which agent that file is for.",
    "Send it as a reply to one of the agent's messages (its status card, or a question it "
    "asked); on Slack, in the agent's thread.")
VIEWER = Reply.error("Viewers cannot send files to agents.",
                     "Ask an admin to make you an operator (/operators).")


async def agent_of(fleet: FleetPort, platform: str, chat: ChatId, message: MessageId | None,
                   card_of: str | None) -> str | None:
    """The agent a message in reply to `message` is for: the agent whose card or thread it
    is, or whose escalation's copy."""
    if message is None:
        return None
    if card_of is not None:
        return card_of
    esc_id = await fleet.escalation_for_message(platform, chat, message)
    if esc_id is not None:
        row = await fleet.escalation(esc_id)
        if row is not None and row.agent_id:
            return str(row.agent_id)
    return await fleet.agent_for_card(platform, chat, message)


async def receive(fleet: FleetPort, platform: str, caller: Caller, sender: Sender,
                  agent_id: str | None, sent: IncomingFile, caption: str) -> Reply:
    """One file: refused (viewer, no agent, too big: nothing downloaded or written), or
    downloaded at most one byte past the limit and handed to the supervisor."""
    if caller.role < Role.OPERATOR:
        return VIEWER
    if agent_id is None:
        return NOT_A_REPLY
    limit = fleet.attachment_limit()
    if sent.size is not None and sent.size > limit:
        return too_big(size_text(sent.size), limit)
    try:
        data = await sent.fetch(limit)
    except FileTooBig as exc:
        return too_big(size_text(exc.size) if exc.size else f"more than {size_text(limit)}", limit)
    except ChatError as exc:
        return Reply.error(f"I could not download that file from {platform}: {exc}",
                           "Send it again in a moment.")
    if len(data) > limit:
        return too_big(f"more than {size_text(limit)}", limit)
    return await fleet.attach(agent_id, sent, data, caption, sender, platform)


def too_big(size: str, limit: int) -> Reply:
    return Reply.error(f"That file is too big: {size}, and the limit is {size_text(limit)}.",
                       "Send a smaller file (compress or split it); an admin can raise "
                       "`attachment_max_bytes` in the settings.")


__all__ = ["NOT_A_REPLY", "VIEWER", "agent_of", "receive", "too_big"]
