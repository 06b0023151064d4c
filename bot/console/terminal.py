"""The console on a terminal, on prompt_toolkit: line editing, history kept across runs,
completion of commands and agent names, bracketed paste (a paste is one command, newlines and
all), a bottom toolbar that moves every second, and output printed above the input line.

Output is written by a thread while the prompt is hidden and its drawing held (HeldOutput),
with the terminal left in raw mode: keys typed (or pasted) meanwhile go into the input line,
not into the output, and are not subject to a cooked terminal's 4,095-byte line limit.
prompt_toolkit's own `run_in_terminal` switches to cooked mode and detaches the input for that
time, and its `patch_stdout` writes on the event loop, which a slow terminal would block."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import fragment_list_to_text
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput
from prompt_toolkit.output import ColorDepth
from prompt_toolkit.output.vt100 import Vt100_Output

from bot.console.output import write_all
from supervisor.sanitize import for_terminal

logger = logging.getLogger(__name__)

PROMPT = "sb> "
HISTORY_ENTRY_CHARS = 4096  # a longer command (a paste) is recalled in this run, not stored
FOLD_CHARS = 5000  # a longer line of the input is shown folded (FoldLongLines)
FOLD_KEEP = 1000


def complete(text: str, commands: Sequence[str], agents: Sequence[str]) -> list[str]:
    """What completes the last word of `text`: a command name for the first word, an agent's
    name or id for the second. Pure, for the completer and its test."""
    words = text.split(" ")
    if len(words) == 1:
        return [f"/{c}" for c in commands if f"/{c}".startswith(words[0])]
    if len(words) == 2 and words[0].startswith("/"):
        return [a for a in agents if a.startswith(words[1])]
    return []


class CommandCompleter(Completer):
    def __init__(self, commands: Sequence[str], agents: Callable[[], Sequence[str]]) -> None:
        self.commands = commands
        self.agents = agents

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if "\n" in before:
            return
        last = before.split(" ")[-1]
        for word in complete(before, self.commands, self.agents()):
            yield Completion(word, start_position=-len(last))


class BoundedFileHistory(FileHistory):
    """The history file, without pastes: a command over HISTORY_ENTRY_CHARS is recalled with
    arrow-up in this run but not written to disk."""

    def store_string(self, string: str) -> None:
        if len(string) <= HISTORY_ENTRY_CHARS:
            super().store_string(string)


def open_history(path: Path | None) -> History:
    if path is None:
        return InMemoryHistory()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        return BoundedFileHistory(str(path))
    except OSError as exc:
        logger.warning("console: no history across runs, %s cannot be written: %s", path, exc)
        return InMemoryHistory()


class FoldLongLines(Processor):
    """A line of the input over FOLD_CHARS (a paste) is shown as its start, how much is left
    out, and its end: drawn whole, every key pressed would lay out a million characters on the
    event loop. What is sent is the whole line."""

    def apply_transformation(self, ti: TransformationInput) -> Transformation:
        text = fragment_list_to_text(ti.fragments)
        size = len(text)
        if size <= FOLD_CHARS:
            return Transformation(ti.fragments)
        tail_from = size - FOLD_KEEP
        middle = f" …[{size - 2 * FOLD_KEEP:,} more characters]… "
        shown = text[:FOLD_KEEP] + middle + text[tail_from:]
        cut = len(middle) - (tail_from - FOLD_KEEP)  # display minus source, past the fold

        def to_display(i: int) -> int:
            if i <= FOLD_KEEP:
                return i
            return i + cut if i >= tail_from else FOLD_KEEP

        def to_source(i: int) -> int:
            if i <= FOLD_KEEP:
                return i
            return i - cut if i >= FOLD_KEEP + len(middle) else FOLD_KEEP

        return Transformation([("", shown)], to_display, to_source)


def _keys() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        """Ctrl-C clears a half-typed line; on an empty line it shuts down, as /quit."""
        buffer = event.app.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return keys


class HeldOutput(Vt100_Output):
    """The prompt's output, which can be held: what prompt_toolkit draws while the console
    prints above it stays in the buffer, and is dropped on release (the console then has the
    prompt drawn again, below what it printed)."""

    held = False

    def hold(self) -> None:
        self.held = True

    def release(self) -> None:
        self.held = False
        self._buffer.clear()

    def flush(self) -> None:
        if not self.held:
            super().flush()


class Terminal:
    """The prompt, the toolbar and printing above them."""

    def __init__(self, *, history: Path | None, commands: Sequence[str],
                 agents: Callable[[], Sequence[str]], toolbar: Callable[[], list[str]],
                 stdout: TextIO) -> None:
        self.stdout = stdout
        self.toolbar = toolbar
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.set_blocking(stdout.fileno(), True)  # whoever made it non-blocking: not us
        output = HeldOutput.from_pty(stdout, term=os.environ.get("TERM"))
        assert isinstance(output, HeldOutput)  # from_pty builds its own class
        self.output = output
        self.session: PromptSession[str] = PromptSession(
            output=self.output,
            history=open_history(history),
            completer=CommandCompleter(commands, agents),
            complete_while_typing=False,  # Tab completes; typing is never slowed
            bottom_toolbar=self._toolbar_text,
            refresh_interval=1.0,  # the toolbar's times move
            key_bindings=_keys(),
            enable_open_in_editor=False,
            erase_when_done=True,  # the console prints the command itself, stamped
            input_processors=[FoldLongLines()],
        )
        self._printing = asyncio.Lock()

    @property
    def colour(self) -> bool:
        return self.session.app.color_depth != ColorDepth.DEPTH_1_BIT

    def _toolbar_text(self) -> str:
        try:  # agents' tool calls and titles are in it: made safe like all output
            return for_terminal("\n".join(self.toolbar()))
        except Exception:  # noqa: BLE001 - a toolbar that fails must not end the prompt
            logger.exception("console: the status toolbar failed")
            return "(status unavailable: see the log)"

    async def read(self) -> str | None:
        """The next command, or None: Ctrl-D, or Ctrl-C on an empty line."""
        started = asyncio.Event()
        # No output while the prompt starts: written then, it would race its first drawing
        # (the renderer moves the cursor relative to where it thinks it is).
        async with self._printing:
            prompt = asyncio.ensure_future(self.session.prompt_async(PROMPT,
                                                                     pre_run=started.set))
            ready = asyncio.ensure_future(started.wait())
            await asyncio.wait({prompt, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
        try:
            return await prompt
        except (EOFError, KeyboardInterrupt):
            return None

    async def emit(self, text: str) -> None:
        """Print `text` above the prompt, off the loop, the prompt hidden meanwhile."""
        async with self._printing:
            app = self.session.app
            if not app.is_running:
                await asyncio.to_thread(write_all, self.stdout, text)
                return
            if app.output.responds_to_cpr:
                # Where the prompt starts is asked of the terminal; drawn from an answer
                # that predates the output, it would land on it.
                await app.renderer.wait_for_cpr_responses()
            with self._held(app):
                await asyncio.to_thread(write_all, self.stdout, text)

    @contextlib.contextmanager
    def _held(self, app: Any) -> Iterator[None]:
        """The prompt erased and its drawing held (keys still go into the input line); drawn
        afresh after. Like prompt_toolkit's `in_terminal`, without cooked mode or detaching
        the input."""
        app.renderer.erase()
        app.output.enable_autowrap()
        app.output.flush()
        self.output.hold()
        try:
            yield
        finally:
            self.output.release()
            app.renderer.reset()  # what it drew meanwhile was never shown: draw it all again
            app.renderer.request_absolute_cursor_position()
            app.invalidate()
