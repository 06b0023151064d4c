"""What a model response cost: the usage the Messages API reports in it (a JSON body, or the
`message_start` and `message_delta` events of a stream), priced at the models' list prices.
The model gateway (supervisor/guard/gateway.py) reads it from every response it forwards, so a
budget can stop an agent at its next request rather than at the end of its turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

# US dollars per million tokens (input, output), by model family, the list prices the claude
# CLI prices its own turns with. Cache writes cost 1.25x input, cache reads 0.1x input.
# A model not named here is priced as the dearest (Opus 4/4.1): a budget errs on the safe side.
PRICES_PER_MTOK: tuple[tuple[str, float, float], ...] = (
    ("claude-opus-4-5", 5.0, 25.0), ("claude-opus-4-6", 5.0, 25.0),
    ("claude-opus-4-1", 15.0, 75.0), ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet", 3.0, 15.0), ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0), ("claude-haiku-4", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0), ("claude-3-haiku", 0.25, 1.25),
)
UNKNOWN_PRICE = (15.0, 75.0)
# A stream's unfinished line is kept until its end; past this it is not usage (which is short).
MAX_LINE_BYTES = 1 << 20


def price_of(model: str) -> tuple[float, float]:
    for prefix, inp, out in PRICES_PER_MTOK:
        if model.startswith(prefix):
            return inp, out
    return UNKNOWN_PRICE


@dataclass(slots=True)
class Usage:
    """Tokens of one response (or a sum of them) and what they cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    model: str = ""

    def cost_usd(self) -> float:
        inp, out = price_of(self.model)
        return (self.input_tokens * inp + self.output_tokens * out
                + self.cache_write_tokens * inp * 1.25
                + self.cache_read_tokens * inp * 0.1) / 1_000_000

    def take(self, usage: Any, *, output_only: bool = False) -> None:
        """A `usage` object of the API: its counts replace ours (a stream's `message_delta`
        carries the final output count, and may repeat the input counts)."""
        if not isinstance(usage, dict):
            return
        out = usage.get("output_tokens")
        if isinstance(out, int):
            self.output_tokens = out
        if output_only and "input_tokens" not in usage:
            return
        for key, attr in (("input_tokens", "input_tokens"),
                          ("cache_creation_input_tokens", "cache_write_tokens"),
                          ("cache_read_input_tokens", "cache_read_tokens")):
            value = usage.get(key)
            if isinstance(value, int):
                setattr(self, attr, value)


def usage_of_body(body: bytes) -> Usage | None:
    """The usage of a JSON Messages response, or None (an error, or not JSON)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or "usage" not in data:
        return None
    u = Usage(model=str(data.get("model") or ""))
    u.take(data["usage"])
    return u


class StreamUsage:
    """Reads the usage out of a server-sent event stream as its bytes go by, unchanged. Only
    lines that mention usage are parsed; the rest is scanned for a newline and let through."""

    __slots__ = ("_tail", "usage", "seen")

    def __init__(self, model: str = "") -> None:
        self._tail = b""
        self.usage = Usage(model=model)
        self.seen = False  # a message_start or message_delta with usage came by

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk if self._tail else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail = data if len(data) <= MAX_LINE_BYTES else b""
            return
        self._tail = data[cut + 1:]
        if len(self._tail) > MAX_LINE_BYTES:
            self._tail = b""
        whole = data[:cut]
        if b'"usage"' not in whole:
            return
        for line in whole.split(b"\n"):
            if line.startswith(b"data:") and b'"usage"' in line:
                self._event(line[5:])

    def _event(self, raw: bytes) -> None:
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            if message.get("model"):
                self.usage.model = str(message["model"])
            self.usage.take(message.get("usage"))
            self.seen = True
        elif kind == "message_delta":
            self.usage.take(event.get("usage"), output_only=True)
            self.seen = True


__all__ = ["PRICES_PER_MTOK", "StreamUsage", "Usage", "price_of", "usage_of_body"]
