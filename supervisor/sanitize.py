"""Text from outside, cleaned once: the one input sanitiser (size bound, terminal escape
sequences, control characters, lone surrogates), the `CleanText` type that says it was applied,
and, separately, `for_terminal`, the escaping of text on its way out to a terminal.

Lone surrogates are what no UTF-8 encoder takes (the store, the CLI's stdin and the log all
refuse them, and the turn used to vanish with no reply): they become U+FFFD. Escape sequences a
terminal acts on (CSI, OSC, ...) are removed whole; then control characters other than newline
and tab are dropped (CR LF and a lone CR become LF). Printable text, emoji and other scripts pass
unchanged. Text is cleaned where it enters (a front end's message, a console line; the API for a
caller that did not): the result is a `CleanText`, which `clean` passes through untouched, so no
text is cleaned twice, and a part that takes text cannot be handed uncleaned text unawares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from supervisor.errors import InvalidRequest

REPLACEMENT = "\ufffd"
# A message longer than this is refused whole, before anything parses it. (A console line is
# cut off at the reader, in bytes, well above it.)
MAX_INPUT_CHARS = 200_000

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but \t and \n, DEL, and the C1 controls (0x80-0x9f: CSI and OSC among them).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# ESC-introduced sequences a terminal acts on: CSI (cursor, clear screen, colours), OSC (title,
# an OSC 52 clipboard write, hyperlinks) up to BEL or ST, and the two-character ones. The C1
# forms (0x9b CSI, 0x9d OSC) count too.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x9d\x98\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC etc.
    r"|\x1b[ -/]*[0-~]"  # two-character (and nF) escapes
)


class CleanText(str):
    """Text `clean` has passed: bounded, no escapes, controls or lone surrogates. Made only
    here (by `clean`, and `piece` for what is cut from one)."""

    __slots__ = ()

    def strip(self, chars: str | None = None) -> CleanText:
        """Trimmed, and still clean (a front end trims what it cleaned)."""
        return CleanText(str.strip(self, chars))


@dataclass(frozen=True, slots=True)
class Cleaned:
    """What a handler may see. `problem` says what was wrong with the input and what to do,
    when it cannot be used at all (too long); `removed` counts what cleaning changed."""

    text: CleanText
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


TOO_LONG_FIX = "Put long material in a file in the agent's directory and refer to it."


def too_long(size: int, limit: int) -> str:
    """What is wrong with a message of `size` characters (TOO_LONG_FIX: what to do)."""
    return f"That message is {size:,} characters; the limit is {limit:,}."


def clean(text: str, *, limit: int = MAX_INPUT_CHARS) -> Cleaned:
    """`text` bounded and cleaned (see the module doc). A `CleanText` within `limit` is
    returned as it is: it was cleaned where it came in."""
    if len(text) > limit:
        return Cleaned(CleanText(), 0, f"{too_long(len(text), limit)} {TOO_LONG_FIX}")
    if isinstance(text, CleanText):
        return Cleaned(text)
    if text.isascii() and text.isprintable():
        return Cleaned(CleanText(text))  # the common case: nothing to do
    text = text.replace("\r\n", "\n")  # a line end, not something removed
    stripped = _ESCAPES.sub("", text)
    out = stripped
    if _SURROGATE.search(out):
        # A valid pair (only possible in a str built by hand) is joined; the rest replaced.
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    out = _CONTROL.sub("", out.replace("\r", "\n"))
    removed = len(text) - len(out) + out.count(REPLACEMENT) - stripped.count(REPLACEMENT)
    return Cleaned(CleanText(out), removed)


def clean_text(text: str, *, limit: int = MAX_INPUT_CHARS) -> CleanText:
    """`clean` for a part that takes text from its caller: the clean text, or InvalidRequest
    saying what was wrong. No work for a `CleanText`."""
    cleaned = clean(text, limit=limit)
    if cleaned.problem:
        raise InvalidRequest(cleaned.problem)
    return cleaned.text


def piece(whole: CleanText, part: str) -> CleanText:
    """`part`, made from `whole` by cutting (a slice, quotes and their backslashes removed, as
    a command's parser cuts its arguments) or by wrapping it in Switchboard's own words (a
    command around an answer): nothing from outside was added, so it is as clean as `whole`."""
    return CleanText(part)


_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def for_terminal(text: str) -> str:
    """Output, not input: `text` safe to print on a terminal, every control character (escape
    sequences included), bidi override and lone surrogate written as a visible escape (\\x1b,
    \\u202e, \\ud800); newlines and tabs stay. Idempotent."""
    return _TERMINAL_UNSAFE.sub(lambda m: m.group().encode(
        "unicode_escape", "surrogatepass").decode("ascii"), text)


__all__ = ["MAX_INPUT_CHARS", "REPLACEMENT", "TOO_LONG_FIX", "CleanText", "Cleaned", "clean",
           "clean_text", "for_terminal", "piece", "too_long"]
