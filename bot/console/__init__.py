"""The console front end (bot/console/front.py): the terminal's prompt (terminal.py), its
plain line mode for pipes (lines.py), what it prints (render.py, text.py) and how (output.py)."""

from bot.console.front import BANNER, Console
from bot.console.lines import MAX_LINE_BYTES, LineReader, TooLong, too_long
from bot.console.render import render_escalation, render_event, render_reply
from bot.console.settings import FRONTEND, ConsoleSettings

__all__ = ["BANNER", "FRONTEND", "MAX_LINE_BYTES", "Console", "ConsoleSettings", "LineReader",
           "TooLong", "render_escalation", "render_event", "render_reply", "too_long"]
