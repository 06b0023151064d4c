"""The record, read from chat (`SupervisorAPI.record`): the audit of operator actions by
operator or agent, and a search in plain words over bus messages, turns' prompts and results,
and audit rows, so that past decisions are found without opening the database."""

from __future__ import annotations

import time
from dataclasses import dataclass

from store import Store
from store.audit import AuditRow
from supervisor.errors import InvalidRequest

DEFAULT_DAYS = 7.0
MAX_HITS = 200  # per kind of record
SNIPPET_CHARS = 120


@dataclass(frozen=True, slots=True)
class Hit:
    """One match: where it is, when, whose, a one-line snippet around the first word, and the
    whole text it was found in."""

    kind: str  # turn | message | audit
    ref: str  # "turn 12", "message 40", "audit 7"
    at: float
    who: str
    snippet: str
    text: str


@dataclass(frozen=True, slots=True)
class SearchView:
    words: tuple[str, ...]
    days: float
    hits: tuple[Hit, ...]  # newest first


def snippet(text: str, words: tuple[str, ...], width: int = SNIPPET_CHARS) -> str:
    """One line of `text` around the first of `words` it holds (any case)."""
    flat = " ".join(text.split())
    low = flat.lower()
    found = [i for w in words if (i := low.find(w.lower())) >= 0]
    at = min(found) if found else 0
    start = max(0, at - width // 3)
    end = min(len(flat), start + width)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def _words(text: str) -> tuple[str, ...]:
    words = tuple(dict.fromkeys(w for w in text.split() if w))
    if not words:
        raise InvalidRequest("give the words to look for: /search <words>")
    if any(len(w) < 2 for w in words):
        raise InvalidRequest("each word needs at least 2 characters")
    return words[:8]


class RecordAPI:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def audit(self, who: str | None = None, days: float = DEFAULT_DAYS,
                    limit: int = MAX_HITS) -> tuple[AuditRow, ...]:
        """Operator actions of the last `days`, newest first: all, one operator's, or those
        naming an agent."""
        _check_days(days)
        return tuple(await self._store.audit.find(who=who, since=time.time() - days * 86_400,
                                                  limit=limit))

    async def search(self, text: str, days: float = DEFAULT_DAYS) -> SearchView:
        """Every bus message, turn (prompt, result, error) and audit row of the last `days`
        holding all of the words, newest first."""
        _check_days(days)
        words = _words(text)
        since = time.time() - days * 86_400
        hits: list[Hit] = []
        names: dict[str, str] = {}
        for turn in await self._store.turns.search(words, since=since, limit=MAX_HITS):
            if turn.agent_id not in names:
                row = await self._store.agents.get(turn.agent_id)
                names[turn.agent_id] = row.name if row else turn.agent_id
            whole = "\n\n".join(p for p in (f"Prompt: {turn.prompt}",
                                            f"Result: {turn.result_text}" if turn.result_text
                                            else "", f"Error: {turn.error}" if turn.error
                                            else "") if p)
            hits.append(Hit("turn", f"turn {turn.id}", turn.started_at, names[turn.agent_id],
                            snippet(whole, words), whole))
        for m in await self._store.bus.search(words, since=since, limit=MAX_HITS):
            hits.append(Hit("message", f"message {m.id}", m.created_at,
                            f"{m.sender_name} → {m.recipient}", snippet(m.body, words), m.body))
        for a in await self._store.audit.search(words, since=since, limit=MAX_HITS):
            if a.action == "search":  # an earlier search's own row only repeats its matches
                continue
            whole = f"/{a.action} {a.args}\n\n{a.result}".strip()
            hits.append(Hit("audit", f"audit {a.id}", a.at, f"{a.user_name} ({a.platform})",
                            snippet(whole, words), whole))
        hits.sort(key=lambda h: h.at, reverse=True)
        return SearchView(words, days, tuple(hits))


def _check_days(days: float) -> None:
    if not 0 < days <= 366:
        raise InvalidRequest(f"the time to look back must be between a minute and a year "
                             f"(got {days:g} days)")


__all__ = ["Hit", "RecordAPI", "SearchView", "snippet"]
