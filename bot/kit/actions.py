"""What a button press asks for, written the same way for every platform: a command line,
the same behind a confirming tap, an escalation's details, or cancel."""

from __future__ import annotations

from dataclasses import dataclass

from commands.base import Button
from supervisor.sanitize import CleanText, clean

# A button's action: Telegram's callback data is at most 64 bytes, a Slack value 2000
# characters; anything longer did not come from a button we made.
MAX_ACTION_CHARS = 2000

CONFIRM = "?"  # ask "are you sure?" first, then run the command
DETAILS = "i:"  # show an escalation whole
CANCEL = "x"


def action_of(button: Button) -> str:
    """The action a platform stores in a button (Telegram: callback data, via its codec)."""
    return (CONFIRM if button.confirm else "") + button.command


def details_button(escalation_id: str) -> Button:
    return Button("🔎 Details", f"{DETAILS}{escalation_id}")


def clean_action(action: str) -> CleanText | None:
    """A button's action as it came back from the platform, or None if it cannot be one of
    ours (too long, or carrying what no button of ours carries)."""
    cleaned = clean(action, limit=MAX_ACTION_CHARS)
    return cleaned.text if not (cleaned.removed or cleaned.problem) else None


@dataclass(frozen=True, slots=True)
class Action:
    kind: str  # run | confirm | details | cancel
    value: str = ""  # the command line, or the escalation id


def parse_action(action: str) -> Action:
    if action == CANCEL:
        return Action("cancel")
    if action.startswith(DETAILS):
        return Action("details", action[len(DETAILS):])
    if action.startswith(CONFIRM):
        return Action("confirm", action[len(CONFIRM):])
    return Action("run", action)
