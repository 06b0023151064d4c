"""The front ends' cleaning is the supervisor's (supervisor/sanitize.py) plus terminal escape
sequences; what it changed is counted for the note the operator gets."""

from __future__ import annotations

from bot.kit.sanitize import REPLACEMENT, clean
from supervisor import sanitize as core


def test_line_ends_are_kept_and_not_counted_as_removed() -> None:
    got = clean("one\r\ntwo\rthree")
    assert (got.text, got.removed, got.note) == ("one\ntwo\nthree", 0, "")


def test_escapes_controls_and_a_lone_surrogate_are_counted() -> None:
    got = clean("a\x1b[2Jb\x07c\ud800d")
    assert got.text == f"abc{REPLACEMENT}d"
    assert got.removed == 4 + 1 + 1  # the CSI sequence, the BEL, the surrogate replaced
    assert "6 characters" in got.note


def test_without_escapes_it_is_the_supervisors_cleaning() -> None:
    for text in ("plain", "tab\tand\nnewline", "nul\x00 del\x7f c1\x9b", "é 🤖 \ud83e"):
        assert clean(text).text == core.clean(text)
