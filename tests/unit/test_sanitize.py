"""The one input sanitiser (supervisor/sanitize.py): size bound, terminal escape sequences,
control characters, lone surrogates; what it changed is counted for the note the operator
gets; what it made is a `CleanText`, never cleaned again. Terminal output escaping is a
separate function of the same module."""

from __future__ import annotations

import pytest

from bot.kit.actions import MAX_ACTION_CHARS, clean_action
from supervisor.errors import InvalidRequest
from supervisor.sanitize import (
    MAX_INPUT_CHARS,
    REPLACEMENT,
    CleanText,
    clean,
    clean_text,
    for_terminal,
)


def test_line_ends_are_kept_and_not_counted_as_removed() -> None:
    got = clean("one\r\ntwo\rthree")
    assert (got.text, got.removed, got.note) == ("one\ntwo\nthree", 0, "")


def test_escapes_controls_and_a_lone_surrogate_are_counted() -> None:
    got = clean("a\x1b[2Jb\x07c\ud800d")
    assert got.text == f"abc{REPLACEMENT}d"
    assert got.removed == 4 + 1 + 1  # the CSI sequence, the BEL, the surrogate replaced
    assert "6 characters" in got.note


def test_over_the_bound_is_refused_whole_with_what_to_do() -> None:
    got = clean("x" * (MAX_INPUT_CHARS + 1))
    assert got.text == ""
    assert f"{MAX_INPUT_CHARS + 1:,} characters; the limit is {MAX_INPUT_CHARS:,}" in got.problem
    assert "file" in got.problem
    with pytest.raises(InvalidRequest, match="the limit is"):
        clean_text("x" * (MAX_INPUT_CHARS + 1))


def test_what_it_made_is_clean_text_and_passes_through_untouched() -> None:
    """Cleaned once: a CleanText handed on (to the dispatcher, the API) is the same object,
    not cleaned a second time; trimming it keeps it clean."""
    first = clean("tab\tand\nnewline \x1b]52;c;aGk=\x07 nul\x00 é 🤖")
    assert isinstance(first.text, CleanText) and first.removed
    again = clean(first.text)
    assert again.text is first.text and again.removed == 0 and again.note == ""
    assert clean_text(first.text) is first.text
    assert isinstance(CleanText(" x ").strip(), CleanText)


def test_a_button_action_is_cleaned_by_the_same_function() -> None:
    assert clean_action("/approve e1") == "/approve e1"
    assert isinstance(clean_action("/approve e1"), CleanText)
    assert clean_action("/approve\x1b[2J e1") is None  # nothing of ours carries that
    assert clean_action("x" * (MAX_ACTION_CHARS + 1)) is None


def test_terminal_output_escaping_is_separate_and_visible() -> None:
    assert for_terminal("a\x1b[2Jb\u202e\ud800\n\t") == "a\\x1b[2Jb\\u202e\\ud800\n\t"
    assert for_terminal(for_terminal("\x1b")) == for_terminal("\x1b")
