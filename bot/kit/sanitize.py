"""Input and terminal hygiene for every front end: what an operator typed or tapped, bounded in
size and cleaned (lone surrogates, control characters, terminal escape sequences) before a
handler sees it, and any text bound for a terminal with its escapes made harmless."""

from __future__ import annotations

import re
from dataclasses import dataclass

from supervisor import sanitize as core

# A message longer than this is refused before it is parsed (the dispatcher's own bound is
# the same; a console line is cut off at the reader, in bytes, well above it).
MAX_INPUT_CHARS = 200_000
# A button's action: Telegram's callback data is at most 64 bytes, a Slack value 2000
# characters; anything longer did not come from a button we made.
MAX_ACTION_CHARS = 2000

# ESC-introduced sequences a terminal acts on: CSI (cursor, clear screen, colours), OSC (title,
# an OSC 52 clipboard write, hyperlinks) up to BEL or ST, and the two-character ones. The C1
# forms (0x9b CSI, 0x9d OSC) count too.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x9d\x98\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC etc.
    r"|\x1b[ -/]*[0-~]"  # two-character (and nF) escapes
)
REPLACEMENT = core.REPLACEMENT


@dataclass(frozen=True, slots=True)
class Cleaned:
    """What a handler may see. `problem` says what was wrong with the input and what to do,
    when it cannot be used at all (too long); `removed` counts what cleaning changed."""

    text: str
    removed: int = 0
    problem: str = ""

    @property
    def note(self) -> str:
        """One line telling the operator what cleaning changed, or ''."""
        if not self.removed:
            return ""
        n = self.removed
        return (f"Note: {n} character{'' if n == 1 else 's'} that cannot be sent on (control "
                "characters, terminal escape sequences or broken surrogates) "
                f"{'was' if n == 1 else 'were'} removed from your message.")


def clean(text: str, *, limit: int = MAX_INPUT_CHARS) -> Cleaned:
    """`text` bounded and cleaned: terminal escape sequences removed, then what the supervisor
    does to every operator text (supervisor/sanitize.py: control characters but newline and tab
    removed, CR LF and a lone CR made LF, lone surrogates replaced by U+FFFD)."""
    if len(text) > limit:
        return Cleaned("", 0, f"That message is {len(text):,} characters; the limit is "
                              f"{limit:,}. Put long material in a file in the agent's directory "
                              "and refer to it.")
    text = text.replace("\r\n", "\n")  # a line end, not something removed
    stripped = _ESCAPES.sub("", text)
    out = core.clean(stripped)
    removed = len(text) - len(out) + out.count(REPLACEMENT) - stripped.count(REPLACEMENT)
    return Cleaned(out, removed)


def clean_action(action: str) -> str | None:
    """A button's action as it came back from the platform, or None if it cannot be one of
    ours (too long, or carrying what no button of ours carries)."""
    if len(action) > MAX_ACTION_CHARS:
        return None
    cleaned = clean(action, limit=MAX_ACTION_CHARS)
    return cleaned.text if not cleaned.removed else None


_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def for_terminal(text: str) -> str:
    """`text` safe to print on a terminal: every control character (escape sequences
    included), bidi override and lone surrogate written as a visible escape (\\x1b, \\u202e,
    \\ud800); newlines and tabs stay. Idempotent."""
    return _TERMINAL_UNSAFE.sub(lambda m: m.group().encode(
        "unicode_escape", "surrogatepass").decode("ascii"), text)


__all__ = ["MAX_ACTION_CHARS", "MAX_INPUT_CHARS", "Cleaned", "clean", "clean_action",
           "for_terminal"]
