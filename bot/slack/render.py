"""Replies as Slack Block Kit: mrkdwn escaping with mentions neutralised, sections under
Slack's limits (3,000 characters a section, 50 blocks, about 12,000 characters of text a
message), buttons with their action and a native confirm dialog, and the layout of a long
reply into messages and files."""

from __future__ import annotations

import re
from typing import Any

from bot.kit import Layout, action_of
from bot.kit.text import plan_blocks, split_text, visible
from commands.base import Button, Reply, Text

SECTION_CHARS = 2900  # Slack refuses a section over 3,000 characters
MESSAGE_CHARS = 11_000  # Slack refuses near 13,200 characters of text in all, whatever the blocks
MESSAGE_BLOCKS = 45  # of 50, leaving room for the buttons and a note
FALLBACK_CHARS = 3000  # the notification text; Slack cuts the top-level text at 40,000
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
ACTIONS_PER_BLOCK = 25
CUT_NOTE = "✂️ The rest did not fit in a Slack message."
# Slack-only buttons next to the kit's: these open a modal rather than run a command.
DENY_REASON = "sb_deny_reason"
DETAILS_PREFIX = "i:"

_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.I)
WORD_JOINER = "\u2060"


def escape(text: str) -> str:
    """Agent text as mrkdwn that shows as typed: `&`, `<`, `>` escaped, which also disarms
    `<!channel>`, `<!here>`, `<@U123>` and links; a bare @channel gets a word joiner."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST.sub(lambda m: "@" + WORD_JOINER + m.group(1), text)


def _styled(style: str, text: str) -> str:
    """One piece of a block, rendered; `text` is raw."""
    body = escape(visible(text) if style == "code" else text)
    if style == "code":
        # Backticks in the text must not end the code block early.
        return "```" + body.replace("```", "`\u200b``") + "```"
    if style == "title":
        return f"*{body}*" if body.strip() else body
    if style == "error":
        return f"⚠️ {body}"
    return body


def rendered_len(style: str, text: str) -> int:
    return len(_styled(style, text))


def split_rendered(style: str, text: str, limit: int = SECTION_CHARS) -> list[str]:
    """Raw pieces of `text`, each at most `limit` characters once rendered (escaping can make
    text five times longer), cut at paragraph, line or word ends where it can."""
    out: list[str] = []
    for piece in split_text(text, limit):
        size = rendered_len(style, piece)
        if size <= limit:
            out.append(piece)
            continue
        smaller = min(len(piece) - 1, max(1, int(len(piece) * limit / size) - 8))
        out += [p for part in split_text(piece, smaller)
                for p in split_rendered(style, part, limit)]
    return out or [""]


def layout(reply: Reply) -> Layout:
    """Messages that each fit Slack (the last carries the buttons), then files. Texts to be
    seen whole are previewed with their file; very long output becomes a file with its start
    shown (bot.kit.text does both, the same for every chat)."""
    groups, files = plan_blocks(reply, SECTION_CHARS)
    messages: list[list[Text]] = [[]]
    size = 0
    for block in (b for group in groups for b in group):
        for piece in split_rendered(block.style, block.text):
            need = rendered_len(block.style, piece)
            if messages[-1] and (size + need > MESSAGE_CHARS
                                 or len(messages[-1]) >= MESSAGE_BLOCKS):
                messages.append([])
                size = 0
            messages[-1].append(Text(piece, block.style))
            size += need
    replies = [Reply(blocks=tuple(m)) for m in messages if m]
    if replies and reply.buttons:
        replies[-1] = Reply(blocks=replies[-1].blocks, buttons=reply.buttons)
    return Layout(tuple(replies), tuple(files))


# -- blocks ---------------------------------------------------------------------------------------


def section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn, "verbatim": True}}


def context(mrkdwn: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn,
                                             "verbatim": True}]}


def plain(text: str, limit: int) -> dict[str, Any]:
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return {"type": "plain_text", "text": text or " ", "emoji": True}


def _style_of(button: Button) -> str | None:
    label = button.label.lower()
    if "allow" in label and "session" not in label:
        return "primary"
    if button.confirm or "kill" in label:
        return "danger"
    return None


def button(b: Button, action_id: str) -> dict[str, Any]:
    """A Block Kit button running `b`. A destructive one asks first, in Slack's own confirm
    dialog, so its value is the command itself (no "are you sure?" message round trip)."""
    element: dict[str, Any] = {"type": "button", "action_id": action_id,
                               "text": plain(b.label, BUTTON_TEXT),
                               "value": (b.command if b.confirm else action_of(b))[:BUTTON_VALUE]}
    style = _style_of(b)
    if style:
        element["style"] = style
    if b.confirm:
        element["confirm"] = {"title": plain("Are you sure?", 100),
                              "text": plain(f"{b.label}: {b.command}", 300),
                              "confirm": plain("Yes", 30), "deny": plain("Cancel", 30),
                              "style": "danger"}
    return element


def _deny_reason(rows: tuple[tuple[Button, ...], ...]) -> str | None:
    """The escalation id of a card that can be denied: it also gets "Deny with reason"."""
    for row in rows:
        for b in row:
            parts = b.command.split()
            if len(parts) == 2 and parts[0] == "/deny":
                return parts[1]
    return None


def actions(rows: tuple[tuple[Button, ...], ...]) -> list[dict[str, Any]]:
    elements = [button(b, f"sb:{i}") for i, b in enumerate(b for row in rows for b in row)]
    esc = _deny_reason(rows)
    if esc is not None:
        elements.insert(2, {"type": "button", "action_id": DENY_REASON, "value": esc,
                            "text": plain("✍️ Deny with reason", BUTTON_TEXT)})
    return [{"type": "actions", "block_id": f"sb-actions-{n}",
             "elements": elements[n:n + ACTIONS_PER_BLOCK]}
            for n in range(0, len(elements), ACTIONS_PER_BLOCK)][:2]


def blocks_of(reply: Reply) -> list[dict[str, Any]]:
    """One message's blocks, never over a limit: what does not fit is cut, with a note (the
    layout sees that nothing is cut for replies; edits of cards are short)."""
    out: list[dict[str, Any]] = []
    size = 0
    for block in reply.blocks:
        for piece in split_rendered(block.style, block.text or " "):
            text = _styled(block.style, piece) or " "
            if size + len(text) > MESSAGE_CHARS or len(out) >= MESSAGE_BLOCKS:
                out.append(context(CUT_NOTE))
                return out + actions(reply.buttons)
            out.append(section(text))
            size += len(text)
    return out + actions(reply.buttons)


def fallback(reply: Reply) -> str:
    """The message's top-level text: the notification and what screen readers say."""
    text = escape(reply.plain()) or "…"
    return text if len(text) <= FALLBACK_CHARS else text[:FALLBACK_CHARS - 1] + "…"


def message(reply: Reply) -> dict[str, Any]:
    return {"text": fallback(reply), "blocks": blocks_of(reply)}
