"""The parsed form of a command line: words, redirections, commands, and the parse error."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")


class ShellParseError(ValueError):
    """The text is not a command line bash would run (unbalanced quotes, stray parentheses...)."""


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of a word: literal text, a plain $variable, or an expansion we cannot evaluate."""

    kind: str  # "lit", "var" or "opaque"
    text: str  # the literal text, the variable's name, or the expansion as written
    quoted: bool  # quoted parts are neither split, globbed nor brace-expanded


@dataclass(frozen=True, slots=True)
class Word:
    parts: tuple[Part, ...]

    @property
    def keyword(self) -> str | None:
        """The text, when the word could be a reserved word (a bare unquoted literal)."""
        if len(self.parts) == 1 and self.parts[0].kind == "lit" and not self.parts[0].quoted:
            return self.parts[0].text
        return None


@dataclass(frozen=True, slots=True)
class Redirect:
    op: str
    target: Word | None  # None for here-documents
    body: str = ""  # a here-document's text


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command (or a for-loop header, or a function definition) of a parsed line."""

    kind: str  # "simple"; "for" (words: the name, then the values); "function" (words: the name)
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    pipes: frozenset[tuple[int, int]]  # (pipe, stage): output of a lower stage reaches a higher one
    cond: bool  # may not run, or runs in a subshell: its assignments may not stick
    loop: bool  # inside a loop: may run again after assignments that come later in the text


@dataclass(frozen=True, slots=True)
class Script:
    commands: tuple[Command, ...]
    canonical: str  # the line rewritten with quoting and whitespace normalised
    pipe_count: int
    # (text, why) of constructs that may run code hidden in a value or assign wherever they
    # appear, even in an assignment: ${...} other than ${name} (${a[$(x)]}, ${x@P}, ${x:=y}),
    # arithmetic $((x)) $[x] ((x)) with names in it, array subscripts a=([x]=1).
    hazards: tuple[tuple[str, str], ...] = ()


def _assign_split(word: Word) -> tuple[str, bool, Word] | None:
    """NAME=value (or NAME+=value) as the shell sees it: the '=' unquoted in the first part."""
    if not word.parts or word.parts[0].kind != "lit" or word.parts[0].quoted:
        return None
    m = _ASSIGN.match(word.parts[0].text)
    if not m:
        return None
    rest = word.parts[0].text[m.end():]
    value = ((Part("lit", rest, False),) if rest else ()) + word.parts[1:]
    return m.group(1), bool(m.group(2)), Word(value)
