"""The console's pure text: clock times, relative times that move, the timestamp on every
line, the one-line status of a working agent, the bottom toolbar's lines and the colours.
No I/O and no clock of its own: every function is handed `now`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from commands.render import span

STAMP_WIDTH = len("00:00:00 ")
TOOL_CHARS = 60  # a tool call in the status line: its start, enough to recognise it

# SGR colours by kind of line; the stamp is dim. Only ever added after for_terminal(), so no
# escape sequence but these reaches the terminal.
COLOURS = {
    "error": "31",  # red
    "escalation": "33",  # yellow: needs you
    "notice": "36",  # cyan
    "answer": "1",  # bold: what an agent said
    "tool": "2",  # dim: tool calls and results
    "state": "2",
    "banner": "1",
    "killswitch": "1;31",
}
DIM = "2"


def clock(ts: float) -> str:
    """Local wall time of `ts`, to the second."""
    return time.strftime("%H:%M:%S", time.localtime(ts))


def stamped(text: str, ts: float) -> str:
    """`text` under a timestamp: the first line starts with the time, the others are indented
    under it, so where one entry ends and the next begins stays clear."""
    pad = "\n" + " " * STAMP_WIDTH
    return f"{clock(ts)} " + text.replace("\n", pad)


def paint(text: str, kind: str, *, colour: bool) -> str:
    """A stamped entry in its kind's colour, the stamp dim. Without colour, `text` as is."""
    if not colour:
        return text
    code = COLOURS.get(kind)
    stamp, rest = text[:STAMP_WIDTH], text[STAMP_WIDTH:]
    body = f"\x1b[{code}m{rest}\x1b[0m" if code else rest
    return f"\x1b[{DIM}m{stamp}\x1b[0m{body}"


def one_line(text: str, limit: int) -> str:
    """`text` on one line of at most `limit` characters (… where cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Working:
    """What the toolbar knows of one live agent."""

    name: str
    state: str
    since: float | None  # when its current turn began, if seen
    tool: str | None = None  # its current tool call, in one line
    tool_since: float | None = None


def status_line(agent: Working, now: float) -> str:
    """One agent in one line: `fixer · working 1m05s · ⚙ Bash: pytest -q (12s)`."""
    line = f"{agent.name} · {agent.state}"
    if agent.since is not None:
        line += f" {span(now - agent.since)}"
    if agent.tool:
        line += f" · ⚙ {one_line(agent.tool, TOOL_CHARS)}"
        if agent.tool_since is not None:
            line += f" ({span(now - agent.tool_since)})"
    return line


@dataclass(frozen=True, slots=True)
class Waiting:
    """An open escalation, as the toolbar counts it."""

    id: str
    title: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Halt:
    """The kill switch, on: by whom, how, since when."""

    by: str
    via: str
    at: float


def killswitch_banner(halt: Halt | None, now: float) -> str | None:
    if halt is None:
        return None
    return (f"🛑 KILL SWITCH ON for {span(now - halt.at)} (by {halt.by} via {halt.via}): "
            "agents are refused; /killswitch off confirm")


def toolbar_lines(working: Iterable[Working], waiting: Sequence[Waiting], halt: Halt | None,
                  now: float, *, max_agents: int = 6) -> list[str]:
    """The bottom toolbar: the kill switch if on, what waits for the operator (with ages that
    move), one line per working agent, and a count of the rest."""
    lines = []
    banner = killswitch_banner(halt, now)
    if banner:
        lines.append(banner)
    if waiting:
        oldest = sorted(waiting, key=lambda w: w.created_at)
        shown = ", ".join(f"{w.id} {one_line(w.title, 40)} ({span(now - w.created_at)} ago)"
                          for w in oldest[:3])
        more = f" +{len(oldest) - 3} more" if len(oldest) > 3 else ""
        lines.append(f"❓ {len(oldest)} waiting for you: {shown}{more} · /pending")
    agents = list(working)
    lines += [status_line(a, now) for a in agents[:max_agents]]
    if len(agents) > max_agents:
        lines.append(f"… and {len(agents) - max_agents} more working · /agents")
    if not lines:
        lines.append("no agent working · /help for commands · Ctrl-D or /quit to shut down")
    return lines
