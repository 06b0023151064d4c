"""Text that reaches the supervisor from outside, made safe to store, log and hand to an agent.

Whatever a front end did or did not do, the API passes every operator text through `clean`:
lone surrogates (which no UTF-8 encoder takes: the store, the CLI's stdin and the log all refuse
them, and the turn used to vanish with no reply) become U+FFFD, and control characters other
than newline and tab are dropped (a carriage return before a newline too; a lone one becomes a
newline). Printable text, emoji and other scripts pass unchanged.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but \t and \n, DEL, and the C1 controls (0x80-0x9f: CSI and OSC among them).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """`text` with lone surrogates replaced and control characters removed (see module doc)."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to do
    if _SURROGATE.search(text):
        # A valid pair (only possible in a str built by hand) is joined; the rest replaced.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)
