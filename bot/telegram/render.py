"""Telegram's rendering of the kit's text: HTML (each block in its own tags, so no code block is
left open), messages under Telegram's 4,096 characters."""

from __future__ import annotations

import html
from dataclasses import dataclass

from bot.kit.text import SAFE_LIMIT, group_blocks, plan_blocks, units
from commands.base import Attachment, Reply, Text

TELEGRAM_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class Chunk:
    html: str
    plain_len: int


def escape(text: str) -> str:
    return html.escape(text, quote=False)


def _wrap(block: Text, piece: str) -> str:
    if block.style == "code":
        return f"<pre>{escape(piece)}</pre>"
    if block.style == "title":
        return f"<b>{escape(piece)}</b>"
    if block.style == "error":
        return f"⚠️ {escape(piece)}"
    return escape(piece)


def html_of(group: tuple[Text, ...]) -> str:
    """One message's HTML: each block in its own tags, so no code block is left open."""
    return "\n\n".join(_wrap(block, block.text) for block in group)


def render_chunks(blocks: tuple[Text, ...], limit: int = SAFE_LIMIT) -> list[Chunk]:
    """HTML messages, each under `limit` characters of visible text. A block too long for one
    message is split, and each piece gets its own tags, so no code block is left open."""
    return [_chunk(group) for group in group_blocks(blocks, limit)]


def _chunk(group: tuple[Text, ...]) -> Chunk:
    size = sum(units(b.text) + (3 if b.style == "error" else 0) for b in group)
    return Chunk(html_of(group), size + 2 * (len(group) - 1))


def plan_reply(reply: Reply, limit: int = SAFE_LIMIT) -> tuple[list[Chunk], list[Attachment]]:
    """plan_blocks, rendered to HTML."""
    groups, attachments = plan_blocks(reply, limit)
    return [_chunk(g) for g in groups], attachments
