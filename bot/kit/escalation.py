"""The one rendering of an escalation for every front end: the card with its buttons and the
files it needs, the same card once answered or expired, its details, and the whole text for a
terminal. Platform-neutral: blocks, buttons and attachments, which adapters turn into markup."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from bot.kit.actions import details_button
from bot.kit.ports import Escalation
from bot.kit.text import preview, split_text, visible
from commands.approvals import detail_filename, escalation_blocks, escalation_buttons
from commands.base import Attachment, Button, Reply, Text
from supervisor.api import REVIEW_NOTICE, Kind

# The card's share for the body (what kind of call, why asked) when a detail follows it, and
# without one (a question); anything longer is cut with a note and sent whole as a file.
BODY_CHARS = 1000
BODY_ALONE_CHARS = 3000
# A notice longer than this (a final answer) goes out as a reply of its own, split or a file.
LONG_NOTICE_CHARS = 3000
ANSWER_SHOWN_CHARS = 300

MARKS: dict[str, str] = {Kind.NOTICE: "ℹ️", Kind.PERMISSION: "🔐", Kind.QUESTION: "❓",
                         Kind.PLAN: "📝"}
VERDICTS = {"allow": "✅ Allowed", "allow_session": "🔁 Allowed for the session",
            "deny": "❌ Denied", "answer": "💬 Answered"}


@dataclass(frozen=True, slots=True)
class Card:
    """An escalation as a chat shows it: `files` go first (whole texts the card cuts short),
    then `reply`, one message that fits every platform, with the buttons."""

    reply: Reply
    files: tuple[Attachment, ...] = ()


def mark(row: Escalation) -> str:
    return MARKS.get(row.kind, "❓")


def needs_answer(row: Escalation) -> bool:
    return row.kind != Kind.NOTICE and row.status == "open"


# A notice whose title says one of these (or starts with a warning mark) is news the operator
# should hear at once: it rings the phone. Every other notice (an agent finished, a session
# started fresh, a bucket works again) arrives silently; what needs an answer always rings.
_LOUD_MARKS = ("🛑", "⚠", "⏰")
_LOUD_WORDS = ("error", "fail", "stopped", "crossed", "paused", "refused", "blocked",
               "cut off", "not delivered", "conflict", "no answer", "cannot", "could not",
               "alarm", "expired", "ttl", "killed", "crash", "interrupted", "not ")


def quiet(row: Escalation) -> bool:
    """Whether the row is sent without a notification (Telegram's disable_notification)."""
    if row.kind != Kind.NOTICE:
        return False
    title = row.title.lower()
    return not (row.title.startswith(_LOUD_MARKS) or any(w in title for w in _LOUD_WORDS))


def is_long_notice(row: Escalation) -> bool:
    return row.kind == Kind.NOTICE and len(row.body) > LONG_NOTICE_CHARS and not row.detail


def header(row: Escalation) -> str:
    """The first line of every form of a row's card (short or long, open or settled)."""
    notice = row.kind == Kind.NOTICE
    return f"{mark(row)} {row.title}" + ("" if notice else f"  {row.id}")


def long_notice(row: Escalation) -> Reply:
    """A long final answer: all of it, for the platform to split or attach, under the same
    header a short one has."""
    return Reply(blocks=(Text(header(row), "title"), Text(row.body)))


def notice_buttons(row: Escalation) -> tuple[tuple[Button, ...], ...]:
    """A reviewer agent's decision on a call: one tap overturns it (docs/reviewers.md)."""
    if row.kind == Kind.NOTICE and row.tool_name == REVIEW_NOTICE and row.ref_id:
        return ((Button(f"↩ Overturn {row.ref_id}", f"/overturn {row.ref_id}"),),)
    return ()


def card_buttons(row: Escalation) -> tuple[tuple[Button, ...], ...]:
    if row.kind == Kind.NOTICE:
        return notice_buttons(row)
    buttons = escalation_buttons(row)
    rows = [tuple(buttons[i:i + 2]) for i in range(0, len(buttons), 2)]
    rows.append((details_button(row.id),))
    return tuple(rows)


def _card_blocks(row: Escalation) -> tuple[list[Text], list[Attachment]]:
    """The body (with "Why asked") first, so it stays in sight; then the detail, whole if it
    fits, else its start, a note that it is cut, and the file that has all of it."""
    notice = row.kind == Kind.NOTICE
    blocks = [Text(header(row), "title")]
    files: list[Attachment] = []
    if row.body:
        text = visible(row.body)  # escaped first, so escapes cannot overflow the card
        body = preview(text, BODY_CHARS if row.detail else BODY_ALONE_CHARS,
                       max_lines=len(text) + 1)  # by characters only
        blocks.append(Text(body.text, "plain" if notice else "code"))
        if body.cut:
            name = f"{row.id}-message.txt"
            blocks.append(Text(body.note(name), "title"))
            files.append(Attachment(name, row.body.encode()))
    if row.detail:
        seen = preview(visible(row.detail))
        blocks.append(Text(seen.text, "code"))
        if seen.cut:
            name = detail_filename(row)
            blocks.append(Text(seen.note(name), "title"))
            files.append(Attachment(name, row.detail.encode()))
    return blocks, files


def web_link(row: Escalation, web_url: str) -> str:
    """Where the web console shows the row: a request in Needs you, a notice on its agent's
    page ("" without a public address, or for a notice of no agent)."""
    if not web_url:
        return ""
    if needs_answer(row):
        return f"{web_url}/#req-{row.id}"
    return f"{web_url}/agents/{row.agent_id}" if row.agent_id else ""


def card(row: Escalation, web_url: str = "") -> Card:
    """`web_url`: the web console's public address, to link the card to its page."""
    blocks, files = _card_blocks(row)
    link = web_link(row, web_url)
    if link:  # plain text: every chat makes a link of it, no platform needs a URL button
        blocks.append(Text(f"Open in the web console: {link}"))
    buttons: tuple[tuple[Button, ...], ...] = ()
    if needs_answer(row):
        if row.kind in (Kind.QUESTION, Kind.PLAN) and row.free_text:
            blocks.append(Text("Reply to this message to answer in your own words."))
        buttons = card_buttons(row)
    else:
        buttons = notice_buttons(row)
    return Card(Reply(blocks=tuple(blocks), buttons=buttons), tuple(files))


def outcome(row: Escalation) -> str:
    """One line: who settled it, how, when."""
    answer = row.answer or {}
    when = time.strftime("%H:%M:%S", time.localtime(row.answered_at or time.time()))
    text = str(answer.get("text") or "")
    if row.status in ("expired", "cancelled", "interrupted"):
        return f"{row.status.capitalize()} at {when}: {text}".rstrip(": ")
    verdict = VERDICTS.get(str(answer.get("decision")), row.status)
    via = f" via {row.answered_via}" if row.answered_via else ""
    line = f"{verdict} by {row.answered_by or '?'}{via} at {when}"
    if text:
        line += f": {split_text(text, ANSWER_SHOWN_CHARS)[0]}"
    return line


def settled(row: Escalation) -> Reply:
    """The card once answered, expired or cancelled: no buttons, the outcome under it."""
    blocks, _ = _card_blocks(row)
    return Reply(blocks=(*blocks, Text(outcome(row), "title")))


def details(row: Escalation) -> Reply:
    """Everything about one escalation: body and complete detail, as blocks to see whole."""
    blocks = [Text(f"{row.id}: {row.title}", "title"),
              Text(row.body or "-", "code", f"{row.id}-message.txt")]
    if row.detail:
        blocks.append(Text(row.detail, "code", detail_filename(row)))
    elif row.tool_input:  # a row from before details were kept: the raw input
        full = json.dumps(row.tool_input, indent=2, ensure_ascii=False)
        blocks.append(Text(full, "code", f"{row.id}-input.json"))
    return Reply(blocks=tuple(blocks))


def whole(row: Escalation) -> Reply:
    """For a front end with room for everything (a terminal): every line of the detail and
    how to answer by typing, no buttons."""
    blocks = escalation_blocks(row)
    if row.status != "open" and row.kind != Kind.NOTICE:
        blocks = (*blocks[:-1], Text(outcome(row)))  # the answer line no longer applies
    return Reply(blocks=blocks)
