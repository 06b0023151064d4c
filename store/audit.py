"""Repository for the audit log: who did what, from which platform, with what result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from store import private
from store.clock import Now, system_now
from store.db import AnyDatabase
from store.private import TIMEOUT_S, Target
from store.text_search import contains_all, escape_like


@dataclass(frozen=True, slots=True)
class AuditRow:
    id: int
    at: float
    platform: str
    user_id: str
    user_name: str
    action: str
    args: str
    ok: int
    result: str


def _same(text: str) -> str:
    return text


class AuditRepo:
    def __init__(self, db: AnyDatabase, redact: Callable[[str], str] | None = None, *,
                 now: Now = system_now) -> None:
        self.db = db
        self._now = now
        # The last line of defence: whatever a caller passes, known secrets never get written.
        self.redact = redact or _same

    async def record(
        self, *, platform: str, user_id: str, user_name: str, action: str, args: str, ok: bool,
        result: str,
    ) -> int:
        return await self.db.execute(
            "INSERT INTO audit (at, platform, user_id, user_name, action, args, ok, result)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (self._now(), platform, user_id, user_name, action, self.redact(args)[:2000],
             int(ok), self.redact(result)[:2000]),
        )

    async def recent(self, n: int = 50) -> list[AuditRow]:
        rows = await self.db.fetchall("SELECT * FROM audit ORDER BY id DESC LIMIT ?", (n,))
        return [AuditRow(**dict(r)) for r in rows]

    async def find(self, *, who: str | None = None, since: float = 0.0,
                   limit: int = 200) -> list[AuditRow]:
        """Operator actions from `since` on, newest first; `who` narrows them to one operator
        (their name or platform id) or to actions naming it as a word of their arguments (an
        agent: /kill dev, /ask dev ...)."""
        where, params = "at >= ?", list[object]([since])
        if who:
            where += " AND (user_name = ? OR user_id = ? OR (' ' || args || ' ') LIKE ? ESCAPE ?)"
            params += [who, who, f"% {escape_like(who)} %", "\\"]
        rows = await self.db.fetchall(
            f"SELECT * FROM audit WHERE {where} ORDER BY id DESC LIMIT ?", (*params, limit))
        return [AuditRow(**dict(r)) for r in rows]

    async def search(self, words: Sequence[str], *, since: float = 0.0,
                     limit: int = 200) -> list[AuditRow]:
        """Rows whose action, arguments or result hold every word, newest first."""
        where, params = contains_all(("action", "args", "result", "user_name"), words)
        rows = await self.db.fetchall(
            f"SELECT * FROM audit WHERE at >= ? AND {where} ORDER BY id DESC LIMIT ?",
            (since, *params, limit))
        return [AuditRow(**dict(r)) for r in rows]


def record_sync(target: Target, *, platform: str, user_id: str, action: str, args: str,
                ok: bool, result: str, redact: Callable[[str], str] = _same,
                now: Now = system_now, timeout_s: float = TIMEOUT_S) -> None:
    """An audit row written with a private connection (store/private.py): for `switchboard
    kill`, which must work whether or not a supervisor is running. `target`: the SQLite file,
    or the PostgreSQL URL."""
    private.write(target, "INSERT INTO audit (at, platform, user_id, user_name, action, args, ok,"
                  " result) VALUES (?,?,?,?,?,?,?,?)",
                  (now(), platform, user_id, user_id, action, redact(args)[:2000], int(ok),
                   redact(result)[:2000]), timeout_s)
