"""The console as a person meets it (issue 25, acceptance 1): `switchboard run` in a real
terminal (a pty), the screen rendered by a terminal emulator, agents on the real CLI and the
mock Anthropic API. A 200,000-character answer arrives whole and once and the next command
works; a 100 KB bracketed paste is one command; arrow-up recalls the last command; output
arriving while a line is half typed leaves that line as it was; the kill switch shows in the
banner and the toolbar; history is kept across runs."""

from __future__ import annotations

import os
import re

import pytest

from tests.fakes.mock_anthropic import directive_of, long_text
from tests.subproc import write_config
from tests.tty import Tty

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

SHOW = os.environ.get("SWITCHBOARD_TEST_SHOW_SCREEN") == "1"  # print each screen checked


def look(tty: Tty, what: str) -> str:
    screen = tty.text()
    if SHOW:
        print(f"\n--- {what} ---\n{screen}\n" + "-" * 100)
    return screen


@pytest.fixture
def tty(short_home, mock_api):
    home = short_home / "sb"
    write_config(home, mock_api, permissive=True)
    t = Tty(home)
    try:
        t.wait("Switchboard console", 60, "the banner")
        t.wait(lambda s: "sb>" in s, 30, "the prompt")
        yield t
    finally:
        t.close()


def _unstamped(text: str) -> str:
    """The console's entries without the indent that puts each continuation line under its
    timestamp."""
    return text.replace("\n" + " " * 9, "\n")


def test_a_200k_answer_arrives_whole_and_once_then_arrow_up_recalls(tty):
    tty.type("/spawn big LONG 200000\r")
    tty.wait("its answer is above", 120, "the finished notice")
    tty.wait(lambda s: "big · working" not in s, 30, "the toolbar without the turn")
    printed = _unstamped(tty.printed())
    answer = long_text(200_000)
    assert "[big] " + answer in printed, "the answer is not whole and in order"
    assert printed.count("L001999 ") == 1, "the answer was printed more than once"
    assert "200,000 characters" in printed
    screen = look(tty, "after a 200,000-character answer")
    assert "L001999" in screen  # its end is in sight, above the prompt

    tty.type("/agents\r")
    screen = tty.wait("1 agent(s)", 30, "the next command's reply")
    assert "big (" in screen and "idle" in screen
    # Arrow-up: the last command back on the input line, and it runs again.
    tty.type("\x1b[A")
    tty.wait(lambda s: tty.prompt_line() == "sb> /agents", 10, "/agents recalled")
    look(tty, "arrow-up")
    tty.type("\r")
    tty.wait(lambda s: tty.printed().count("== 1 agent(s) ==") == 2, 30, "/agents again")


def test_a_100k_paste_is_one_command_and_output_leaves_a_half_typed_line_alone(tty, mock_api):
    def size_of_paste(body):
        directive = directive_of(body)
        if directive.startswith("PASTE"):
            return {"text": f"RECEIVED {len(directive):,} characters, "
                            f"{directive.count(chr(10)):,} newlines"}
        return None

    mock_api.on_request = size_of_paste
    tty.type("/spawn pal SLEEP 0.1: TEXT: ready\r")
    tty.wait("[pal] ready", 90, "the first answer")
    tty.wait(lambda s: "pal · working" not in s, 30, "the turn's end")

    # (b) 100,000 characters over 1,000 lines, pasted: one command, not a thousand.
    lines = [f"PASTE line {i:04d} " + "p" * 83 for i in range(1000)]
    body = "\n".join(lines)
    assert len(body) == 99_999
    tty.type("/ask pal ")
    tty.paste(body)
    tty.wait(lambda s: "PASTE line 0999" in tty.prompt_line(), 30, "the paste's end in sight")
    assert "Sent to pal" not in tty.printed()  # a newline in a paste submits nothing
    tty.type("\r")
    screen = tty.wait("RECEIVED 99,999 characters, 999 newlines", 90, "the model's count")
    look(tty, "after a 100 KB paste")
    assert tty.printed().count("Sent to pal") == 1
    assert "› /ask pal PASTE line 0000" in screen and "[100,008 characters]" in screen

    # (d) Output arriving while a command is half typed.
    tty.type("/ask pal SLEEP 5: TEXT: slow answer\r")
    tty.wait("Sent to pal", 30)
    tty.type("/status p")
    tty.wait(lambda s: tty.prompt_line() == "sb> /status p", 30, "the half-typed line")
    assert "[pal] slow answer" not in tty.printed(), "the answer came before the typing"
    tty.wait(lambda s: "pal · working" in s.splitlines()[-1], 30, "the toolbar's status line")
    tty.wait("[pal] slow answer", 60, "the agent's output")
    screen = look(tty, "output during typing")
    assert tty.prompt_line() == "sb> /status p", screen
    assert not re.search(r"slow answer.*/status p|/status p.*slow", screen)
    tty.type("al\r")
    tty.wait("state: idle", 30, "the finished command's reply")

    # A hostile agent: its tool's output carries a clipboard write (OSC 52), a bell and a
    # clear screen; they reach the screen as visible text, never as escapes. (The CLI itself
    # refuses a command holding control characters, so the command writes them with printf.)
    tty.type("/ask pal BASH: printf '\\033]52;c;cm0gLXJmIH4=\\007\\033[2J'; sleep 2\r")
    screen = tty.wait(lambda s: "pal · waiting" in s.splitlines()[-1] and "⚙ Bash: printf" in
                      s.splitlines()[-1], 60, "the permission request in the toolbar")
    look(tty, "a permission request")
    asked = re.search(r"❓ 1 waiting for you: (\w+) pal wants to use Bash \(\d+s ago\)", screen)
    assert asked, screen
    tty.type(f"/approve {asked.group(1)}\r")
    tty.wait(lambda s: "waiting for you" not in s and "pal ·" not in s.splitlines()[-1], 60,
             "the turn's end")
    screen = look(tty, "a hostile agent")
    assert "↳ \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J" in screen  # the tool's output, visible
    assert b"\x1b]52" not in tty.raw and b"\x07" not in tty.raw and b"\x1b[2J" not in tty.raw


def test_the_kill_switch_shows_in_the_toolbar_and_the_banner(tty, short_home):
    tty.type("/killall confirm\r")
    screen = tty.wait("KILL SWITCH ON", 30, "the kill switch in the toolbar")
    bottom = screen.rstrip().splitlines()[-1]
    assert "KILL SWITCH ON" in bottom and "/killswitch off confirm" in bottom
    look(tty, "kill switch on")
    tty.close()

    again = Tty(short_home / "sb")  # a new start, the switch still on: said first thing
    try:
        screen = again.wait("sb>", 60, "the prompt")
        lines = screen.splitlines()
        banner = next(i for i, line in enumerate(lines) if "Switchboard console" in line)
        assert "KILL SWITCH ON" in lines[banner + 1]
        # History is kept across runs: arrow-up brings back the last run's command; Ctrl-C
        # clears a line without shutting down.
        again.type("\x1b[A")
        again.wait(lambda s: again.prompt_line() == "sb> /killall confirm", 10, "history")
        again.type("\x03")
        again.wait(lambda s: again.prompt_line() == "sb>", 10, "the line cleared")
        again.type("/killswitch off confirm\r")
        again.wait(lambda s: "KILL SWITCH ON" not in s.splitlines()[-1], 30,
                   "the toolbar without the kill switch")
    finally:
        again.close()
