"""Word expansion: the fields a word becomes, given what is known of the variables' values."""

from __future__ import annotations

import re
from dataclasses import dataclass

from supervisor.guard.shell.syntax import Word

MAX_READINGS = 32  # readings of one command: variable values times brace expansions

_BLANKS = re.compile(r"[ \t\n]+")
_SEQUENCE = re.compile(r"(-?\d{1,6}|[A-Za-z])\.\.(-?\d{1,6}|[A-Za-z])(?:\.\.(-?\d{1,6}))?")


@dataclass(frozen=True, slots=True)
class Field:
    """A word after expansion: one argument as the program will see it."""

    text: str
    unresolved: bool = False  # holds an expansion we could not evaluate
    glob: bool = False  # holds an unquoted * ? [...] that the shell would expand


class Symbolic(str):
    """A variable's value that holds expansions we cannot evaluate, written as ${name}."""

    __slots__ = ()


class _TooMany(Exception):
    pass


def _sequence(body: str) -> list[str] | None:
    m = _SEQUENCE.fullmatch(body)
    if not m:
        return None
    a, b, step = m.group(1), m.group(2), abs(int(m.group(3) or 1)) or 1
    if a.lstrip("-").isdigit() != b.lstrip("-").isdigit():
        return None
    lo, hi = (int(a), int(b)) if a.lstrip("-").isdigit() else (ord(a), ord(b))
    if abs(hi - lo) // step >= MAX_READINGS:
        raise _TooMany
    values = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
    return [str(v) if a.lstrip("-").isdigit() else chr(v) for v in values]


def _brace_span(text: str, mask: list[bool], i: int) -> tuple[list[int], int]:
    """For the unquoted { at i: the offsets of it and of its top-level commas, and of its
    matching } (-1 when it has none)."""
    depth, cuts = 0, [i]
    for j in range(i + 1, len(text)):
        if not mask[j]:
            continue
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            if depth == 0:
                return cuts, j
            depth -= 1
        elif text[j] == "," and depth == 0:
            cuts.append(j)
    return cuts, -1


def _braces(text: str, mask: list[bool], out: list[str]) -> None:
    """Brace expansion over the unquoted (mask True) characters: a{b,c} -> ab ac."""
    for i, ch in enumerate(text):
        if ch != "{" or not mask[i]:
            continue
        cuts, end = _brace_span(text, mask, i)
        if end < 0:
            continue
        if len(cuts) > 1:
            bounds = zip(cuts, [*cuts[1:], end], strict=True)
            items = [(text[a + 1:b], mask[a + 1:b]) for a, b in bounds]
        else:
            seq = _sequence(text[i + 1:end]) if all(mask[i + 1:end]) else None
            if seq is None:
                continue
            items = [(v, [False] * len(v)) for v in seq]
        for item, item_mask in items:
            _braces(text[:i] + item + text[end + 1:], mask[:i] + item_mask + mask[end + 1:], out)
            if len(out) > MAX_READINGS:
                raise _TooMany
        return
    out.append(text)


def _finish(chunks: list[tuple[str, bool, bool]], unresolved: bool, braces: bool) -> list[Field]:
    text = "".join(c[0] for c in chunks)
    active = "".join(c[0] for c in chunks if c[2])
    glob = "*" in active or "?" in active or re.search(r"\[.*\]", active) is not None
    if not braces or "{" not in text:
        return [Field(text, unresolved, glob)]
    mask = [c[1] for c in chunks for _ in c[0]]
    if mask.count(True) and text.count("{") > 24:
        return [Field(text, True, glob)]
    out: list[str] = []
    try:
        _braces(text, mask, out)
    except _TooMany:
        return [Field(text, True, glob)]
    return [Field(t, unresolved, glob) for t in out]


def expand(word: Word, values: dict[str, str | None], ifs: bool = False,
           split: bool = True) -> list[Field]:
    """The fields a word becomes, given the variables' values (None: unknown)."""
    fields: list[Field] = []
    chunks: list[tuple[str, bool, bool]] = []  # text, brace-active, glob-active
    state = {"unresolved": False, "has": False}

    def close() -> None:
        if state["has"]:
            fields.extend(_finish(chunks, state["unresolved"], split))
        chunks.clear()
        state.update(unresolved=False, has=False)

    for p in word.parts:
        value = values.get(p.text) if p.kind == "var" else None
        state["has"] = True
        if p.kind == "lit":
            chunks.append((p.text, not p.quoted, not p.quoted))
        elif value is None:
            chunks.append((f"${{{p.text}}}" if p.kind == "var" else p.text, False, False))
            state["unresolved"] = True
        elif isinstance(value, Symbolic):  # v=$HOME: still unknown, but still ${HOME}
            chunks.append((value, False, False))
            state["unresolved"] = True
        elif p.quoted or not split:
            chunks.append((value, False, not p.quoted))
        elif ifs:
            chunks.append((value, False, True))
            state["unresolved"] = True
        else:
            state["has"] = bool(chunks)
            for n, piece in enumerate(_BLANKS.split(value)):
                if n:
                    close()
                if piece:
                    chunks.append((piece, False, True))
                    state["has"] = True
    close()
    return fields


def _value(word: Word, combo: dict[str, str | None], ifs: bool) -> str | None:
    fields = expand(word, combo, ifs, split=False)
    text = "".join(f.text for f in fields)
    return Symbolic(text) if any(f.unresolved for f in fields) else text
