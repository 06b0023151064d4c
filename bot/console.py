"""The console front end: operator commands typed in a terminal, live agent output printed."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import sys
from collections.abc import Callable
from typing import TextIO

from bot.app import Switchboard
from bot.kit import escalation as esc
from bot.render import visible
from commands.base import Caller, Reply, Role, Text
from supervisor.api import AgentOutput, EscalationEvent, Event, StateChanged, TurnFinished
from supervisor.api import EscalationView as EscalationRow

logger = logging.getLogger(__name__)

FRONTEND = "console"


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

    def __init__(self, app: Switchboard, *, stdin: TextIO | None = None,
                 stdout: TextIO | None = None, on_exit: Callable[[], None] | None = None) -> None:
        self.app = app
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.on_exit = on_exit
        self.caller = Caller(f"console:{getpass.getuser()}", getpass.getuser(), Role.ADMIN,
                             "console")

    def write(self, text: str) -> None:
        self.stdout.write(text + "\n")
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
        async for event in self.app.hub.stream():
            line = render_event(event)
            if line:
                self.write(line)

    async def _print_escalations(self) -> None:
        """Deliver the outbox: everything not yet shown here, then each new row, once by id."""
        escalations = self.app.pool.escalations if self.app.pool else None
        if escalations is None:
            return
        async for row in escalations.follow(FRONTEND):
            self.write(render_escalation(row))
            await escalations.ack(row.id, FRONTEND)

    async def _lines(self) -> asyncio.StreamReader | None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self.stdin)
        except (ValueError, OSError):
            return None
        return reader

    async def _read_commands(self) -> None:
        reader = await self._lines()
        while True:
            if reader is not None:
                raw = await reader.readline()
                line = raw.decode(errors="replace")
            else:  # stdin is a regular file: read it directly
                line = self.stdin.readline()
            if not line:
                return  # EOF
            line = line.strip()
            if not line:
                continue
            if line in ("/quit", "/exit", "quit", "exit"):
                return
            with contextlib.suppress(asyncio.CancelledError):
                reply = await self.app.run_command(self.caller, line)
                self.write(render_reply(reply))
