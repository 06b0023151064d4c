"""The console front end: operator commands typed in a terminal, live agent output printed.
Every line read is bounded and cleaned by the kit's sanitiser; everything printed has its
control characters and escape sequences made visible, so an agent's output cannot clear the
screen or write the clipboard (OSC 52). Like the chats it is handed a FrontContext and reaches
the fleet only through the kit's FleetPort: commands through the context's runner, events,
the escalations' outbox and the audit through the port. It is not a ChatAdapter behind a
FrontDesk: its operator is the user at the terminal (an admin, not a stored operator), and it
prints a stream (every event, each escalation whole) where a chat keeps cards edited."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import sys
from collections.abc import Callable
from typing import TextIO

from bot.kit import AuditEntry
from bot.kit import escalation as esc
from bot.kit.context import FrontContext
from bot.kit.text import visible
from commands.base import Caller, Reply, Role, Text
from supervisor.api import AgentOutput, EscalationEvent, Event, StateChanged, TurnFinished
from supervisor.api import EscalationView as EscalationRow
from supervisor.sanitize import MAX_INPUT_CHARS, CleanText, clean, for_terminal

logger = logging.getLogger(__name__)

FRONTEND = "console"
MAX_LINE_BYTES = 1 << 20  # a longer line is refused whole, and the console reads on
_CHUNK = 1 << 16


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
            chunk = await self.reader.read(_CHUNK)
            if not chunk:
                self._eof = True
            self._buf += chunk


def too_long(size: int) -> Reply:
    return Reply.error(f"That line is {size:,} bytes; the console reads lines of up to "
                       f"{MAX_LINE_BYTES:,} bytes (and commands of {MAX_INPUT_CHARS:,} "
                       "characters).", "Put long material in a file in the agent's directory "
                       "and refer to it.")


def _whole(block: Text) -> str:
    """A text to be seen whole (a command, a file, a diff): every line, in a gutter, so it is
    clear where it starts and ends."""
    lines = block.text.split("\n")
    head = f"┌ {block.filename} · {len(block.text):,} characters"
    return "\n".join([head, *(f"│ {line}" for line in lines), "└"])


def render_block(block: Text) -> str:
    if block.filename:
        return _whole(block)
    if block.style == "title":
        return f"== {block.text} =="
    if block.style == "error":
        return f"error: {block.text}"
    if block.style == "code":
        return "\n".join("  " + line for line in block.text.splitlines())
    return block.text


def render_escalation(row: EscalationRow) -> str:
    """The kit's escalation, whole: a terminal has room for every line of the detail."""
    text = "\n".join(render_block(b) for b in esc.whole(row).blocks)
    return f"{esc.mark(row)} " + visible(text).replace("\n", "\n   ")


def render_reply(reply: Reply) -> str:
    out = [render_block(block) for block in reply.blocks]
    for row in reply.buttons:
        out.append("  actions: " + "  ".join(f"[{b.label}: {b.command}]" for b in row))
    for att in reply.attachments:
        out.append(f"  attachment {att.filename} ({len(att.content)} bytes)")
    return visible("\n".join(out))


def render_event(event: Event | EscalationEvent) -> str | None:
    if isinstance(event, EscalationEvent):
        row = event.escalation  # answered anywhere: say how, as the chats' copies do
        return (visible(f"{esc.mark(row)} {row.id} · {row.title}: {esc.outcome(row)}")
                if event.what == "answered" else None)
    if isinstance(event, StateChanged):
        why = f" ({event.reason})" if event.reason else ""
        return f"[{event.name}] {event.old or '-'} → {event.new}{why}"
    if isinstance(event, AgentOutput):
        marker = {"text": "", "tool_use": "⚙ ", "tool_result": "↳ "}.get(event.kind, "")
        text = event.text if len(event.text) < 1500 else event.text[:1500] + " …"
        return f"[{event.name}] {marker}{text}"
    if isinstance(event, TurnFinished):
        mark = "✓" if event.ok else "✗"
        return f"[{event.name}] {mark} turn finished (${event.cost_usd:.4f})"
    return None


