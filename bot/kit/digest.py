"""Notice digests: routine notices (those sent without a notification: an agent finished, a
scheduled run's finding, a reviewer's decision) reach a chat at most once a window. The first
goes out at once; the ones that come within `window_s` of the last one sent are held and go out
together, as one silent message, when the window closes (a single held one as its own card).
Whatever needs an answer, and every loud notice, is never held. Pure: the caller gives the time
(its clock's monotonic seconds) and sends what this says; bench/operator_attention.py counts
the day's pushes through the same class."""

from __future__ import annotations

from bot.kit import escalation as render
from bot.kit.ports import Escalation
from bot.kit.text import visible
from commands.base import Reply, Text
from supervisor.api import SENT_FILE
from supervisor.events import REPLY_NOTICE

# A notice whose text is longer than this goes out on its own (a final answer worth reading
# whole), never in a digest.
DIGEST_BODY_CHARS = 600
DIGEST_MAX = 20  # notices in one digest message; more wait for the next one


def gatherable(row: Escalation) -> bool:
    """A routine notice short enough to share a message: silent, no file, no detail, and not
    the answer to the operator's own /ask or /spawn (they are waiting for it)."""
    return (render.quiet(row) and not row.detail and len(row.body) <= DIGEST_BODY_CHARS
            and row.tool_name not in (SENT_FILE, REPLY_NOTICE))


class Gatherer:
    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.held: list[Escalation] = []
        self._last_sent: float | None = None  # when the last routine message went out

    def offer(self, row: Escalation, now: float) -> bool:
        """True: send `row` now (the window starts); False: it is held for the digest."""
        if self.window_s <= 0 or not gatherable(row):
            return True
        if any(r.id == row.id for r in self.held):
            return False  # offered again (not yet acknowledged): already held
        if not self.held and (self._last_sent is None or now - self._last_sent >= self.window_s):
            self._last_sent = now
            return True
        self.held.append(row)
        return False

    def next_due(self) -> float | None:
        """When the held notices are due (None: nothing held)."""
        if not self.held or self._last_sent is None:
            return None
        return self._last_sent + self.window_s

    def due(self, now: float) -> list[Escalation]:
        """The held notices once their window closed (then a new window starts), else []."""
        at = self.next_due()
        if at is None or now < at:
            return []
        out, self.held = self.held[:DIGEST_MAX], self.held[DIGEST_MAX:]
        self._last_sent = now
        return out


def digest(rows: list[Escalation]) -> Reply:
    """Several routine notices as one message: each one's title and text, oldest first, and
    the buttons they carry (a reviewer's decision's overturn), one row each."""
    blocks = [Text(f"ℹ️ {len(rows)} notices", "title")]
    for row in rows:
        blocks.append(Text(render.header(row), "title"))
        if row.body:
            blocks.append(Text(visible(row.body), "plain"))
    buttons = tuple(b for row in rows for b in render.notice_buttons(row))
    return Reply(blocks=tuple(blocks), buttons=buttons)
