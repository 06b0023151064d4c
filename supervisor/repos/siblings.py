"""Sibling awareness: what one agent on a repository did or means to do, ranked for each of the
others by how much it touches their own work, held until their turn ends, three at a time.

Pure bookkeeping (no git, no bus): the manager feeds it notices and working sets and sends what
`take` returns.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_PER_MESSAGE = 3
KEEP_PER_AGENT = 30  # older notices beyond this are dropped, the least relevant first


@dataclass(frozen=True, slots=True)
class Notice:
    """A commit (`sha` set) or an intention (`note`) of one agent on one repository."""

    repo: str
    agent_id: str
    agent_name: str
    paths: tuple[str, ...]
    at: float
    expires_at: float
    sha: str = ""
    subject: str = ""
    note: str = ""

    @property
    def kind(self) -> str:
        return "commit" if self.sha else "intention"


@dataclass(slots=True)
class _Held:
    notice: Notice
    score: int
    touched: tuple[str, ...]


def covers(mine: str, theirs: str) -> bool:
    """Whether two repository paths overlap: the same file, or one a directory of the other
    (an intention may name a directory: "bot/")."""
    a, b = mine.strip("/"), theirs.strip("/")
    if not a or not b:
        return False
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def overlap(paths: Iterable[str], working: Iterable[str]) -> tuple[str, ...]:
    """The paths of a notice that touch a working set, in the notice's order."""
    work = [w for w in working if w]
    return tuple(p for p in paths if any(covers(p, w) for w in work))


@dataclass(slots=True)
class Siblings:
    """Per recipient: notices waiting for the end of its turn, with their overlap."""

    _held: dict[str, list[_Held]] = field(default_factory=dict)
    _intents: dict[str, Notice] = field(default_factory=dict)  # agent id -> its intention

    def hold(self, recipient: str, notice: Notice, working: Iterable[str]) -> int:
        """Keep `notice` for `recipient`; returns its overlap score (0: none)."""
        touched = overlap(notice.paths, working)
        held = self._held.setdefault(recipient, [])
        held.append(_Held(notice, len(touched), touched))
        if len(held) > KEEP_PER_AGENT:
            held.sort(key=lambda h: (-h.score, -h.notice.at))
            del held[KEEP_PER_AGENT:]
        return len(touched)

    def relevant(self, recipient: str, now: float) -> bool:
        """Whether anything held for `recipient` touches its work (else it is not disturbed)."""
        return any(h.score > 0 and h.notice.expires_at > now
                   for h in self._held.get(recipient, ()))

    def take(self, recipient: str, now: float) -> list[tuple[Notice, tuple[str, ...]]]:
        """At most three, most overlapping first (then newest), if any overlaps at all; the
        rest stay for the next turn's end."""
        held = [h for h in self._held.get(recipient, ()) if h.notice.expires_at > now]
        if not any(h.score > 0 for h in held):
            self._held[recipient] = held
            return []
        held.sort(key=lambda h: (-h.score, -h.notice.at))
        out, self._held[recipient] = held[:MAX_PER_MESSAGE], held[MAX_PER_MESSAGE:]
        return [(h.notice, h.touched) for h in out]

    def forget(self, agent_id: str) -> None:
        self._held.pop(agent_id, None)
        self._intents.pop(agent_id, None)

    def intend(self, notice: Notice) -> None:
        self._intents[notice.agent_id] = notice

    def intents(self, agent_id: str, now: float) -> tuple[str, ...]:
        n = self._intents.get(agent_id)
        return n.paths if n is not None and n.expires_at > now else ()


def render(repo: str, items: list[tuple[Notice, tuple[str, ...]]]) -> str:
    lines = [f"[Switchboard] What your siblings on repository {repo} did or plan, most "
             "relevant to your work first (for your information; no answer needed):"]
    for i, (n, touched) in enumerate(items, 1):
        where = ", ".join(n.paths[:10]) + (f" and {len(n.paths) - 10} more"
                                           if len(n.paths) > 10 else "")
        if n.sha:
            head = f'{n.agent_name} committed {n.sha[:10]} "{n.subject}" touching {where}'
        else:
            until = time.strftime("%H:%M UTC", time.gmtime(n.expires_at))
            head = f"{n.agent_name} intends to change {where} (until {until})"
            if n.note:
                head += f": {n.note}"
        overlap_text = (f" (overlaps your work on {', '.join(touched[:5])})" if touched
                        else " (does not overlap your work)")
        lines.append(f"{i}. {head}{overlap_text}")
    return "\n".join(lines)
