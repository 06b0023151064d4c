"""The console's output: every entry made safe for the terminal, queued, and written off the
event loop, in order, whole. A slow terminal (or a reader that stops reading a pipe) makes the
console fall behind, never blocks the supervisor's loop, never drops a line and never raises
BlockingIOError into it: the writer waits for the descriptor to take more, on its own thread."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import io
import logging
import os
import select
import time
from collections.abc import Awaitable, Callable
from typing import TextIO

from bot.console.render import Line
from supervisor.sanitize import for_terminal

logger = logging.getLogger(__name__)

BATCH_CHARS = 1 << 20  # entries written in one go, at most (the prompt is redrawn between)
Format = Callable[[Line, float], str]
Emit = Callable[[str], Awaitable[None]]


def write_all(stream: TextIO, text: str) -> bool:
    """Write `text` whole to `stream`, blocking this thread as long as it takes: partial
    writes are continued, and a descriptor someone made non-blocking (asyncio's stdin pipe
    shares the terminal's) is waited on rather than given up. False if the reader is gone."""
    try:
        fd = stream.fileno()
    except (OSError, AttributeError, io.UnsupportedOperation):
        stream.write(text)  # not a file (a test's StringIO): nothing can block
        stream.flush()
        return True
    data = memoryview(text.encode("utf-8", "backslashreplace"))
    try:
        stream.flush()  # whatever went through the stream object first, stays first
        while data:
            try:
                n = os.write(fd, data)
            except BlockingIOError:
                select.select([], [fd], [], 1.0)
                continue
            data = data[n:]
    except (BrokenPipeError, ConnectionResetError):
        return False
    except OSError:
        logger.exception("console: could not write to the terminal")
        return False
    return True


class Printer:
    """A queue of entries and one task that writes them. `put` never waits; `run` formats
    what is queued and hands it to `emit` (a thread writing to the pipe, or the terminal's
    "print above the prompt"), one batch at a time, in order."""

    def __init__(self, fmt: Format, stream: TextIO, emit: Emit | None = None) -> None:
        """`emit`: how a batch is printed; by default written to `stream` on a thread (a
        pipe, a file). A batch `emit` fails to print is written to `stream` that way."""
        self.fmt = fmt
        self.stream = stream
        self.emit = emit or plain_emitter(stream)
        self._queue: collections.deque[tuple[Line, float]] = collections.deque()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def put(self, line: Line | str, at: float | None = None) -> None:
        entry = line if isinstance(line, Line) else Line(line)
        self._queue.append((Line(for_terminal(entry.text), entry.kind),
                            time.time() if at is None else at))
        self._idle.clear()
        self._ready.set()

    def _batch(self) -> str:
        parts: list[str] = []
        size = 0
        while self._queue and size < BATCH_CHARS:
            line, at = self._queue.popleft()
            text = self.fmt(line, at)
            parts.append(text)
            size += len(text)
        return "\n".join(parts) + "\n"

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue:
                batch = self._batch()
                try:
                    await self.emit(batch)
                except Exception:  # noqa: BLE001 - the console prints on; the log has it
                    logger.exception("console: could not print %d characters; writing them "
                                     "plainly", len(batch))
                    await asyncio.to_thread(write_all, self.stream, batch)
            if not self._queue:
                self._idle.set()

    async def drain(self, timeout_s: float) -> bool:
        """Wait, bounded, until everything queued is written (at shutdown)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        logger.warning("console: %d line(s) not yet written to the terminal at exit",
                       len(self._queue))
        return False


def plain_emitter(stream: TextIO) -> Emit:
    """Write batches to a pipe or file on a thread of their own."""

    async def emit(text: str) -> None:
        await asyncio.to_thread(write_all, stream, text)

    return emit
