"""The console front end: operator commands typed in a terminal, live agent output printed.

On a terminal it runs on prompt_toolkit (bot/console/terminal.py): line editing, history,
completion, output above the input line, a timestamp on every entry, colour, and a bottom
toolbar with the kill switch, what waits for the operator and each working agent. With stdin
a pipe or a file it reads plain lines, as scripts and tests use it, and prints plain lines.

Every line read is bounded and cleaned by the kit's sanitiser; everything printed has its
control characters and escape sequences made visible (bot/console/output.py), so an agent's
output cannot clear the screen or write the clipboard (OSC 52). Like the chats it is handed a
FrontContext and reaches the fleet only through the kit's FleetPort: commands through the
context's runner, events, the escalations' outbox and the audit through the port. It is not a
ChatAdapter behind a FrontDesk: its operator is the user at the terminal (an admin, not a
stored operator), and it prints a stream (every event, each escalation whole) where a chat
keeps cards edited."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from bot.console.lines import CHUNK, MAX_LINE_BYTES, LineReader, TooLong, too_long
from bot.console.output import Printer
from bot.console.render import Answers, Line, render_reply, reply_kind
from bot.console.settings import FRONTEND, ConsoleSettings
from bot.console.text import (
    Halt,
    Waiting,
    Working,
    killswitch_banner,
    one_line,
    paint,
    stamped,
    toolbar_lines,
)
from bot.kit import AuditEntry, Operator
from bot.kit import escalation as esc
from bot.kit.context import FrontContext
from commands.base import Caller, Reply, Role
from commands.dispatcher import COMMANDS
from supervisor.api import AgentOutput, EscalationEvent, Event, StateChanged, TurnFinished
from supervisor.sanitize import CleanText, clean

if TYPE_CHECKING:
    from bot.console.terminal import Terminal

logger = logging.getLogger(__name__)

BANNER = "Switchboard console. Type /help for commands, /quit to shut down."
ECHO_CHARS = 300  # a typed command is echoed above the prompt, this much of it
DRAIN_S = 30.0  # at exit, how long output still queued may take to reach the terminal
QUIT = ("/quit", "/exit", "quit", "exit")
BUSY = ("working", "waiting", "stalled")


class Console:
    """Reads command lines from `stdin`, prints replies and events to `stdout`."""

    def __init__(self, context: FrontContext[ConsoleSettings] | FrontContext[None], *,
                 stdin: TextIO | None = None, stdout: TextIO | None = None,
                 on_exit: Callable[[], None] | None = None,
                 terminal: bool | None = None) -> None:
        """`terminal`: the prompt_toolkit console; by default when stdin and stdout are both
        terminals."""
        self.context = context
        self.fleet = context.fleet
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.on_exit = on_exit
        self.caller = Caller(f"console:{getpass.getuser()}", getpass.getuser(), Role.ADMIN,
                             "console")
        if terminal is None:
            terminal = _isatty(self.stdin) and _isatty(self.stdout)
        self.is_terminal = terminal
        self.answers = Answers()
        self.working: dict[str, Working] = {}  # agent id -> what the toolbar shows of it
        self.waiting: dict[str, Waiting] = {}  # open escalations by id
        self.printer = Printer(self._plain_format, self.stdout)

    @staticmethod
    def _plain_format(line: Line, at: float) -> str:
        return line.text

    def write(self, text: str | Line) -> None:
        """Everything printed goes through here: queued, never waited for."""
        self.printer.put(text)

    async def run(self) -> None:
        terminal = self._terminal() if self.is_terminal else None
        await self._register()
        async with asyncio.TaskGroup() as tg:
            printer = tg.create_task(self.printer.run(), name="console-printer")
            self.write(Line(BANNER, "banner"))
            halt = self._halt()
            if halt:
                self.write(Line(killswitch_banner(halt, time.time()) or "", "killswitch"))
            events = tg.create_task(self._print_events(), name="console-events")
            outbox = tg.create_task(self._print_escalations(), name="console-outbox")
            try:
                if terminal is None:
                    await self._read_commands()
                else:
                    await self._read_terminal(terminal)
            finally:
                events.cancel()
                outbox.cancel()
                await self.printer.drain(DRAIN_S)
                printer.cancel()
        if self.on_exit:
            self.on_exit()

    async def _register(self) -> None:
        """Whoever holds the terminal is an admin; recorded as an operator once, so what acts
        as an operator from elsewhere works for them too (a web sign-in link from /web)."""
        platform, _, user = self.caller.id.partition(":")
        if await self.fleet.operator(platform, user) is None:
            await self.fleet.save_operator(Operator(platform, user, self.caller.name, Role.ADMIN,
                                                    "console"))

    # -- the terminal ---------------------------------------------------------------------

    def _terminal(self) -> Terminal:
        from bot.console.terminal import Terminal  # prompt_toolkit: only on a terminal

        settings = self.context.settings
        history = settings.history_path if isinstance(settings, ConsoleSettings) else None
        term = Terminal(history=history, commands=sorted(COMMANDS), agents=self._agent_names,
                        toolbar=self._toolbar, stdout=self.stdout)
        colour = term.colour

        def fmt(line: Line, at: float) -> str:
            return paint(stamped(line.text, at), line.kind, colour=colour)

        self.printer.fmt = fmt
        self.printer.emit = term.emit
        return term

    async def _read_terminal(self, term: Terminal) -> None:
        """The prompt stays up while commands run (one after the other, in the order typed),
        so what they and the agents print lands above it, never in a half-typed line."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._run_queued(queue), name="console-commands")
            try:
                while (line := await term.read()) is not None:
                    if line.strip() in QUIT:
                        break
                    self._echo(line)
                    size = len(line.encode("utf-8", "surrogatepass"))
                    if size > MAX_LINE_BYTES:
                        self.write(Line(render_reply(too_long(size)), "error"))
                        await self._audit_refused(f"{size:,} bytes", "line too long")
                        continue
                    queue.put_nowait(line)
            finally:
                queue.put_nowait(None)  # commands already typed run first

    async def _run_queued(self, queue: asyncio.Queue[str | None]) -> None:
        while (line := await queue.get()) is not None:
            await self._command(line)

    def _echo(self, line: str) -> None:
        """The command as typed, stamped, above the prompt (a paste: its start and size)."""
        if line.strip():
            shown = one_line(line, ECHO_CHARS)
            more = f"  [{len(line):,} characters]" if len(shown) < len(line) else ""
            self.write(Line(f"› {shown}{more}", "state"))

    def _agent_names(self) -> list[str]:
        names: list[str] = []
        for a in self.fleet.agents(include_ended=True):
            names += [a.name, a.id]
        return names

    def _halt(self) -> Halt | None:
        h = self.fleet.halt_state()
        return Halt(h.by, h.via, h.at) if h else None

    def _toolbar(self) -> list[str]:
        """Every agent at work: those seen starting a turn with its times, and any other the
        fleet calls busy (one recovered at start, say) with its current tool."""
        working = []
        for a in self.fleet.agents():
            w = self.working.get(a.id)
            if w is not None:
                working.append(Working(a.name, str(a.state), w.since, w.tool, w.tool_since))
            elif a.busy or a.state in BUSY:
                working.append(Working(a.name, str(a.state), None, a.current_tool))
        return toolbar_lines(working, list(self.waiting.values()), self._halt(), time.time())

    # -- what happens, printed --------------------------------------------------------------

    def _track(self, event: Event | EscalationEvent) -> None:
        """What the toolbar shows: which agents work, since when, on which tool."""
        if isinstance(event, StateChanged):
            if event.new == "working":
                if event.agent_id not in self.working:
                    self.working[event.agent_id] = Working(event.name, "working", event.at)
            elif event.new != "waiting":
                self.working.pop(event.agent_id, None)
        elif isinstance(event, AgentOutput) and event.agent_id in self.working:
            w = self.working[event.agent_id]
            if event.kind == "tool_use":
                self.working[event.agent_id] = Working(w.name, w.state, w.since, event.text,
                                                       event.at)
            elif event.kind == "text":
                self.working[event.agent_id] = Working(w.name, w.state, w.since)
        elif isinstance(event, TurnFinished):
            self.working.pop(event.agent_id, None)
        elif isinstance(event, EscalationEvent) and event.escalation.status != "open":
            self.waiting.pop(event.escalation.id, None)

    async def _print_events(self) -> None:
        async for event in self.fleet.events():
            self._track(event)
            line = self.answers.event(event)
            if line:
                self.write(line)

    async def _print_escalations(self) -> None:
        """Deliver the outbox: everything not yet shown here, then each new row, once by id."""
        settings = self.context.settings
        frontend = settings.frontend if isinstance(settings, ConsoleSettings) else FRONTEND
        async for row in self.fleet.follow_escalations(frontend):
            if esc.needs_answer(row):
                self.waiting[row.id] = Waiting(row.id, row.title, row.created_at)
            self.write(self.answers.escalation(row))
            await self.fleet.ack_escalation(row.id, frontend)

    # -- plain lines from a pipe or a file ----------------------------------------------------

    async def _lines(self) -> LineReader | None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=CHUNK)
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
            line = self.stdin.readline(CHUNK)
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
                self.write(Line(render_reply(too_long(line.size)), "error"))
                await self._audit_refused(f"{line.size:,} bytes", "line too long")
                continue
            if await self._command(line) is False:
                return

    # -- one command ---------------------------------------------------------------------------

    async def _command(self, line: str) -> bool:
        """Run one line; False when it asks the console to end."""
        cleaned = clean(line.strip())
        if cleaned.problem:
            self.write(Line(render_reply(Reply.error("That line is too long.", cleaned.problem)),
                            "error"))
            await self._audit_refused(f"{len(line):,} characters", "line too long")
            return True
        text = cleaned.text.strip()  # still a CleanText: not cleaned again
        if not text:
            return True
        if text in QUIT:
            return False
        with contextlib.suppress(asyncio.CancelledError):
            await self._run(text, cleaned.note)
        return True

    async def _run(self, line: CleanText, note: str) -> None:
        reply = await self.context.commands(self.caller, line)
        if reply.announced:
            return  # the notice that every front end gets says it; printed from the outbox
        text = render_reply(reply)
        self.write(Line(f"{text}\n{note}" if note else text, reply_kind(reply)))

    async def _audit_refused(self, what: str, why: str) -> None:
        who = self.caller
        try:
            await self.fleet.audit(AuditEntry(who.platform, who.id, who.name, "input", what,
                                              False, why))
        except Exception:  # noqa: BLE001 - the reply was printed; the log has the rest
            logger.exception("could not audit a refused console line")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
