"""What the analysis reports: the segments a line runs (programs, wrappers, writes, unknowns)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from enum import StrEnum

from supervisor.guard.shell.expand import Field

_PLAIN = re.compile(r"[\w@%+=:,./~^-]+")


class Kind(StrEnum):
    RUN = "run"  # a program runs with these arguments
    LAYER = "layer"  # a wrapper that runs another command (sudo, env, bash -c, xargs ...)
    UNKNOWN = "unknown"  # something runs, but we cannot tell what
    WRITE = "write"  # redirections write (or read) these files


# Which pipes a segment's output flows through: (pipe, stage) pairs.
Pipes = frozenset[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Segment:
    kind: Kind
    program: str = ""  # the program's basename
    args: tuple[str, ...] = ()
    text: str = ""  # the command as we read it, for people
    pipes: Pipes = frozenset()
    problems: tuple[str, ...] = ()  # why it must not run unasked even if a rule allows it
    writes: tuple[str, ...] = ()  # WRITE: absolute paths
    reads: tuple[str, ...] = ()  # WRITE: absolute paths read by < redirections
    cwd: str | None = None  # RUN, LAYER: the directory it runs in, when known


@dataclass(frozen=True, slots=True)
class Analysis:
    segments: tuple[Segment, ...]
    canonical: str
    error: str = ""  # set when the line itself cannot be parsed


def _basename(text: str) -> str:
    return text.rstrip("/").rsplit("/", 1)[-1] if "/" in text.rstrip("/") else text


def _show(fields: list[Field]) -> str:
    text = " ".join(
        f.text if f.unresolved or f.glob or _PLAIN.fullmatch(f.text) else shlex.quote(f.text)
        for f in fields
    )
    return text if len(text) <= 500 else text[:497] + "..."
