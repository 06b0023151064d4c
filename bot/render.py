"""Rendering a platform-neutral Reply for chat: escaping, splitting under a length limit at
paragraph and line boundaries with code blocks kept closed, and overflow to a document."""

from __future__ import annotations

import html
from dataclasses import dataclass

from commands.base import Attachment, Reply, Text

TELEGRAM_LIMIT = 4096
SAFE_LIMIT = 3800  # under the limit even after a footer is added to an edited copy
DOCUMENT_OVER = 12_000  # longer replies go out as a file, with a preview


@dataclass(frozen=True, slots=True)
class Chunk:
    html: str
    plain_len: int


def escape(text: str) -> str:
    return html.escape(text, quote=False)


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at a blank line, else a line end, else a
    space, else anywhere."""
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = window.rfind("\n\n")
        if cut < limit // 3:
            cut = window.rfind("\n")
        if cut < limit // 3:
            cut = window.rfind(" ")
        if cut < limit // 3:
            cut = limit
        pieces.append(rest[:cut].rstrip("\n"))
        rest = rest[cut:].lstrip("\n")
    if rest or not pieces:
        pieces.append(rest)
    return pieces


def _wrap(block: Text, piece: str) -> str:
    if block.style == "code":
        return f"<pre>{escape(piece)}</pre>"
    if block.style == "title":
        return f"<b>{escape(piece)}</b>"
    if block.style == "error":
        return f"⚠️ {escape(piece)}"
    return escape(piece)


def render_chunks(blocks: tuple[Text, ...], limit: int = SAFE_LIMIT) -> list[Chunk]:
    """HTML messages, each under `limit` characters of visible text. A block too long for one
    message is split, and each piece gets its own tags, so no code block is left open."""
    out: list[Chunk] = []
    parts: list[str] = []
    size = 0
    for block in blocks:
        text = block.text if block.text.strip() else "…"
        extra = 3 if block.style == "error" else 0
        for piece in split_text(text, limit - extra):
            need = len(piece) + extra + (2 if parts else 0)
            if parts and size + need > limit:
                out.append(Chunk("\n\n".join(parts), size))
                parts, size = [], 0
                need = len(piece) + extra
            parts.append(_wrap(block, piece))
            size += need
    if parts:
        out.append(Chunk("\n\n".join(parts), size))
    return out


def plan_reply(reply: Reply, limit: int = SAFE_LIMIT) -> tuple[list[Chunk], list[Attachment]]:
    """The messages and files a reply becomes. Very long output is sent as a document, with
    the start of it as a message."""
    total = sum(len(b.text) for b in reply.blocks)
    attachments = list(reply.attachments)
    if total <= DOCUMENT_OVER:
        return render_chunks(reply.blocks, limit), attachments
    full = "\n\n".join(b.text for b in reply.blocks)
    preview = full[: limit // 2]
    chunks = render_chunks((Text(preview, "code"),
                            Text(f"… {total:,} characters in all: the full text is attached.")),
                           limit)
    attachments.insert(0, Attachment("output.txt", full.encode(), "text/plain"))
    return chunks, attachments
