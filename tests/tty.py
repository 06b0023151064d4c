"""`switchboard run` in a real terminal for tests: a pty (pexpect) whose output is rendered by a
terminal emulator (pyte), so a test reads the screen as a person sees it. The emulator answers
the cursor position requests prompt_toolkit sends, as a real terminal does."""

from __future__ import annotations

import os
import re
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

ROWS, COLS = 30, 100
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
# pyte stops drawing a chunk at a zero-width character that is not combining (it ends the
# loop), and the kit's marks carry one: U+FE0F, the emoji presentation selector. Real
# terminals draw it; the emulator is given the text without it.
_VS16 = "\ufe0f".encode()


class Tty:
    """`python -m bot.cli run` on a pty of ROWS x COLS."""

    def __init__(self, home: Path, *, env: dict[str, str] | None = None) -> None:
        full = {k: v for k, v in os.environ.items()
                if not k.startswith("SWITCHBOARD_") and k != "PORT"}
        full.update(SWITCHBOARD_HOME=str(home), TERM="xterm-256color", **(env or {}))
        full.pop("NO_COLOR", None)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()  # every byte the terminal was sent
        self.child = pexpect.spawn(sys.executable, ["-m", "bot.cli", "run"], env=full,
                                   cwd=str(Path(__file__).resolve().parents[1]),
                                   dimensions=(ROWS, COLS))
        self.screen.write_process_input = self._answer  # type: ignore[method-assign]

    def _answer(self, data: str) -> None:
        self.child.send(data)

    def pump(self, seconds: float = 0.2) -> None:
        """Read what the console printed for up to `seconds`, into the screen."""
        end = time.monotonic() + seconds
        while True:
            try:
                data = self.child.read_nonblocking(1 << 16, timeout=0.05)
            except pexpect.TIMEOUT:
                data = b""
            except pexpect.EOF:
                return
            if data:
                self.raw += data
                self.stream.feed(bytes(data).replace(_VS16, b""))
            if time.monotonic() >= end and not data:
                return

    def text(self) -> str:
        """The screen, as a person reads it."""
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait(self, what: Callable[[str], bool] | str, timeout: float = 60,
             why: str = "") -> str:
        """The screen once `what` (a text on it, or a test of it) holds."""
        test = (lambda s: what in s) if isinstance(what, str) else what
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.2)
            if test(self.text()):
                return self.text()
            if not self.child.isalive():
                self.pump(0.5)
                break
        raise AssertionError(f"never saw {why or what!r} on the screen:\n{self.text()}")

    def printed(self) -> str:
        """Everything the console printed, escapes removed and lines joined as written."""
        text = bytes(self.raw).decode("utf-8", "replace")
        return ANSI.sub("", text).replace("\r", "")

    def prompt_line(self) -> str:
        """The line the cursor is on: the input line."""
        return self.screen.display[self.screen.cursor.y].rstrip()

    def type(self, text: str) -> None:
        self.send_all(text.encode())

    def paste(self, text: str) -> None:
        """As a terminal sends a paste in bracketed-paste mode."""
        self.send_all(("\x1b[200~" + text + "\x1b[201~").encode())

    def send_all(self, data: bytes) -> None:
        """All of `data` into the terminal, a chunk at a time as the pty takes it, reading
        the screen meanwhile (a console blocked on its output would never read its input)."""
        view = memoryview(data)
        end = time.monotonic() + 60
        while view:
            assert time.monotonic() < end, f"the console stopped reading ({len(view)} left)"
            readable, writable, _ = select.select([self.child.child_fd],
                                                  [self.child.child_fd], [], 0.5)
            if readable:
                self.pump(0)
            if writable:
                view = view[os.write(self.child.child_fd, view[:4096]):]

    def close(self) -> None:
        if self.child.isalive():
            self.child.sendcontrol("d")
            end = time.monotonic() + 30
            while self.child.isalive() and time.monotonic() < end:
                self.pump(0.2)
        self.child.close(force=True)
