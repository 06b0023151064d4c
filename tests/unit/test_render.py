"""Chat rendering: escaping, splitting under the limit at paragraph/line boundaries, code
blocks closed in every piece, overflow to a document."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.console import render_escalation, render_reply
from bot.kit.text import (
    DOCUMENT_OVER,
    PREVIEW_CHARS,
    PREVIEW_LINES,
    SAFE_LIMIT,
    Preview,
    preview,
    split_text,
    units,
)
from bot.kit.text import visible as escaped
from bot.telegram.render import TELEGRAM_LIMIT, plan_reply, render_chunks
from commands.approvals import escalation_blocks
from commands.base import Reply, Text
from store.escalations import EscalationRow


def visible(chunk_html: str) -> str:
    return html.unescape(re.sub(r"</?(b|pre|i|code)>", "", chunk_html))


def test_split_prefers_paragraphs_then_lines():
    text = ("a" * 50 + "\n\n") * 3 + "b" * 50
    pieces = split_text(text, 120)
    assert pieces[0] == "a" * 50 + "\n\n" + "a" * 50
    assert all(len(p) <= 120 for p in pieces)
    assert split_text("x" * 10, 5) == ["xxxxx", "xxxxx"]


def test_code_blocks_are_closed_in_every_piece():
    code = "\n".join(f"line {i} <tag> & stuff" for i in range(900))
    chunks = render_chunks((Text("Output", "title"), Text(code, "code")))
    assert len(chunks) > 1
    for c in chunks:
        assert c.html.count("<pre>") == c.html.count("</pre>")
        assert len(visible(c.html)) <= TELEGRAM_LIMIT
    joined = "\n".join(visible(c.html) for c in chunks)
    assert "line 899 <tag> & stuff" in joined and "line 0 <tag>" in joined


def test_very_long_output_becomes_a_document():
    reply = Reply.text("z" * (DOCUMENT_OVER + 10))
    chunks, files = plan_reply(reply)
    assert files and files[0].filename == "output.txt"
    assert len(files[0].content) == DOCUMENT_OVER + 10
    assert all(len(visible(c.html)) <= TELEGRAM_LIMIT for c in chunks)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=0, max_size=6000),
                          st.sampled_from(["plain", "code", "title", "error"])),
                min_size=1, max_size=4))
def test_no_chunk_breaks_the_limit_and_nothing_is_lost(blocks):
    texts = tuple(Text(t, s) for t, s in blocks)
    chunks = render_chunks(texts)
    for c in chunks:
        assert c.plain_len <= SAFE_LIMIT
        assert len(visible(c.html)) <= TELEGRAM_LIMIT
        assert c.html.count("<pre>") == c.html.count("</pre>")
    out = "".join(visible(c.html) for c in chunks)
    for t, _ in blocks:
        for word in t.split()[:20]:
            assert word in out


# -- texts the operator must see whole (a command, a file, a diff) -------------------------------

TAIL = "; git push --force origin main"


def test_preview_is_exact_when_it_fits_and_says_how_much_is_cut():
    assert preview("git status") == Preview("git status", 0, 10, 1)
    assert preview("a\nb\n").lines == 2 and preview("").lines == 0
    command = "echo " + "x" * 1600 + TAIL
    seen = preview(command)
    assert seen.cut and len(seen.text) == PREVIEW_CHARS and TAIL not in seen.text
    assert seen.hidden == len(command) - PREVIEW_CHARS and seen.total == len(command)
    note = seen.note("ab3k-command.sh")
    assert f"{seen.hidden:,} more characters" in note and "ab3k-command.sh" in note
    many = "\n".join(f"line {i}" for i in range(100))
    lines = preview(many)
    assert lines.text.split("\n") == [f"line {i}" for i in range(PREVIEW_LINES)]
    assert lines.text + many[len(lines.text):] == many


def test_preview_cuts_at_a_line_end_when_one_is_near():
    text = ("a" * 100 + "\n") * 10 + "b" * 2000
    seen = preview(text)
    assert seen.text == ("a" * 100 + "\n") * 9 + "a" * 100 and seen.cut


def test_a_block_to_see_whole_becomes_a_preview_a_note_and_the_file():
    command = "echo " + "x" * 1600 + TAIL
    reply = Reply(blocks=(Text("ab3k · x wants to use Bash"),
                          Text(command, "code", "ab3k-command.sh")))
    chunks, files = plan_reply(reply)
    assert [(f.filename, f.content.decode()) for f in files] == [("ab3k-command.sh", command)]
    shown = "".join(visible(c.html) for c in chunks)
    assert "Cut short" in shown and "ab3k-command.sh" in shown and TAIL not in shown
    short = plan_reply(Reply(blocks=(Text("rm -rf build", "code", "c.sh"),)))
    assert short[1] == [] and "rm -rf build" in visible(short[0][0].html)


def test_the_console_prints_the_whole_detail_and_no_hiding_characters():
    command = "echo " + "x" * 1600 + "\x1b[2K\r" + TAIL
    row = EscalationRow(
        seq=1, id="ab3k", agent_id=None, kind="permission", title="w wants to use Bash",
        body="Why asked: Bash: no rule decides it", tool_name="Bash",
        tool_input={"command": command}, options=(), free_text=False, ref_id=None,
        status="open", answer=None, answered_by=None, answered_via=None, answered_at=None,
        created_at=0.0, detail=command, detail_name="command.sh")
    out = render_escalation(row)
    assert "Why asked" in out and "x" * 1600 in out and TAIL in out
    assert out.index("Why asked") < out.index(TAIL) < out.index("/approve ab3k")
    assert "\x1b" not in out and "\r" not in out and "\\x1b[2K\\r" in out
    assert "ab3k-command.sh" in out
    pending = render_reply(Reply(blocks=escalation_blocks(row)))
    assert TAIL in pending and "\x1b" not in pending


def test_characters_that_hide_or_reorder_text_are_shown_as_escapes():
    assert escaped("ok\tfine\n\x1b[2K\rgone \u202eevil") == "ok\tfine\n\\x1b[2K\\rgone \\u202eevil"
    command = "\x1b[2K" * 1000 + TAIL  # escapes count in the preview, not only the raw text
    chunks, files = plan_reply(Reply(blocks=(Text(command, "code", "c.sh"),)))
    assert files[0].content.decode() == command
    assert all(len(visible(c.html)) <= SAFE_LIMIT for c in chunks)
    assert "\x1b" not in "".join(c.html for c in chunks)


def test_splitting_counts_utf16_units_not_code_points():
    """Regression (issue 9): 9,000 emoji were cut into chunks of 3,800 code points, 7,600
    UTF-16 units: Telegram refused them (its 4,096 is in UTF-16 units) and they were lost."""
    emoji = "😀" * 9000
    chunks, files = plan_reply(Reply.text(emoji))
    assert all(units(visible(c.html)) <= TELEGRAM_LIMIT for c in chunks)
    assert "".join(f.content.decode() for f in files).count("😀") == 9000
    pieces = split_text("a😀" * 3000, 4096)
    assert "".join(pieces) == "a😀" * 3000 and all(units(p) <= 4096 for p in pieces)
    assert all(units(c.html) <= TELEGRAM_LIMIT for c in render_chunks((Text("😀" * 5000),)))
    cut = preview("😀" * 2000)
    assert units(cut.text) <= PREVIEW_CHARS and cut.hidden == 2000 - len(cut.text)