class Console:
    """Reads command lines from `stdin`, prints replies and events to `stdout`."""

    def __init__(self, context: FrontContext[None], *, stdin: TextIO | None = None,
                 stdout: TextIO | None = None, on_exit: Callable[[], None] | None = None) -> None:
        self.context = context
        self.fleet = context.fleet
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.on_exit = on_exit
        self.caller = Caller(f"console:{getpass.getuser()}", getpass.getuser(), Role.ADMIN,
                             "console")

    def write(self, text: str) -> None:
        """Everything printed goes through here: no escape sequence reaches the terminal."""
        self.stdout.write(for_terminal(text) + "\n")
        self.stdout.flush()

    async def run(self) -> None:
        self.write("Switchboard console. Type /help for commands, /quit to shut down.")
        async with asyncio.TaskGroup() as tg:
            events = tg.create_task(self._print_events(), name="console-events")
            outbox = tg.create_task(self._print_escalations(), name="console-outbox")
            try:
                await self._read_commands()
            finally:
                events.cancel()
                outbox.cancel()
        if self.on_exit:
            self.on_exit()

    async def _print_events(self) -> None:
        async for event in self.fleet.events():
            line = render_event(event)
            if line:
                self.write(line)

    async def _print_escalations(self) -> None:
        """Deliver the outbox: everything not yet shown here, then each new row, once by id."""
        async for row in self.fleet.follow_escalations(FRONTEND):
            self.write(render_escalation(row))
            await self.fleet.ack_escalation(row.id, FRONTEND)

    async def _lines(self) -> LineReader | None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_CHUNK)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self.stdin)
        except (ValueError, OSError):
            return None
        return LineReader(reader)

    def _read_file_line(self) -> str | TooLong:
        """A line of a regular file on stdin, bounded like the pipe's."""
        line = self.stdin.readline(MAX_LINE_BYTES + 1)
        if len(line) <= MAX_LINE_BYTES or line.endswith("\n"):
            return line
        size = len(line)
        while line and not line.endswith("\n"):
            line = self.stdin.readline(_CHUNK)
            size += len(line)
        return TooLong(size)

    async def _next_line(self, reader: LineReader | None) -> str | TooLong | None:
        if reader is None:  # stdin is a regular file: read it directly
            return self._read_file_line() or None
        raw = await reader.next()
        if raw is None or isinstance(raw, TooLong):
            return raw
        return raw.decode(errors="replace")

    async def _read_commands(self) -> None:
        reader = await self._lines()
        while True:
            line = await self._next_line(reader)
            if line is None:
                return  # EOF
            if isinstance(line, TooLong):
                self.write(render_reply(too_long(line.size)))
                await self._audit_refused(f"{line.size:,} bytes", "line too long")
                continue
            cleaned = clean(line.strip())
            if cleaned.problem:
                self.write(render_reply(Reply.error("That line is too long.", cleaned.problem)))
                await self._audit_refused(f"{len(line):,} characters", "line too long")
                continue
            text = cleaned.text.strip()  # still a CleanText: not cleaned again
            if not text:
                continue
            if text in ("/quit", "/exit", "quit", "exit"):
                return
            with contextlib.suppress(asyncio.CancelledError):
                await self._run(text, cleaned.note)

    async def _run(self, line: CleanText, note: str) -> None:
        reply = await self.context.commands(self.caller, line)
        if reply.announced:
            return  # the notice that every front end gets says it; printed from the outbox
        text = render_reply(reply)
        self.write(f"{text}\n{note}" if note else text)

    async def _audit_refused(self, what: str, why: str) -> None:
        who = self.caller
        try:
            await self.fleet.audit(AuditEntry(who.platform, who.id, who.name, "input", what,
                                              False, why))
        except Exception:  # noqa: BLE001 - the reply was printed; the log has the rest
            logger.exception("could not audit a refused console line")
