"""Chat rendering: escaping, splitting under the limit at paragraph/line boundaries, code
blocks closed in every piece, overflow to a document."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.render import (
    DOCUMENT_OVER,
    SAFE_LIMIT,
    TELEGRAM_LIMIT,
    plan_reply,
    render_chunks,
    split_text,
)
from commands.base import Reply, Text


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
