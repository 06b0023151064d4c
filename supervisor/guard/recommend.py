"""Recommended answers: an agent that asks may say which answer it recommends (the
ask_operator tool's `recommended` and `why`, or an AskUserQuestion option labelled
"(Recommended)", the CLI's own convention). The recommendation goes first among the options,
so the card's first button accepts it with one tap, and one line above the question says what
it is and why."""

from __future__ import annotations

MARK = "(recommended)"
WHY_CHARS = 300


def marked(labels: tuple[str, ...]) -> str:
    """The first option whose label ends with "(Recommended)", or ""."""
    return next((label for label in labels if label.strip().lower().endswith(MARK)), "")


def recommend(options: tuple[str, ...], recommended: str,
              why: str = "") -> tuple[tuple[str, ...], str]:
    """(the options with the recommended one first, the line that says so); the options as
    they were and "" when nothing is recommended. A recommendation that is none of the options
    becomes the first of them."""
    pick = " ".join(recommended.split())
    if not pick:
        return options, ""
    found = next((o for o in options if o.strip().lower() == pick.lower()), None)
    first = found if found is not None else pick
    ordered = (first, *(o for o in options if o is not found))
    reason = " ".join(why.split())[:WHY_CHARS]
    shown = first.strip()
    if shown.lower().endswith(MARK):
        shown = shown[:-len(MARK)].rstrip()
    return ordered, f"★ Recommended: {shown} (the first button)" + (f": {reason}" if reason
                                                                      else "")
