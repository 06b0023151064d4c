"""Bounded lines from a pipe or a file (the console's plain mode): a line over the bound is
skipped to its end, never buffered whole, and reported, so the next line reads normally."""

from __future__ import annotations

import asyncio

from commands.base import Reply
from supervisor.sanitize import MAX_INPUT_CHARS

MAX_LINE_BYTES = 1 << 20  # a longer line (or paste) is refused whole, and the console reads on
CHUNK = 1 << 16


class TooLong:
    """What `LineReader` yields for a line over its bound: its length, the line itself gone."""

    def __init__(self, size: int) -> None:
        self.size = size


class LineReader:
    """Lines from a stream, each at most `limit` bytes. A longer line is skipped to its end
    (never buffered whole) and reported as TooLong, so the next line reads normally."""

    def __init__(self, reader: asyncio.StreamReader, limit: int = MAX_LINE_BYTES) -> None:
        self.reader = reader
        self.limit = limit
        self._buf = bytearray()
        self._skipped = 0  # bytes of an over-long line dropped so far
        self._eof = False

    async def next(self) -> bytes | TooLong | None:
        """The next line (with its newline, if it had one), TooLong, or None at EOF."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line, self._buf = bytes(self._buf[:end + 1]), self._buf[end + 1:]
                if self._skipped or end > self.limit:
                    size, self._skipped = self._skipped + len(line), 0
                    return TooLong(size)
                return line
            if len(self._buf) > self.limit:
                self._skipped += len(self._buf)
                self._buf.clear()
            if self._eof:
                if self._skipped:
                    size, self._skipped = self._skipped + len(self._buf), 0
                    self._buf.clear()
                    return TooLong(size)
                rest, self._buf = bytes(self._buf), bytearray()
                return rest or None
            chunk = await self.reader.read(CHUNK)
            if not chunk:
                self._eof = True
            self._buf += chunk


def too_long(size: int) -> Reply:
    return Reply.error(f"That line is {size:,} bytes; the console reads lines of up to "
                       f"{MAX_LINE_BYTES:,} bytes (and commands of {MAX_INPUT_CHARS:,} "
                       "characters).", "Put long material in a file in the agent's directory "
                       "and refer to it.")
