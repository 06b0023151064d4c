"""What the console prints, as text: replies, escalations and agent events, each with the kind
of line it is (for its colour). Agents' answers are printed whole and once: the live copy and
the "finished" notice carry the same text, so whichever comes second points at the first."""

from __future__ import annotations

from dataclasses import dataclass

from bot.console.text import clock
from bot.kit import escalation as esc
from bot.kit.text import visible
from commands.base import Reply, Text
from supervisor.api import AgentOutput, EscalationEvent, Event, Kind, StateChanged, TurnFinished
from supervisor.api import EscalationView as EscalationRow

# An answer longer than this is truly huge: its start is shown and the note says where the rest
# is. Tool calls and their results are cut much sooner (the answer is what the operator reads).
ANSWER_SHOWN_CHARS = 1_000_000
TOOL_SHOWN_CHARS = 1500


@dataclass(frozen=True, slots=True)
class Line:
    """One entry to print: its text (not yet made safe for the terminal) and its kind."""

    text: str
    kind: str = "reply"


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


def _asked_at(row: EscalationRow, text: str) -> str:
    """The kit's head says "· 0s ago", true for a moment; a printed line stays, so it says
    when instead (the toolbar's ages move)."""
    ago_head = f"{row.id} · {row.title} · "
    if text.startswith(ago_head):
        first, _, rest = text.partition("\n")
        if first.endswith(" ago"):
            asked = "at" if row.kind == Kind.NOTICE else "asked at"
            first = f"{ago_head}{asked} {clock(row.created_at)}"
            return f"{first}\n{rest}" if rest else first
    return text


def render_escalation(row: EscalationRow) -> str:
    """The kit's escalation, whole: a terminal has room for every line of the detail."""
    blocks = list(esc.whole(row).blocks)
    text = "\n".join(render_block(b) for b in blocks)
    return f"{esc.mark(row)} " + visible(_asked_at(row, text)).replace("\n", "\n   ")


def render_reply(reply: Reply) -> str:
    out = [render_block(block) for block in reply.blocks]
    for row in reply.buttons:
        out.append("  actions: " + "  ".join(f"[{b.label}: {b.command}]" for b in row))
    for att in reply.attachments:
        out.append(f"  attachment {att.filename} ({len(att.content)} bytes)")
    return visible("\n".join(out))


def reply_kind(reply: Reply) -> str:
    return "error" if reply.blocks and reply.blocks[0].style == "error" else "reply"


def _cut(text: str, limit: int, where: str) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [{len(text) - limit:,} more characters not shown: {where}]"


def render_event(event: Event | EscalationEvent) -> Line | None:
    if isinstance(event, EscalationEvent):
        row = event.escalation  # answered anywhere: say how, as the chats' copies do
        return (Line(visible(f"{esc.mark(row)} {row.id} · {row.title}: {esc.outcome(row)}"),
                     "notice") if event.what == "answered" else None)
    if isinstance(event, StateChanged):
        why = f" ({event.reason})" if event.reason else ""
        return Line(f"[{event.name}] {event.old or '-'} → {event.new}{why}", "state")
    if isinstance(event, AgentOutput):
        if event.kind == "text":
            text = _cut(event.text, ANSWER_SHOWN_CHARS,
                        f"the agent's session transcript has all of it (/status {event.name} "
                        "names the session)")
            return Line(f"[{event.name}] {text}", "answer")
        marker = {"tool_use": "⚙ ", "tool_result": "↳ "}.get(event.kind, "")
        text = _cut(event.text, TOOL_SHOWN_CHARS, f"/logs {event.name} has up to 2,000")
        return Line(f"[{event.name}] {marker}{text}", "tool")
    if isinstance(event, TurnFinished):
        mark = "✓" if event.ok else "✗"
        return Line(f"[{event.name}] {mark} turn finished (${event.cost_usd:.4f})",
                    "state" if event.ok else "error")
    return None


SAME_PREFIX_CHARS = 10_000  # a notice cut short shows the start of an answer this long or more


def same_answer(live: str, notice: str) -> bool:
    """The notice carries the live answer (cut, when very long: the supervisor keeps a
    notice's start)."""
    return live == notice or (len(notice) >= SAME_PREFIX_CHARS and live.startswith(notice))


class Answers:
    """Prints each answer once. An agent's final answer reaches the console twice: as its
    live output and in the "finished" notice (which the chats need, and which survives a
    restart). Whichever arrives second is shown as a pointer to the first."""

    def __init__(self) -> None:
        self._shown: dict[str, tuple[str, str]] = {}  # agent id -> (source, text) last shown

    def event(self, event: Event | EscalationEvent) -> Line | None:
        line = render_event(event)
        if not (isinstance(event, AgentOutput) and event.kind == "text" and line):
            return line
        seen = self._shown.pop(event.agent_id, None)
        if seen and seen[0] == "notice" and same_answer(event.text, seen[1]):
            return Line(f"[{event.name}] (its answer is the notice above, "
                        f"{len(event.text):,} characters)", "state")
        self._shown[event.agent_id] = ("live", event.text)
        return line

    def escalation(self, row: EscalationRow) -> Line:
        kind = "notice" if row.kind == Kind.NOTICE else "escalation"
        if row.kind != Kind.NOTICE or not row.agent_id or not row.body:
            return Line(render_escalation(row), kind)
        seen = self._shown.pop(row.agent_id, None)
        if seen and seen[0] == "live" and same_answer(seen[1], row.body):
            return Line(f"{esc.mark(row)} {row.id} · {row.title} · its answer is above "
                        f"({len(seen[1]):,} characters)", kind)
        self._shown[row.agent_id] = ("notice", row.body)
        return Line(render_escalation(row), kind)
