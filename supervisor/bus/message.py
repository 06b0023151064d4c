"""The bus's words: who sends (Sender, the operator, Switchboard itself), who a message came from
as data (origin_of), what a send returns (Sent), and how a turn of messages reads to the model
(render)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from store.bus import MessageRow, Taking
from supervisor.bus.inbox import Origin

OPERATOR = "operator"
BUS_TURN_PREFIX = "[Switchboard bus] "  # how a turn of bus messages begins (render)
SYSTEM = "switchboard"
TYPES = ("task", "result", "question", "info", "status", "interrupt")


@dataclass(frozen=True, slots=True)
class Sender:
    id: str  # an agent id, OPERATOR, or SYSTEM
    name: str


OPERATOR_SENDER = Sender(OPERATOR, OPERATOR)
# A standing agent's question its charter decided comes back from its charter, not the operator.
CHARTER_SENDER = Sender(SYSTEM, "charter")
# Switchboard's own senders whose messages are more than notices (supervisor/schedule/scheduler.py
# sends as "scheduler").
_SYSTEM_ORIGINS = {"scheduler": Origin.SCHEDULE, "charter": Origin.CHARTER,
                   "reviews": Origin.REVIEW}


def origin_of(m: MessageRow) -> Origin:
    """Who a message came from, as data: its recorded origin, else what its sender says."""
    if m.origin is not None:
        return Origin(m.origin)
    if m.sender == OPERATOR:
        return Origin.OPERATOR
    if m.sender == SYSTEM:
        return _SYSTEM_ORIGINS.get(m.sender_name, Origin.SYSTEM)
    return Origin.PEER
SYSTEM_SENDER = Sender(SYSTEM, SYSTEM)


class Sent(NamedTuple):  # one per send: a tuple is cheaper to build than a frozen dataclass
    message_id: int | None
    duplicate: bool
    targets: tuple[tuple[str, str, int], ...]  # (name, state, queued) of each recipient
    refused: tuple[str, ...]  # one explanation per recipient refused
    to_operator: bool = False

    @property
    def queued(self) -> tuple[str, ...]:
        """"b (busy, 2 queued)" per recipient it was queued for."""
        if self.to_operator:
            return ("the operator (as a notice)",)
        return tuple(f"{name} ({state}, {n} queued)" if n else f"{name} ({state})"
                     for name, state, n in self.targets)

    def summary(self) -> str:
        parts = []
        if self.message_id is not None:
            parts.append(f"message #{self.message_id}" + (" (already sent: the dedup key "
                                                          "matched)" if self.duplicate else ""))
        if self.queued:
            parts.append("queued for " + ", ".join(self.queued))
        parts.extend(self.refused)
        return "; ".join(parts) or "nothing sent"


@dataclass(frozen=True, slots=True)
class DeliveryStatus:
    recipient: str
    state: str
    attempts: int
    delivered_at: float | None
    consumed_at: float | None
    reason: str | None


_STAMPS: dict[int, str] = {}  # whole second -> its stamp: a turn's messages share a few


def _stamp(at: float) -> str:
    second = int(at)
    text = _STAMPS.get(second)
    if text is None:
        if len(_STAMPS) > 4096:
            _STAMPS.clear()
        text = _STAMPS[second] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    return text


def render(items: Sequence[Taking], more: int) -> str:
    """The text of one turn: an operator's lone task as it was written, anything else as
    numbered messages with sender, type, time written and how many more are queued."""
    if len(items) == 1 and more == 0:
        m = items[0].message
        if m.sender == OPERATOR and m.type == "task":
            return m.body
    n = len(items)
    lines = [f"{BUS_TURN_PREFIX}{n} message{'s' if n != 1 else ''} for you, interrupts first, "
             f"then oldest first; {more} more queued after these. Answer with the send_message "
             "tool (to = the sender, reply_to = the message id)."]
    for i, it in enumerate(items, 1):
        m = it.message
        extra = (f' reply_to="{m.reply_to}"' if m.reply_to else "") + \
            (f' attempt="{it.attempts}"' if it.attempts > 1 else "")
        # A body cannot close its own element and forge the next header.
        body = m.body
        if "<" in body:
            body = body.replace("</message", "<\\/message").replace("<message ", "<\\message ")
        lines.append(f'<message n="{i}" of="{n}" id="{m.id}" from="{m.sender_name}" '
                     f'type="{m.type}" written="{_stamp(m.created_at)}" '
                     f'more_after="{n - i + more}"{extra}>\n{body}\n</message>')
    return "\n".join(lines)


class Members(Protocol):
    """What the bus needs from the fleet (the pool gives it)."""

    def live(self) -> list[tuple[str, str]]:
        """(id, name) of every live agent."""

    def everyone(self) -> list[tuple[str, str]]:
        """(id, name) of every agent there has been; only ever grows."""

    def count(self) -> int:
        """len(everyone()), cheaply."""

    def is_live(self, agent_id: str) -> bool: ...

    def state_of(self, agent_id: str) -> str:
        """A word for the agent's state: idle, busy, paused ..."""

    async def interrupt(self, agent_id: str) -> None: ...


Notify = Callable[[str | None, str, str], Awaitable[Any]]
# Ask the operator (an escalation): (agent id, title, question) -> the answer's text, and
# whether the agent's charter gave it instead of the operator (a standing agent's send-back).
AskOperator = Callable[[str, str, str], Awaitable[tuple[str, bool]]]
