"""Matching policy rule patterns against the segments a line runs, and where output flows."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase

from supervisor.guard.shell.segments import Segment
from supervisor.guard.shell.state import normpath

_SHORT_FLAGS = re.compile(r"-[A-Za-z]{2,}")
_LONG_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*\*?")

Stage = tuple[tuple[str, ...], ...]  # pattern words, each a tuple of alternatives (a|b)


def arg_forms(args: tuple[str, ...]) -> tuple[str, ...]:
    """Arguments as rules see them: -rf also as -r -f, --opt=v also as --opt, paths normalised."""
    out = []
    for a in args:
        out.append(a)
        if a.startswith("--") and "=" in a:
            out.append(a.split("=", 1)[0])
        elif _SHORT_FLAGS.fullmatch(a):
            out.extend("-" + c for c in a[1:])
        if a.startswith("/") and (n := normpath(a)) != a:
            out.append(n)
    return tuple(out)


def _alt_matches(alt: str, forms: tuple[str, ...]) -> bool:
    if any(fnmatchcase(f, alt) for f in forms):
        return True
    if _LONG_FLAG.fullmatch(alt):  # programs accept unique prefixes: git push --forc
        base = alt.rstrip("*")
        if any(len(f) >= 4 and f.startswith("--") and base.startswith(f) for f in forms):
            return True
    if _SHORT_FLAGS.fullmatch(alt):
        return all(any(fnmatchcase(f, "-" + c) for f in forms) for c in alt[1:])
    return False


def match_anywhere(stage: Stage, seg: Segment, forms: tuple[str, ...]) -> bool:
    return any(fnmatchcase(seg.program, a) for a in stage[0]) and all(
        any(_alt_matches(a, forms) for a in word) for word in stage[1:]
    )


def match_prefix(stage: Stage, seg: Segment) -> bool:
    if len(seg.args) < len(stage) - 1 or not any(fnmatchcase(seg.program, a) for a in stage[0]):
        return False
    pairs = zip(stage[1:], seg.args[: len(stage) - 1], strict=True)
    return all(any(fnmatchcase(arg, a) for a in word) for word, arg in pairs)


def downstream(nodes: Sequence[Segment]) -> Callable[[int], set[int]]:
    """For each segment, the segments its output may reach (pipes, substitutions, transitively)."""
    members: dict[int, list[tuple[int, int]]] = {}
    for n, seg in enumerate(nodes):
        for pipe, stage in seg.pipes:
            members.setdefault(pipe, []).append((n, stage))
    reach: dict[int, set[int]] = {}

    def find(start: int) -> set[int]:
        if start not in reach:
            seen: set[int] = set()
            todo = [start]
            while todo:
                n = todo.pop()
                for pipe, stage in nodes[n].pipes:
                    for m, later in members[pipe]:
                        if later > stage and m not in seen:
                            seen.add(m)
                            todo.append(m)
            reach[start] = seen
        return reach[start]

    return find
