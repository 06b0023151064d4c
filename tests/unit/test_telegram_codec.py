"""Telegram's callback data is at most 64 bytes: a longer button action travels as a token into
a table, which is bounded (issue 24): the same action keeps its token, the longest unused one
is forgotten past the limit, and its button then decodes to nothing (the kit answers that it
has expired)."""

from __future__ import annotations

from bot.telegram.adapter import CALLBACK_MAX, CallbackCodec


def test_short_actions_travel_as_they_are_and_long_ones_as_a_token():
    codec = CallbackCodec(limit=3)
    assert codec.encode("/pause a") == "/pause a" and codec.decode("/pause a") == "/pause a"
    long = "/approve " + "x" * CALLBACK_MAX
    data = codec.encode(long)
    assert data.startswith("t:") and len(data.encode()) <= CALLBACK_MAX
    assert codec.decode(data) == long
    assert codec.encode(long) == data and len(codec) == 1  # the same action, the same token


def test_the_table_is_bounded_and_forgets_the_longest_unused():
    codec = CallbackCodec(limit=3)
    actions = [f"/answer {i} " + "y" * CALLBACK_MAX for i in range(5)]
    tokens = [codec.encode(a) for a in actions[:3]]
    assert codec.decode(tokens[0]) == actions[0]  # used: now the most recent
    later = [codec.encode(a) for a in actions[3:]]
    assert len(codec) == 3
    assert codec.decode(tokens[1]) is None and codec.decode(tokens[2]) is None  # forgotten
    assert codec.decode(tokens[0]) == actions[0]
    assert [codec.decode(t) for t in later] == actions[3:]
    for i in range(10_000):
        codec.encode(f"/deny {i} " + "z" * CALLBACK_MAX)
    assert len(codec) == 3
