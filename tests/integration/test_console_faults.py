"""The console under bad input and hostile output (issue 9): a line over the reader's bound is
refused whole and the console reads on; escape sequences in what agents say never reach the
terminal; announced replies are printed once."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os

import pytest

from bot.app import Switchboard
from bot.console import MAX_LINE_BYTES, Console, LineReader, TooLong
from supervisor.events import AgentOutput
from tests.conftest import wait_for

pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def console(app):
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    task = asyncio.create_task(Console(app.console_context(), stdin=os.fdopen(read_fd),
                                      stdout=out).run())

    async def send(data: bytes) -> None:
        # A line longer than the pipe's buffer blocks the writer until the console reads it.
        await asyncio.to_thread(os.write, write_fd, data)

    try:
        await wait_for(lambda: "Switchboard console" in out.getvalue(), 10, "the banner")
        yield out, send
    finally:
        with contextlib.suppress(OSError):
            os.write(write_fd, b"/quit\n")
            os.close(write_fd)
        await asyncio.wait_for(task, 30)


async def test_a_2_mib_line_is_refused_and_the_console_keeps_answering(fake_settings):
    """Regression (issue 9): a 2 MiB line left the console unable to answer."""
    async with Switchboard(fake_settings) as app, console(app) as (out, send):
        await send(b"/ask a " + b"x" * (2 << 20) + b"\n/help\n")
        await wait_for(lambda: "Switchboard commands" in out.getvalue(), 10, "/help answered")
        text = out.getvalue()
        assert f"That line is {(2 << 20) + 8:,} bytes" in text and "in a file" in text
        assert text.index("That line is") < text.index("Switchboard commands")
        rows = [(r.action, r.args, r.ok) for r in await app.store.audit.recent(5)]
        assert ("input", f"{(2 << 20) + 8:,} bytes", 0) in rows
        assert ("help", "", 1) in rows


async def test_escape_sequences_from_an_agent_never_reach_the_terminal(fake_settings):
    """Regression (issue 9): the console printed a model's OSC 52 clipboard write and clear
    screen verbatim."""
    hostile = "done\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[H\x9b31m red \ud800"
    async with Switchboard(fake_settings) as app, console(app) as (out, send):
        await send(b"/agents\n")
        await wait_for(lambda: "No agents" in out.getvalue(), 10, "the console is reading")
        app.hub.publish(AgentOutput("a1", "talker", "text", hostile))
        await wait_for(lambda: "[talker]" in out.getvalue(), 10, "the agent's line")
        await send(b"/status \x1b[2Jnosuch\x07\n")
        await wait_for(lambda: "nosuch" in out.getvalue(), 10, "the reply")
    text = out.getvalue()
    assert not any(ch in text for ch in "\x1b\x07\x9b\ud800")
    assert "done\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J" in text
    assert "were removed from your message" in text


async def test_kill_switch_messages_are_printed_once(fake_settings):
    async with Switchboard(fake_settings) as app, console(app) as (out, send):
        await send(b"/killall confirm\n")
        await wait_for(lambda: "Kill switch on" in out.getvalue(), 10, "the notice")
        await send(b"/agents\n")  # after the kill switch's reply, were there one
        await wait_for(lambda: "No agents" in out.getvalue(), 10, "the next reply")
        assert out.getvalue().count("Kill switch on") == 1


async def test_the_line_reader_skips_an_over_long_line_without_buffering_it():
    reader = asyncio.StreamReader()
    lines = LineReader(reader, limit=10)
    reader.feed_data(b"short\n" + b"y" * 25 + b"\nnext\nlast")
    reader.feed_eof()
    got = [await lines.next() for _ in range(5)]
    assert got[0] == b"short\n" and isinstance(got[1], TooLong) and got[1].size == 26
    assert got[2:] == [b"next\n", b"last", None]
    assert MAX_LINE_BYTES >= 1 << 20


async def test_a_terminal_that_takes_nothing_makes_the_console_fall_behind_not_drop_or_die(
        fake_settings):
    """Regression (issue 25): a 15,000-character answer raised BlockingIOError on a terminal
    left non-blocking (asyncio's stdin pipe shares it), and the console was dead; with
    PYTHONUNBUFFERED=1 its last lines were dropped. Here the output is a non-blocking pipe
    nobody reads, 1,000,000 characters are due on it, and the console still runs commands;
    once it is read, everything is there, in order, to the last line before /quit."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(out_w, False)
    stdout = os.fdopen(out_w, "w")
    big = "".join(f"{i:07d}\n" for i in range(125_000))
    got: list[bytes] = []

    def read_all() -> None:
        while chunk := os.read(out_r, 1 << 16):
            got.append(chunk)

    try:
        async with Switchboard(fake_settings) as app:
            task = asyncio.create_task(Console(app.console_context(), stdin=os.fdopen(in_r),
                                               stdout=stdout).run())
            async def ran(action: str) -> bool:
                for _ in range(200):  # bounded: the loop runs while the pipe takes nothing
                    if any(r.action == action for r in await app.store.audit.recent(5)):
                        return True
                    await asyncio.sleep(0.05)
                return False

            os.write(in_w, b"/cost\n")
            assert await ran("cost")  # the console reads (and follows events)
            app.hub.publish(AgentOutput("a1", "talker", "text", big))
            os.write(in_w, b"/agents\n")
            assert await ran("agents"), "the command never ran: the console's loop was blocked"
            assert not task.done()
            reader = asyncio.create_task(asyncio.to_thread(read_all))
            os.write(in_w, b"/help\n/quit\n")
            await asyncio.wait_for(task, 30)
            stdout.close()
            await asyncio.wait_for(reader, 30)
    finally:
        os.close(in_w)
        os.close(out_r)
    text = b"".join(got).decode()
    assert "[talker] " + big in text
    assert text.index("Switchboard console") < text.index(big) < text.index("No agents running")
    assert text.endswith("Send /help <command> for details and examples.\n")  # the last line
