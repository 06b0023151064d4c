"""The repositories' SQL on PostgreSQL: their `?` placeholders and the few SQLite spellings
translated once per statement text, rows addressable by name and by index (like
aiosqlite.Row), and the types read and written as SQLite's are.

The translation is the small, mechanical part; where a query means something else on the two
engines, its repository keeps one text per engine side by side (`Dialect` in store/db.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from psycopg import Connection, postgres
from psycopg.abc import AdaptContext
from psycopg.adapt import Dumper
from psycopg.types.numeric import NumericLoader
from psycopg.types.string import StrDumperUnknown

from store.migrations import identity_columns

# `'...'` (a literal, '' inside it), a `?` outside one, or a `%` anywhere (psycopg reads `%` as
# the start of a placeholder even inside a literal).
_TOKEN = re.compile(r"'(?:[^']|'')*'|\?|%")
_IS = re.compile(r"\bIS\s+(NOT\s+)?\?")  # SQLite's `IS ?` is null-safe equality
_LIKE = re.compile(r"\bLIKE\b")  # SQLite's LIKE ignores ASCII case; ILIKE does too
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_IDENTITY = identity_columns()


def _token(m: re.Match[str]) -> str:
    t = m.group(0)
    if t == "?":
        return "%s"
    if t == "%":
        return "%%"
    return t.replace("%", "%%")


@functools.lru_cache(maxsize=1024)
def translate(sql: str, *, returning: bool = False) -> tuple[str, bool]:
    """(PostgreSQL text, whether it returns the new row's id). With `returning`, an INSERT into
    a table with an identity key (SQLite's AUTOINCREMENT) gets `RETURNING <key>`: how a
    cursor's `lastrowid` is known."""
    text = _IS.sub(lambda m: "IS DISTINCT FROM ?" if m.group(1) else "IS NOT DISTINCT FROM ?",
                   sql)
    text = _LIKE.sub("ILIKE", text)
    text = _TOKEN.sub(_token, text)
    if returning and "RETURNING" not in text.upper():
        m = _INSERT.match(text)
        key = _IDENTITY.get(m.group(1).lower()) if m else None
        if key is not None:
            return f"{text} RETURNING {key}", True
    return text, False


class Row(tuple[Any, ...]):
    """One row: by index, by column name (`row["id"]`), `keys()`, `dict(row)`, as aiosqlite's."""

    __slots__ = ()
    _names: ClassVar[tuple[str, ...]] = ()
    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@functools.lru_cache(maxsize=512)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)  # a name given twice reads the first, as aiosqlite's
    return type("Row", (Row,), {"__slots__": (), "_names": names, "_index": index})


def row_factory(cursor: Any) -> Any:
    """psycopg's row factory: a Row class made once per set of column names."""
    description = cursor.description
    if description is None:
        return tuple
    return _row_class(tuple(c.name for c in description))


class _NumberLoader(NumericLoader):
    """numeric (what SUM of a bigint gives) read as SQLite gives it: an int when whole."""

    def load(self, data: Any) -> Any:
        value = super().load(data)
        return int(value) if value == value.to_integral_value() else float(value)


class _BoolAsInteger(Dumper):
    """A Python bool written as 0 or 1: SQLite's booleans are integers, and so are these
    columns (a repository may pass True where it means 1)."""

    oid = postgres.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _TextWithoutNul(StrDumperUnknown):
    """A text holding NUL, which SQLite stores and PostgreSQL's text cannot: stored with U+FFFD
    in its place (an agent's output is kept, not refused as a failed write)."""

    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


def configure(context: AdaptContext) -> None:
    """Register the loaders and dumpers above on one connection."""
    context.adapters.register_loader("numeric", _NumberLoader)
    context.adapters.register_dumper(bool, _BoolAsInteger)
    context.adapters.register_dumper(str, _TextWithoutNul)


class SyncConnection:
    """A psycopg connection with the calls a writer thread's steps make of sqlite3's
    (store/writer.py): `execute` and `executemany` return the cursor, whose rows are tuples."""

    def __init__(self, raw: Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        cur = self.raw.cursor()
        cur.execute(translate(sql)[0], parameters)
        return cur

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        cur = self.raw.cursor()
        cur.executemany(translate(sql)[0], list(parameters))
        return cur

    def close(self) -> None:
        self.raw.close()
