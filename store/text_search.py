"""The WHERE clause of a plain-words search: every word somewhere in the given columns, any
case (ASCII), the words taken literally (a % or _ in them is not a wildcard). Shared by the
repositories whose rows `/search` reads (audit, turns, bus messages)."""

from __future__ import annotations

from collections.abc import Sequence

MAX_WORDS = 8


def escape_like(word: str) -> str:
    """`word` for a LIKE pattern with ESCAPE '\\': its own % and _ taken literally."""
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def contains_all(columns: Sequence[str], words: Sequence[str]) -> tuple[str, list[str]]:
    """`(sql, params)`: each word in at least one of `columns` (NULLs read as empty)."""
    clauses: list[str] = []
    params: list[str] = []
    for word in list(dict.fromkeys(w for w in words if w))[:MAX_WORDS]:
        clauses.append("(" + " OR ".join(f"COALESCE({c}, '') LIKE ? ESCAPE '\\'"
                                         for c in columns) + ")")
        params += [f"%{escape_like(word)}%"] * len(columns)
    return (" AND ".join(clauses) or "1"), params
