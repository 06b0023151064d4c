"""Chat text, the same for every platform: lengths as chat APIs count them (UTF-16 units),
splitting under a limit at paragraph and line boundaries, hidden characters made visible,
previews of texts that must be seen whole (with the whole text as a document), and a Reply laid
out as messages of blocks and files. How a message is marked up is the platform's
(bot/telegram/render.py, bot/slack/render.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from commands.base import Attachment, Reply, Text

# A message's text by default: under Telegram's 4,096 even after a footer is added to an edited
# copy (Slack passes its own, smaller, limit).
SAFE_LIMIT = 3800
DOCUMENT_OVER = 12_000  # longer replies go out as a file, with a preview
# A text the operator must see whole (a command to approve) is shown inline up to this much;
# beyond it a card stops being readable, so it is previewed and the whole goes as a file.
PREVIEW_CHARS = 1500
PREVIEW_LINES = 25


# Control characters and bidi overrides could erase a line of a terminal, or show a chat's
# reader text in another order than it runs: where a command is shown, they become escapes.
_HIDING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def units(text: str) -> int:
    """Length as chat APIs count it: UTF-16 code units (an emoji outside the basic plane is
    two). Telegram's 4,096 and Slack's limits are in these; every limit here is."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def fit(text: str, limit: int) -> int:
    """How many characters of `text` fit in `limit` UTF-16 units."""
    if units(text) <= limit:
        return len(text)
    head = text[:limit]
    if units(head) == limit:  # no wide character in it: the common case
        return limit
    lo, hi = limit // 2, limit  # units(text[:lo]) <= limit < units(text[:hi + 1])
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if units(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def visible(text: str) -> str:
    """`text` with every character that could hide or reorder other text written as an
    escape (\\x1b, \\u202e); newlines and tabs stay."""
    return _HIDING.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` UTF-16 units, cut at a blank line, else a line end, else a
    space, else anywhere."""
    pieces: list[str] = []
    rest = text
    while units(rest) > limit:
        size = fit(rest, limit)
        window = rest[:size]
        cut = window.rfind("\n\n")
        if cut < size // 3:
            cut = window.rfind("\n")
        if cut < size // 3:
            cut = window.rfind(" ")
        if cut < size // 3:
            cut = size
        pieces.append(rest[:cut].rstrip("\n"))
        rest = rest[cut:].lstrip("\n")
    if rest or not pieces:
        pieces.append(rest)
    return pieces


@dataclass(frozen=True, slots=True)
class Preview:
    text: str  # the start of the whole text
    hidden: int  # characters of the whole not in `text`
    total: int
    lines: int

    @property
    def cut(self) -> bool:
        return self.hidden > 0

    def note(self, filename: str) -> str:
        """What the reader is told under a cut preview: that it is cut, and where the rest is."""
        lines = f"{self.lines:,} line{'' if self.lines == 1 else 's'}"
        return (f"✂️ Cut short: {self.hidden:,} more characters are not shown here (the whole "
                f"text is {self.total:,} characters, {lines}). All of it is in the attached "
                f"file {filename}.")


def preview(text: str, max_chars: int = PREVIEW_CHARS, max_lines: int = PREVIEW_LINES) -> Preview:
    """The first lines of `text`, at most `max_lines` of them and `max_chars` UTF-16 units,
    cut at a line end when one is not too far back."""
    rows = text.split("\n")
    lines = len(rows) - (text.endswith("\n") or not text)  # a final newline ends a line
    if units(text) <= max_chars and len(rows) <= max_lines:
        return Preview(text, 0, len(text), lines)
    shown = "\n".join(rows[:max_lines])
    shown = shown[:fit(shown, max_chars)]
    if len(shown) < len(text) and text[len(shown)] != "\n":  # cut inside a line
        end = shown.rfind("\n")
        if end >= max_chars // 2:
            shown = shown[:end]
    return Preview(shown, len(text) - len(shown), len(text), lines)


def group_blocks(blocks: tuple[Text, ...], limit: int = SAFE_LIMIT) -> list[tuple[Text, ...]]:
    """The blocks regrouped into messages of at most `limit` visible characters: a block too
    long for one message is split into pieces of the same style."""
    out: list[tuple[Text, ...]] = []
    parts: list[Text] = []
    size = 0
    for block in blocks:
        text = block.text if block.text.strip() else "…"
        extra = 3 if block.style == "error" else 0
        for piece in split_text(text, limit - extra):
            need = units(piece) + extra + (2 if parts else 0)
            if parts and size + need > limit:
                out.append(tuple(parts))
                parts, size = [], 0
                need = units(piece) + extra
            parts.append(Text(piece, block.style))
            size += need
    if parts:
        out.append(tuple(parts))
    return out


def plan_blocks(reply: Reply,
                limit: int = SAFE_LIMIT) -> tuple[list[tuple[Text, ...]], list[Attachment]]:
    """The messages (as groups of blocks) and files a reply becomes. A block with a filename
    that does not fit a card becomes its preview, a note saying so, and a file with all of
    it. Very long output is sent as a document, with the start of it as a message."""
    blocks: list[Text] = []
    attachments: list[Attachment] = []
    for block in reply.blocks:
        # Escaped before it is measured, so escapes cannot push a preview over the limit.
        seen = preview(visible(block.text)) if block.filename else None
        if seen is None or not seen.cut:
            blocks.append(Text(seen.text, block.style) if seen else block)
            continue
        blocks += [Text(seen.text, block.style), Text(seen.note(block.filename))]
        attachments.append(Attachment(block.filename, block.text.encode(), "text/plain"))
    attachments += reply.attachments
    total = sum(len(b.text) for b in blocks)
    if sum(units(b.text) for b in blocks) <= DOCUMENT_OVER:
        return group_blocks(tuple(blocks), limit), attachments
    full = "\n\n".join(b.text for b in blocks)
    start = full[:fit(full, limit // 2)]
    groups = group_blocks((Text(start, "code"),
                           Text(f"… {total:,} characters in all: the full text is attached.")),
                          limit)
    attachments.insert(0, Attachment("output.txt", full.encode(), "text/plain"))
    return groups, attachments
