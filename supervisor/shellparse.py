"""Reads bash command lines the way bash would, to list every command a line may run."""

from __future__ import annotations

import logging
import os.path
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from itertools import product

logger = logging.getLogger(__name__)

MAX_NESTING = 40  # parentheses, substitutions and compound commands inside one another
MAX_REPARSE = 8  # strings run again as shell code inside one another: bash -c, eval, ssh, watch
MAX_READINGS = 32  # readings of one command: variable values times brace expansions
MAX_VALUE = 4096  # longer variable values are not tracked (doubling them grows without bound)
MAX_LOOSE = 400  # segments the fallback reader of unparseable text may produce

_OPS = (
    "<<<", "<<-", "&>>", ";;&", "&&", "||", "|&", ";;", ";&", "<<", ">>", "<&", ">&", "<>", ">|",
    "&>", ";", "&", "|", "(", ")", "<", ">",
)
_REDIRECTS = frozenset({"<<<", "<<-", "&>>", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "<", ">"})
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_META = frozenset(" \t\n;&|()<>")
_DIGITS = "0123456789"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED_NAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_SHORT_FLAGS = re.compile(r"-[A-Za-z]{2,}")
_LONG_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*\*?")
_BLANKS = re.compile(r"[ \t\n]+")
_HEX = {k: re.compile(f"[0-9A-Fa-f]{{1,{n}}}") for k, n in (("x", 2), ("u", 4), ("U", 8))}
_OCTAL = re.compile("[0-7]{0,2}")
_PLAIN = re.compile(r"[\w@%+=:,./~^-]+")
_SEQUENCE = re.compile(r"(-?\d{1,6}|[A-Za-z])\.\.(-?\d{1,6}|[A-Za-z])(?:\.\.(-?\d{1,6}))?")
# Characters that mean something to the shell when unquoted; quoted ones are escaped in the
# canonical form so that 'a b' and a\ b read the same and '*' never reads like a glob.
_ESCAPE = frozenset(" \t|&;()<>'\"`$\\*?[]{}~#=,!")
_C_ESCAPES = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
    "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}
_SYSTEM_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"}
)
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"})
_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})
# Builtins that may set any variable: after them no variable's value is known.
_TAINTING = frozenset({"read", "mapfile", "readarray", "getopts", "let", "source", ".", "wait"})
# Builtins that change which program a name runs (aliases, hashed paths, shell options).
_RELINKING = frozenset({"hash", "alias", "enable", "shopt", "set"})


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
    # ${...} expansions other than ${name}: they may run code (${a[$(x)]}, ${x@P}, arithmetic
    # on a variable's text) or assign (${x:=y}) wherever they appear, even in an assignment.
    params: tuple[str, ...] = ()


@dataclass(slots=True)
class _Cmd:
    kind: str
    words: list[Word]
    redirects: list[Redirect]
    cond: bool
    loop: bool
    pipes: set[tuple[int, int]] = field(default_factory=set)


@dataclass(slots=True)
class _Heredoc:
    delim: str
    strip: bool
    quoted: bool
    redirects: list[Redirect]  # the owner's list, shared so the body can be filled in later
    index: int
    cmd: _Cmd | None = None


@dataclass(slots=True)
class _Shared:
    """State shared by a parser and the parsers of its backquoted parts and here-documents."""

    next_pipe: int = 0
    cmds: list[_Cmd] = field(default_factory=list)
    depth: int = 0
    outputs: set[int] = field(default_factory=set)  # commands inside >( ): they read their owner
    bodies: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # ${...} beyond a plain ${name}

    def pipe(self) -> int:
        self.next_pipe += 1
        return self.next_pipe - 1


@dataclass(slots=True)
class _Tok:
    kind: str  # "word", "op", "nl", "eof"
    text: str  # the operator, or the word's canonical form
    start: int  # commands recorded before this token was read
    word: Word | None = None
    fd: str = ""


def _merge(parts: list[Part]) -> tuple[Part, ...]:
    out: list[Part] = []
    for p in parts:
        if out and p.kind == "lit" and out[-1].kind == "lit" and out[-1].quoted == p.quoted:
            out[-1] = Part("lit", out[-1].text + p.text, p.quoted)
        else:
            out.append(p)
    return tuple(out)


def _escape(ch: str) -> str:
    if ch in _ESCAPE:
        return "\\" + ch
    return ch if ch.isprintable() else f"$'\\u{ord(ch):04x}'"


def _canon_word(parts: tuple[Part, ...]) -> str:
    out = []
    for p in parts:
        if p.kind == "lit":
            out.append("".join(map(_escape, p.text)) if p.quoted else p.text)
        elif p.kind == "var":
            out.append(f'"${{{p.text}}}"' if p.quoted else f"${{{p.text}}}")
        else:
            out.append(f'"{p.text}"' if p.quoted else p.text)
    return "".join(out) or "''"


def _chr(code: int) -> str:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return chr(code)


class _Parser:
    def __init__(self, text: str, shared: _Shared, cond: bool = False, loop: bool = False) -> None:
        self.s = text
        self.i = 0
        self.sh = shared
        self.cond = cond
        self.loop = loop
        self.tok: _Tok | None = None
        self.heredocs: list[_Heredoc] = []

    # -- tokens ------------------------------------------------------------------------------

    def peek(self) -> _Tok:
        if self.tok is None:
            self.tok = self._lex()
        return self.tok

    def take(self) -> _Tok:
        tok = self.peek()
        self.tok = None
        return tok

    def _enter(self) -> None:
        self.sh.depth += 1
        if self.sh.depth > MAX_NESTING:
            raise ShellParseError("nested too deeply")

    def _lex(self) -> _Tok:
        s, n = self.s, len(self.s)
        while True:
            while self.i < n and (s[self.i] in " \t" or s.startswith("\\\n", self.i)):
                self.i += 2 if s[self.i] == "\\" else 1
            start = len(self.sh.cmds)
            if self.i >= n:
                return _Tok("eof", "", start)
            c = s[self.i]
            if c == "#":
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j
                continue
            if c == "\n":
                self.i += 1
                self._read_heredocs()
                return _Tok("nl", ";", start)
            break
        if not (c in "<>" and s.startswith("(", self.i + 1)):
            j = self.i
            while j < n and s[j] in _DIGITS:
                j += 1
            fd = ""
            if j > self.i and j < n and s[j] in "<>" and not s.startswith("(", j + 1):
                fd, self.i = s[self.i:j], j
            for op in _OPS:
                if s.startswith(op, self.i):
                    self.i += len(op)
                    return _Tok("op", op, start, fd=fd)
        word = self._word()
        return _Tok("word", _canon_word(word.parts), start, word)

    def _word(self) -> Word:
        s, n = self.s, len(self.s)
        parts: list[Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(Part("lit", "".join(buf), False))
                buf.clear()

        while self.i < n:
            c = s[self.i]
            if c in "<>" and s.startswith("(", self.i + 1):
                flush()
                parts.append(self._subst(self.i + 2, c + "(", False, output=c == ">"))
            elif c == "(" and not parts and _ASSIGN.fullmatch("".join(buf)):
                flush()
                parts.append(self._array())
            elif c in _META:
                break
            elif c == "\\":
                flush()
                if s.startswith("\n", self.i + 1):
                    self.i += 2
                else:
                    parts.append(Part("lit", s[self.i + 1:self.i + 2] or "\\", True))
                    self.i += 2
            elif c == "'":
                flush()
                j = s.find("'", self.i + 1)
                if j < 0:
                    raise ShellParseError("unterminated single quote")
                parts.append(Part("lit", s[self.i + 1:j], True))
                self.i = j + 1
            elif c == '"':
                flush()
                self.i += 1
                parts.extend(self._dq('"'))
            elif c == "$":
                flush()
                parts.extend(self._dollar(False))
            elif c == "`":
                flush()
                parts.append(self._backtick(False))
            else:
                buf.append(c)
                self.i += 1
        flush()
        return Word(_merge(parts))

    def _dq(self, term: str | None) -> list[Part]:
        """Reads a double-quoted string (or a here-document body, term None) up to term."""
        s, n = self.s, len(self.s)
        escapable = '$`"\\\n' if term else "$`\\\n"
        parts: list[Part] = []
        buf: list[str] = []
        while True:
            if self.i >= n:
                if term is None:
                    break
                raise ShellParseError("unterminated double quote")
            c = s[self.i]
            if c == term:
                self.i += 1
                break
            if c == "\\" and self.i + 1 < n and s[self.i + 1] in escapable:
                if s[self.i + 1] != "\n":
                    buf.append(s[self.i + 1])
                self.i += 2
            elif c in "$`":
                if buf:
                    parts.append(Part("lit", "".join(buf), True))
                    buf.clear()
                parts.extend(self._dollar(True) if c == "$" else [self._backtick(True)])
            else:
                buf.append(c)
                self.i += 1
        if buf or not parts:
            parts.append(Part("lit", "".join(buf), True))
        return parts

    def _dollar(self, quoted: bool) -> list[Part]:
        s, i = self.s, self.i
        nxt = s[i + 1:i + 2]
        if nxt == "'" and not quoted:
            return [self._ansi_c()]
        if nxt == '"' and not quoted:
            self.i += 2
            return self._dq('"')
        if nxt == "(":
            return [self._subst(i + 2, "$(", quoted)]
        if nxt == "{":
            return [self._param(quoted)]
        m = _NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            return [Part("var", m.group(), quoted)]
        if nxt and nxt in "0123456789@*#?$!-":
            self.i += 2
            return [Part("opaque", "$" + nxt, quoted)]
        self.i += 1
        return [Part("lit", "$", quoted)]

    def _ansi_c(self) -> Part:
        s, n = self.s, len(self.s)
        self.i += 2
        out: list[str] = []
        while True:
            if self.i >= n:
                raise ShellParseError("unterminated $'")
            c = s[self.i]
            if c == "'":
                self.i += 1
                return Part("lit", "".join(out), True)
            if c != "\\" or self.i + 1 >= n:
                out.append(c)
                self.i += 1
                continue
            d = s[self.i + 1]
            self.i += 2
            if d in _C_ESCAPES:
                out.append(_C_ESCAPES[d])
            elif d in "xuU":
                m = _HEX[d].match(s, self.i)
                if m:
                    self.i = m.end()
                    out.append(_chr(int(m.group(), 16)))
                else:
                    out.append("\\" + d)
            elif d in "01234567":
                m = _OCTAL.match(s, self.i)
                self.i = m.end() if m else self.i
                out.append(_chr(int(d + (m.group() if m else ""), 8) & 0xFF))
            elif d == "c" and self.i < n:
                out.append(chr(ord(s[self.i]) & 0x1F))
                self.i += 1
            else:
                out.append("\\" + d)

    def _subst(self, pos: int, opener: str, quoted: bool, output: bool = False) -> Part:
        """$( ... ), <( ... ) or >( ... ): parsed in place, its commands recorded as they come."""
        self.i = pos
        first = len(self.sh.cmds)
        saved = self.cond
        self.cond = True
        canon = self._list(frozenset({")"}))
        tok = self.take()
        if tok.kind != "op" or tok.text != ")":
            raise ShellParseError(f"unclosed {opener}")
        self.cond = saved
        if output:
            self.sh.outputs.update(range(first, len(self.sh.cmds)))
        return Part("opaque", f"{opener}{canon})", quoted)

    def _backtick(self, quoted: bool) -> Part:
        s, n = self.s, len(self.s)
        escapable = '$`\\"' if quoted else "$`\\"
        self.i += 1
        buf: list[str] = []
        while True:
            if self.i >= n:
                raise ShellParseError("unterminated backquote")
            c = s[self.i]
            if c == "`":
                self.i += 1
                break
            if c == "\\" and self.i + 1 < n and s[self.i + 1] in escapable:
                buf.append(s[self.i + 1])
                self.i += 2
            else:
                buf.append(c)
                self.i += 1
        self._enter()
        canon = _Parser("".join(buf), self.sh, cond=True, loop=self.loop).parse_all()
        self.sh.depth -= 1
        return Part("opaque", f"$({canon})", quoted)

    def _param(self, quoted: bool) -> Part:
        """${...}: a plain ${name} is a variable; anything else is opaque, but its insides run."""
        s, n = self.s, len(self.s)
        m = _BRACED_NAME.match(s, self.i)
        if m:
            self.i = m.end()
            return Part("var", m.group(1), quoted)
        start = self.i
        self.i += 2
        self._enter()
        while True:
            if self.i >= n:
                raise ShellParseError("unterminated ${")
            c = s[self.i]
            if c == "}":
                self.i += 1
                break
            if c == "\\":
                self.i += 2
            elif c == "'" and not quoted:
                j = s.find("'", self.i + 1)
                if j < 0:
                    raise ShellParseError("unterminated single quote")
                self.i = j + 1
            elif c == '"':
                self.i += 1
                self._dq('"')
            elif c == "$":
                self._dollar(True)
            elif c == "`":
                self._backtick(True)
            else:
                self.i += 1
        self.sh.depth -= 1
        self.sh.params.append(s[start:self.i])
        return Part("opaque", s[start:self.i], quoted)

    def _array(self) -> Part:
        self.i += 1
        self._enter()
        canon = []
        while True:
            tok = self._lex()
            if tok.kind == "op" and tok.text == ")":
                break
            if tok.kind == "word":
                canon.append(tok.text)
            elif tok.kind != "nl":
                raise ShellParseError("bad array assignment")
        self.sh.depth -= 1
        return Part("opaque", "(" + " ".join(canon) + ")", False)

    def _read_heredocs(self) -> None:
        pending, self.heredocs = self.heredocs, []
        s, n = self.s, len(self.s)
        for doc in pending:
            lines = []
            while self.i < n:
                j = s.find("\n", self.i)
                line = s[self.i:] if j < 0 else s[self.i:j]
                self.i = n if j < 0 else j + 1
                line = line.lstrip("\t") if doc.strip else line
                if line == doc.delim:
                    break
                lines.append(line + "\n")
            body = "".join(lines)
            doc.redirects[doc.index] = Redirect(doc.redirects[doc.index].op, None, body)
            # Literal and expanding bodies must never read alike in the canonical form.
            self.sh.bodies.append(("-" if doc.quoted else "+") + shlex.quote(body))
            if not doc.quoted and ("$" in body or "`" in body):
                first = len(self.sh.cmds)
                _Parser(body, self.sh, cond=True, loop=self.loop)._dq(None)
                if doc.cmd is not None:  # the owner is complete: link its feeders now
                    self._link(range(first, len(self.sh.cmds)), doc.cmd)

    # -- grammar -----------------------------------------------------------------------------

    def parse_all(self) -> str:
        canon = self._list(frozenset())
        tok = self.peek()
        if tok.kind != "eof":
            raise ShellParseError(f"unexpected {tok.text!r}")
        return canon

    def _skip_nl(self) -> None:
        while self.peek().kind == "nl":
            self.take()

    def _is(self, tok: _Tok, words: frozenset[str] | tuple[str, ...]) -> bool:
        if tok.kind == "op":
            return tok.text in words
        return tok.kind == "word" and tok.word is not None and tok.word.keyword in words

    def _expect(self, keyword: str) -> None:
        tok = self.take()
        if not (tok.kind == "word" and tok.word is not None and tok.word.keyword == keyword):
            raise ShellParseError(f"missing {keyword!r}")

    def _list(self, stops: frozenset[str]) -> str:
        self._enter()
        out = []
        while True:
            self._skip_nl()
            tok = self.peek()
            if tok.kind == "eof" or self._is(tok, stops):
                break
            start = tok.start
            out.append(self._and_or())
            tok = self.peek()
            if tok.kind == "op" and tok.text in (";", "&"):
                self.take()
                out.append(tok.text)
                if tok.text == "&":  # runs in the background, in a subshell
                    for cmd in self.sh.cmds[start:]:
                        cmd.cond = True
            elif tok.kind == "nl":
                self.take()
                out.append(";")
            else:
                break
        self.sh.depth -= 1
        return " ".join(out)

    def _and_or(self) -> str:
        out = [self._pipeline()]
        while (tok := self.peek()).kind == "op" and tok.text in ("&&", "||"):
            self.take()
            saved = self.cond
            self.cond = True
            self._skip_nl()
            out += [tok.text, self._pipeline()]
            self.cond = saved
        return " ".join(out)

    def _pipeline(self) -> str:
        out = []
        while (tok := self.peek()).kind == "word" and self._is(tok, ("!", "time")):
            self.take()
            out.append(tok.text)
            if tok.text == "time" and self._is(self.peek(), ("-p",)):
                self.take()
        stages = []
        while True:
            first = self.peek().start
            out.append(self._command())
            stages.append((first, len(self.sh.cmds)))
            tok = self.peek()
            if not (tok.kind == "op" and tok.text in ("|", "|&")):
                break
            self.take()
            out.append("|")
            self._skip_nl()
        if len(stages) > 1:
            pipe = self.sh.pipe()
            for stage, (a, b) in enumerate(stages):
                for cmd in self.sh.cmds[a:b]:
                    cmd.pipes.add((pipe, stage))
                    cmd.cond = True  # every stage runs in a subshell
        return " ".join(out)

    def _command(self) -> str:
        tok = self.peek()
        if tok.kind == "op":
            if tok.text == "(":
                return self._subshell()
            if tok.text in _REDIRECTS:
                return self._simple()
            raise ShellParseError(f"unexpected {tok.text!r}")
        if tok.kind != "word" or tok.word is None:
            raise ShellParseError("missing command")
        compound = {
            "{": self._group, "if": self._if, "while": self._while, "until": self._while,
            "for": self._for, "select": self._for, "case": self._case, "function": self._function,
            "[[": self._test,
        }.get(tok.word.keyword or "")
        if compound is not None:
            return compound()
        if tok.word.keyword in ("then", "elif", "else", "fi", "do", "done", "esac", "}"):
            raise ShellParseError(f"unexpected {tok.text!r}")
        return self._simple()

    def _new_cmd(self, kind: str, words: list[Word], redirects: list[Redirect], start: int) -> _Cmd:
        cmd = _Cmd(kind, words, redirects, self.cond, self.loop)
        index = len(self.sh.cmds)
        self.sh.cmds.append(cmd)
        for doc in self.heredocs:
            if doc.redirects is redirects:
                doc.cmd = cmd
        if start < index:  # commands substituted into this one's words feed it
            self._link(range(start, index), cmd)
        return cmd

    def _link(self, feeders: range, owner: _Cmd) -> None:
        into = back = -1
        for k in feeders:
            cmd = self.sh.cmds[k]
            cmd.pipes |= owner.pipes
            if k in self.sh.outputs:
                back = self.sh.pipe() if back < 0 else back
                cmd.pipes.add((back, 1))
                owner.pipes.add((back, 0))
            else:
                into = self.sh.pipe() if into < 0 else into
                cmd.pipes.add((into, 0))
                owner.pipes.add((into, 1))

    def _redirect(self, redirects: list[Redirect]) -> str:
        op = self.take()
        target = self.take()
        if target.kind != "word" or target.word is None:
            raise ShellParseError(f"{op.text} needs a target")
        if op.text in ("<<", "<<-"):
            delim = "".join(p.text if p.kind != "var" else "$" + p.text for p in target.word.parts)
            quoted = any(p.quoted for p in target.word.parts)
            redirects.append(Redirect(op.text, None))
            doc = _Heredoc(delim, op.text == "<<-", quoted, redirects, len(redirects) - 1)
            self.heredocs.append(doc)
            return f"{op.fd}{op.text}"
        redirects.append(Redirect(op.text, target.word))
        return f"{op.fd}{op.text} {target.text}"

    def _trailing(self, canon: str) -> str:
        """Redirections after a compound command: recorded as a command of their own."""
        redirects: list[Redirect] = []
        out = [canon]
        start = self.peek().start
        while (tok := self.peek()).kind == "op" and tok.text in _REDIRECTS:
            out.append(self._redirect(redirects))
        if redirects:
            self._new_cmd("simple", [], redirects, start)
        return " ".join(out)

    def _simple(self) -> str:
        start = self.peek().start
        words: list[Word] = []
        redirects: list[Redirect] = []
        out = []
        while True:
            tok = self.peek()
            if tok.kind == "word" and tok.word is not None:
                self.take()
                words.append(tok.word)
                out.append(tok.text)
                if len(words) == 1 and not redirects and self._is(self.peek(), ("(",)):
                    self.take()
                    if not self._is(self.take(), (")",)):
                        raise ShellParseError("bad function definition")
                    return self._function_body(tok.word, tok.text)
            elif tok.kind == "op" and tok.text in _REDIRECTS:
                out.append(self._redirect(redirects))
            else:
                break
        if not words and not redirects:
            raise ShellParseError("missing command")
        self._new_cmd("simple", words, redirects, start)
        return " ".join(out)

    def _function(self) -> str:
        self.take()
        name = self.take()
        if name.kind != "word" or name.word is None:
            raise ShellParseError("bad function definition")
        if self._is(self.peek(), ("(",)):
            self.take()
            if not self._is(self.take(), (")",)):
                raise ShellParseError("bad function definition")
        return self._function_body(name.word, name.text)

    def _function_body(self, name: Word, canon: str) -> str:
        self._new_cmd("function", [name], [], len(self.sh.cmds))
        self._skip_nl()
        saved = self.cond
        self.cond = True
        body = self._command()
        self.cond = saved
        return f"{canon} () {body}"

    def _subshell(self) -> str:
        self.take()
        saved = self.cond
        self.cond = True
        inner = self._list(frozenset({")"}))
        if not self._is(self.take(), (")",)):
            raise ShellParseError("unclosed (")
        self.cond = saved
        return self._trailing(f"( {inner} )")

    def _group(self) -> str:
        self.take()
        inner = self._list(frozenset({"}"}))
        self._expect("}")
        return self._trailing(f"{{ {inner} ; }}")

    def _if(self) -> str:
        self.take()
        saved = self.cond
        self.cond = True
        out = ["if", self._list(frozenset({"then"}))]
        self._expect("then")
        out += ["then", self._list(frozenset({"elif", "else", "fi"}))]
        while True:
            tok = self.take()
            if self._is(tok, ("elif",)):
                out += ["elif", self._list(frozenset({"then"}))]
                self._expect("then")
                out += ["then", self._list(frozenset({"elif", "else", "fi"}))]
            elif self._is(tok, ("else",)):
                out += ["else", self._list(frozenset({"fi"}))]
                self._expect("fi")
                break
            elif self._is(tok, ("fi",)):
                break
            else:
                raise ShellParseError("missing 'fi'")
        self.cond = saved
        return self._trailing(" ".join(out) + " fi")

    def _while(self) -> str:
        keyword = self.take().text
        saved = self.cond, self.loop
        self.cond = self.loop = True
        test = self._list(frozenset({"do"}))
        self._expect("do")
        body = self._list(frozenset({"done"}))
        self._expect("done")
        self.cond, self.loop = saved
        return self._trailing(f"{keyword} {test} ; do {body} ; done")

    def _for(self) -> str:
        keyword = self.take().text
        saved = self.cond, self.loop
        self.cond = self.loop = True
        if self._is(self.peek(), ("(",)):  # for (( ... )): read as nested subshells
            head = self._command()
        else:
            name = self.take()
            if name.kind != "word" or name.word is None:
                raise ShellParseError(f"bad {keyword} loop")
            words = [name.word]
            head = name.text
            self._skip_nl()
            if self._is(self.peek(), ("in",)):
                self.take()
                words.append(Word((Part("lit", "in", False),)))
                while (tok := self.peek()).kind == "word" and tok.word is not None:
                    self.take()
                    words.append(tok.word)
                    head += " " + tok.text
            self._new_cmd("for", words, [], name.start)
        if self._is(self.peek(), (";",)):
            self.take()
        self._skip_nl()
        self._expect("do")
        body = self._list(frozenset({"done"}))
        self._expect("done")
        self.cond, self.loop = saved
        return self._trailing(f"{keyword} {head} ; do {body} ; done")

    def _case(self) -> str:
        self.take()
        subject = self.take()
        if subject.kind != "word":
            raise ShellParseError("bad case")
        self._skip_nl()
        self._expect("in")
        saved = self.cond
        self.cond = True
        out = ["case", subject.text, "in"]
        ends = (";;", ";&", ";;&")
        while True:
            self._skip_nl()
            tok = self.peek()
            if self._is(tok, ("esac",)):
                self.take()
                break
            if self._is(tok, ("(",)):
                self.take()
            patterns = []
            while True:
                pattern = self.take()
                if pattern.kind != "word":
                    raise ShellParseError("bad case pattern")
                patterns.append(pattern.text)
                sep = self.take()
                if self._is(sep, (")",)):
                    break
                if not self._is(sep, ("|",)):
                    raise ShellParseError("bad case pattern")
            out.append("|".join(patterns) + ") " + self._list(frozenset({*ends, "esac"})))
            if self._is(self.peek(), ends):
                out.append(self.take().text)
        self.cond = saved
        return self._trailing(" ".join(out) + " esac")

    def _test(self) -> str:
        first = self.take()
        assert first.word is not None
        words, out = [first.word], ["[["]
        while True:
            tok = self.take()
            if tok.kind in ("eof", "nl"):
                raise ShellParseError("missing ']]'")
            if tok.word is not None:
                words.append(tok.word)
                out.append(tok.text)
                if tok.word.keyword == "]]":
                    break
            else:
                words.append(Word((Part("lit", tok.fd + tok.text, False),)))
                out.append(tok.fd + tok.text)
        self._new_cmd("simple", words, [], first.start)
        return self._trailing(" ".join(out))


def parse(text: str, first_pipe: int = 0) -> Script:
    """Parses a command line; raises ShellParseError when bash would refuse it."""
    shared = _Shared(next_pipe=first_pipe)
    try:
        canon = _Parser(text, shared).parse_all()
    except RecursionError:
        raise ShellParseError("nested too deeply") from None
    canon += "".join(f" <<{body}" for body in shared.bodies)
    commands = tuple(
        Command(c.kind, tuple(c.words), tuple(c.redirects), frozenset(c.pipes), c.cond, c.loop)
        for c in shared.cmds
    )
    return Script(commands, canon, shared.next_pipe, tuple(dict.fromkeys(shared.params)))


def canonical(text: str) -> str:
    """The command line with quoting and whitespace normalised: equal texts run the same."""
    return parse(text).canonical


def normpath(path: str, cwd: str | None = None) -> str:
    """An absolute path with '.', '..' and repeated slashes collapsed, resolved against cwd."""
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if not path.startswith("/"):
        path = os.path.join(cwd if cwd and cwd.startswith("/") else "/", path)
    path = os.path.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


# -- analysis: from parsed commands to the programs they run --------------------------------


class Kind(StrEnum):
    RUN = "run"  # a program runs with these arguments
    LAYER = "layer"  # a wrapper that runs another command (sudo, env, bash -c, xargs ...)
    UNKNOWN = "unknown"  # something runs, but we cannot tell what
    WRITE = "write"  # redirections write these files


@dataclass(frozen=True, slots=True)
class Segment:
    kind: Kind
    program: str = ""  # the program's basename
    args: tuple[str, ...] = ()
    text: str = ""  # the command as we read it, for people
    pipes: frozenset[tuple[int, int]] = frozenset()
    problems: tuple[str, ...] = ()  # why it must not run unasked even if a rule allows it
    writes: tuple[str, ...] = ()  # WRITE: absolute paths


@dataclass(frozen=True, slots=True)
class Analysis:
    segments: tuple[Segment, ...]
    canonical: str
    error: str = ""  # set when the line itself cannot be parsed


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


@dataclass(slots=True)
class _Env:
    cwd: str | None
    vars: dict[str, frozenset[str | None]] = field(default_factory=dict)  # None: unknown value
    functions: set[str] = field(default_factory=set)
    changed: tuple[str, ...] = ()  # what changed how later programs run (PATH=, hash, alias...)
    tainted: bool = False  # something may have set any variable
    ifs: bool = False  # IFS changed: unquoted expansions may split anywhere

    def child(self, cwd: str | None = None, same_dir: bool = True) -> _Env:
        """A new shell's state: it inherits the directory and environment, not shell variables."""
        return _Env(self.cwd if same_dir else cwd, changed=self.changed)

    def fork(self) -> _Env:
        return _Env(self.cwd, dict(self.vars), set(self.functions), self.changed, self.tainted,
                    self.ifs)

    def values(self, name: str, later: set[str | None]) -> tuple[str | None, ...]:
        """The values a variable may hold; later: values a loop may assign before this use."""
        vals = set(self.vars.get(name, frozenset({None}))) | later
        if self.tainted:
            vals.add(None)
        return tuple(sorted(vals, key=lambda v: (v is None, v or "")))

    def assign(self, name: str, values: set[str | None], cond: bool) -> None:
        vals = {v if v is None or len(v) <= MAX_VALUE else None for v in values} or {None}
        if cond:  # may not happen: the old value stays possible
            vals |= self.vars.get(name, frozenset({None}))
        self.vars[name] = frozenset(vals)
        if name == "IFS":
            self.ifs = True
        if name.isupper() and f"{name} was set" not in self.changed:
            self.changed += (f"{name} was set",)


def _basename(text: str) -> str:
    return text.rstrip("/").rsplit("/", 1)[-1] if "/" in text.rstrip("/") else text


def _show(fields: list[Field]) -> str:
    text = " ".join(
        f.text if f.unresolved or f.glob or _PLAIN.fullmatch(f.text) else shlex.quote(f.text)
        for f in fields
    )
    return text if len(text) <= 500 else text[:497] + "..."


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


def _braces(text: str, mask: list[bool], out: list[str]) -> None:
    """Brace expansion over the unquoted (mask True) characters: a{b,c} -> ab ac."""
    for i, ch in enumerate(text):
        if ch != "{" or not mask[i]:
            continue
        depth, cuts, end = 0, [i], -1
        for j in range(i + 1, len(text)):
            if not mask[j]:
                continue
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                if depth == 0:
                    end = j
                    break
                depth -= 1
            elif text[j] == "," and depth == 0:
                cuts.append(j)
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


class _Analyser:
    def __init__(self, first_pipe: int) -> None:
        self.segments: list[Segment] = []
        self.next_pipe = first_pipe

    def emit(self, kind: Kind, fields: list[Field], pipes: frozenset,
             problems: tuple[str, ...]) -> None:
        program = _basename(fields[0].text) if fields else ""
        args = tuple(f.text for f in fields[1:])
        self.segments.append(Segment(kind, program, args, _show(fields), pipes, problems))

    def unknown(self, text: str, pipes: frozenset, why: str = "cannot tell what runs") -> None:
        problems = (f"{why}: {text}",)
        self.segments.append(Segment(Kind.UNKNOWN, text=text, pipes=pipes, problems=problems))

    def loose(self, text: str, pipes: frozenset) -> None:
        """Unparseable text: every word that could start a command, checked for deny rules only."""
        count = 0
        for chunk in re.split(r"&&|\|\||[;&\n(){}`]|\$\(", text):
            pipe = self.next_pipe
            self.next_pipe += 1
            for stage, part in enumerate(chunk.split("|")):
                words = re.sub(r"[\"'\\]", "", part).split()[:64]
                words = [re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", r"${\1}", w) for w in words]
                for i in range(len(words)):
                    fields = [Field(w) for w in words[i:]]
                    self.emit(Kind.LAYER, fields, pipes | {(pipe, stage)}, ())
                    count += 1
                    if count >= MAX_LOOSE:
                        return

    def reparse(self, text: str, env: _Env, pipes: frozenset, depth: int,
                problems: tuple[str, ...]) -> None:
        """A string the shell runs as code (bash -c, eval, ssh, watch...): read it too."""
        if depth >= MAX_REPARSE:
            self.unknown(text, pipes, "cannot tell what runs: nested too deeply")
            return
        try:
            script = parse(text, self.next_pipe)
        except ShellParseError as exc:
            self.unknown(text, pipes, f"cannot tell what runs: unparseable ({exc})")
            self.loose(text, pipes)
            return
        self.next_pipe = script.pipe_count
        self.script(script, env, pipes, depth + 1, problems)

    def script(self, script: Script, env: _Env, pipes: frozenset, depth: int,
               problems: tuple[str, ...]) -> None:
        # Values assigned inside loops: a later line of the loop may run before an earlier one.
        looped: dict[str, set[str | None]] = {}
        for cmd in script.commands:
            if cmd.loop and cmd.kind == "for" and cmd.words[0].keyword:
                looped.setdefault(cmd.words[0].keyword, set()).add(None)
            if not cmd.loop or cmd.kind != "simple":
                continue
            for word in cmd.words:  # also export NAME=value: any word shaped like an assignment
                if (split := _assign_split(word)) is not None:
                    name, plus, value = split
                    literal = all(p.kind == "lit" for p in value.parts) and not plus
                    text = "".join(p.text for p in value.parts) if literal else None
                    looped.setdefault(name, set()).add(text)
        for text in script.params:
            self.unknown(text, pipes, "cannot tell what this expansion does")
        if script.params:
            env.tainted = True
        for cmd in script.commands:
            self.command(cmd, env, pipes | cmd.pipes, depth, problems, looped)

    def _combos(self, words: list[Word], env: _Env, looped: dict[str, set[str | None]],
                loop: bool) -> list[dict[str, str | None]]:
        names = sorted({p.text for w in words for p in w.parts if p.kind == "var"})
        cands = {n: env.values(n, looped.get(n, set()) if loop else set()) for n in names}
        total = 1
        for n in names:
            total *= len(cands[n])
        if total > MAX_READINGS:
            cands = {n: c if len(c) == 1 else (None,) for n, c in cands.items()}
        return [dict(zip(names, vals, strict=True)) for vals in product(*(cands[n] for n in names))]

    def command(self, cmd: Command, env: _Env, pipes: frozenset, depth: int,
                problems: tuple[str, ...], looped: dict[str, set[str | None]]) -> None:
        if cmd.kind == "function":
            env.functions.add(cmd.words[0].keyword or "")
            return
        targets = [r.target for r in cmd.redirects if r.target is not None]
        combos = self._combos([*cmd.words, *targets], env, looped, cmd.loop)
        if cmd.kind == "for":
            name = cmd.words[0].keyword or ""
            vals: set[str | None] = set() if len(cmd.words) > 1 else {None}
            for combo in combos:
                for word in cmd.words[2:]:
                    fields = expand(word, combo, env.ifs)
                    vals.update(None if f.unresolved or f.glob else f.text for f in fields)
            if _NAME.fullmatch(name):
                env.assign(name, vals, cond=True)
            return
        words = list(cmd.words)
        assigns = []
        while words and (split := _assign_split(words[0])) is not None:
            assigns.append(split)
            words.pop(0)
        cond = cmd.cond or len(combos) > 1
        self._writes(cmd, combos, env, pipes)
        if not words:  # assignments only: they set shell variables, left to right
            for name, plus, value in assigns:
                mine = self._combos([value], env, looped, cmd.loop)
                vals = {None if plus else _value(value, c, env.ifs) for c in mine}
                env.assign(name, vals, cond or len(mine) > 1)
            return
        if assigns:
            problems = (*problems, f"runs with {', '.join(a[0] for a in assigns)} set")
        decl = words[0].keyword in _DECLARE
        stdin = _stdin(cmd)
        for combo in combos:
            fields = []
            for word in words:
                split = decl and _assign_split(word) is not None
                fields += expand(word, combo, env.ifs, split=not split)
            self.run(fields, env, pipes, depth, problems, stdin, cond)

    def _writes(self, cmd: Command, combos: list[dict], env: _Env, pipes: frozenset) -> None:
        """Files the command's redirections write (and sockets they open), as one segment."""
        paths, problems = [], []
        for r in cmd.redirects:
            for combo in combos if r.target is not None else ():
                for f in expand(r.target, combo, env.ifs):
                    dup = r.op == ">&" and (f.text == "-" or f.text.isdigit())  # 2>&1, >&-
                    if f.text.startswith(("/dev/tcp/", "/dev/udp/")):  # bash opens a socket
                        problems.append(f"opens a network connection: {f.text}")
                    elif r.op not in _WRITES or dup:
                        continue
                    elif f.unresolved or f.glob:
                        problems.append(f"cannot tell where it writes: {f.text}")
                    elif f.text in _HARMLESS_TARGETS or f.text.startswith("/dev/fd/"):
                        continue
                    elif not f.text.startswith(("/", "~")) and env.cwd is None:
                        problems.append(f"cannot tell where it writes: {f.text} (unknown cwd)")
                    else:
                        paths.append(normpath(f.text, env.cwd))
        if paths or problems:
            text = " ".join(f"> {p}" for p in paths) or problems[0]
            self.segments.append(Segment(Kind.WRITE, text=text, pipes=pipes,
                                         problems=tuple(problems), writes=tuple(paths)))

    def run(self, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
            problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
        """Runs one command's fields: peels wrappers until the program that really runs."""
        while fields:
            prog = fields[0]
            if prog.unresolved or prog.glob:
                self.unknown(_show(fields), pipes)
                return
            name = _basename(prog.text)
            special = _SPECIAL.get(name)
            if special is not None:
                special(self, name, fields, env, pipes, depth, problems, stdin, cond)
                return
            spec = _WRAPPERS.get(name)
            if spec is None:
                self.program(fields, env, pipes, problems, cond)
                return
            unwrapped = self.unwrap(spec, fields, env, pipes, depth, problems, stdin, cond)
            if unwrapped is None:
                return
            fields, problems = unwrapped

    def unwrap(self, spec: _Wrapper, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
               problems: tuple[str, ...], stdin: str | None, cond: bool):
        """The wrapped command's fields and problems, or None when nothing more runs."""
        args = fields[1:]
        options = _options(spec, args)
        if options is None:  # an option that means no command follows (command -v, sudo -l)
            self.emit(Kind.LAYER, fields, pipes, problems)
            self.program(fields, env, pipes, problems, cond)
            return None
        i, changed, split = options
        i += spec.positionals
        names = []
        while spec.assignments and i < len(args) and _ASSIGN.match(args[i].text):
            names.append(_ASSIGN.match(args[i].text).group(1))
            i += 1
        rest = args[i:]
        if split is not None:
            try:
                rest = [Field(w) for w in shlex.split(split)] + rest
            except ValueError:
                rest = [Field(split, unresolved=True), *rest]
        self.emit(Kind.LAYER, fields, pipes, problems)
        if not rest:
            self.program(fields, env, pipes, problems, cond)
            return None
        if names:
            problems = (*problems, f"runs with {', '.join(names)} set")
        if spec.problem and (changed or names or spec.always):
            problems = (*problems, spec.problem)
        if rest[0].unresolved and len(rest) > 1:  # it may be an option: read it both ways
            self.run(rest[1:], env.fork(), pipes, depth, problems, stdin, cond)
        return rest, problems

    def program(self, fields: list[Field], env: _Env, pipes: frozenset,
                problems: tuple[str, ...], cond: bool) -> None:
        prog, args = fields[0], fields[1:]
        name = _basename(prog.text)
        found = list(problems)
        if "/" in prog.text and os.path.dirname(normpath(prog.text, "/")) not in _SYSTEM_DIRS:
            found.append(f"runs {prog.text}, not a program from the system path")
        if name in env.functions:
            found.append(f"runs {name}, a function defined in the command")
            env.tainted = True
        unresolved = next((a.text for a in args if a.unresolved), None)
        if unresolved is not None:
            found.append(f"cannot tell its arguments: {unresolved}")
        if env.changed:
            found.append(f"runs after {', '.join(env.changed)}")
        self.emit(Kind.RUN, fields, pipes, tuple(found))
        _effects(name, args, env, cond)


def _value(word: Word, combo: dict[str, str | None], ifs: bool) -> str | None:
    fields = expand(word, combo, ifs, split=False)
    text = "".join(f.text for f in fields)
    return Symbolic(text) if any(f.unresolved for f in fields) else text


def _stdin(cmd: Command) -> str | None:
    """The text a command reads on its input, when a here-document or here-string gives it."""
    for r in reversed(cmd.redirects):
        if r.op in ("<<", "<<-"):
            return r.body
        if r.op == "<<<" and r.target is not None:  # unknown parts stay ${name}: unknown again
            return "".join(f"${{{p.text}}}" if p.kind == "var" else p.text for p in r.target.parts)
        if r.op == "<":
            return None
    return None


def _effects(name: str, args: list[Field], env: _Env, cond: bool) -> None:
    """What a builtin changes for the commands after it: directory, variables, lookup."""
    if name in ("cd", "pushd", "popd"):
        targets = [a for a in args if not (a.text.startswith("-") and len(a.text) > 1)]
        if cond or name == "popd" or len(targets) != 1 or targets[0].unresolved or targets[0].glob:
            env.cwd = None
        elif targets[0].text == "-" or not (targets[0].text.startswith(("/", "~")) or env.cwd):
            env.cwd = None
        else:
            env.cwd = normpath(targets[0].text, env.cwd)
    elif name in _DECLARE:
        opts = "".join(a.text[1:] for a in args if a.text[:1] in "-+" and not a.unresolved)
        odd = bool(set(opts) - set("xrgp"))
        for a in args:
            m = _ASSIGN.match(a.text)
            if a.text[:1] in "-+":
                continue
            if m:
                value = None if m.group(2) or odd else a.text[m.end():]
                value = Symbolic(value) if a.unresolved and value is not None else value
                env.assign(m.group(1), {value}, cond)
            elif a.unresolved:
                env.tainted = True
    elif name == "unset":
        for a in args:
            if _NAME.fullmatch(a.text):
                env.assign(a.text, {None}, cond)
    elif name in _TAINTING or (name == "printf" and any(a.text.startswith("-v") for a in args)):
        env.tainted = True
    elif name in _RELINKING and f"{name} ran" not in env.changed:
        env.changed += (f"{name} ran",)


def _options(spec: _Wrapper, args: list[Field]) -> tuple[int, bool, str | None] | None:
    """Reads a wrapper's options: where its command starts, whether any were given, env -S."""
    i, changed, split = 0, False, None
    while i < len(args) and not args[i].unresolved:
        text = args[i].text
        if text == "--":
            return i + 1, changed, split
        if not text.startswith("-") or text == "-":
            break
        changed = True
        if text.startswith("--"):
            opt, eq, val = text[2:].partition("=")
            if opt in spec.long_args and not eq:
                val = args[i + 1].text if i + 1 < len(args) else ""
                i += 1
            split = val if opt == "split-string" else split
        for j, ch in enumerate(text[1:] if text[1] != "-" else "", start=2):
            if ch in spec.stop:
                return None
            if ch in spec.short_args:
                val = text[j:]
                if not val:
                    val = args[i + 1].text if i + 1 < len(args) else ""
                    i += 1
                split = val if ch == spec.split else split
                break
        i += 1
    return i, changed, split


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """A program that runs the command given in its arguments (sudo, env, timeout ...)."""

    short_args: str = ""  # short options that take a value
    long_args: tuple[str, ...] = ()  # long options that take a value
    positionals: int = 0  # words between the options and the command (timeout's duration)
    assignments: bool = False  # NAME=value words may come before the command
    stop: str = ""  # short options after which no command follows (command -v)
    split: str = ""  # the short option whose value is split into the command (env -S)
    problem: str = ""  # why the wrapped command must be asked about
    always: bool = False  # the problem holds even without options


_WRAPPERS = {
    "sudo": _Wrapper("CDghpRrTtUu", ("user", "group", "host", "prompt", "role", "type", "chdir",
                                      "close-from", "chroot", "command-timeout", "other-user"),
                     assignments=True, stop="elVKv"),
    "doas": _Wrapper("Cu", stop="L"),
    "env": _Wrapper("uCS", ("unset", "chdir", "split-string"), assignments=True, split="S",
                    problem="runs with a changed environment"),
    "command": _Wrapper(stop="vV"),
    "builtin": _Wrapper(),
    "exec": _Wrapper("a"),
    "nohup": _Wrapper(),
    "setsid": _Wrapper(),
    "time": _Wrapper("fo", ("format", "output")),
    "nice": _Wrapper("n", ("adjustment",)),
    "timeout": _Wrapper("ks", ("kill-after", "signal"), positionals=1),
    "stdbuf": _Wrapper("ioe", ("input", "output", "error")),
    "busybox": _Wrapper(),
    "xargs": _Wrapper("aEdILnPs", ("arg-file", "eof", "delimiter", "replace", "max-lines",
                                    "max-args", "max-procs", "max-chars", "process-slot-var"),
                      problem="takes its arguments from its input", always=True),
}


def _shell(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
           problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args = fields[1:]
    i, command_mode = 0, False
    while i < len(args) and not args[i].unresolved:
        text = args[i].text
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
        elif text in ("--", "-"):
            i += 1
            break
        elif text.startswith("--"):
            i += 1
        elif len(text) > 1 and text[0] in "-+":
            command_mode = command_mode or "c" in text[1:]
            i += 1
        else:
            break
    rest = args[i:]
    an.emit(Kind.LAYER, fields, pipes, problems)
    if command_mode and rest:
        an.reparse(rest[0].text, env.child(), pipes, depth, problems)
    elif command_mode:
        an.unknown(_show(fields), pipes)
    elif not rest and stdin is not None:  # bash <<EOF: the here-document is the script
        an.reparse(stdin, env.child(), pipes, depth, problems)
    else:  # a script file, or commands from its input
        an.program(fields, env, pipes, problems, cond)


def _eval(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
          problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    an.emit(Kind.LAYER, fields, pipes, problems)
    args = fields[1:]
    if name == "trap":  # trap 'code' SIGNAL: the code runs later, in this shell
        args = [a for a in args if not a.text.startswith("-")][:1]
        an.program(fields, env, pipes, problems, cond)
    if args:
        an.reparse(" ".join(a.text for a in args), env, pipes, depth, problems)


def _watch(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
           problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args, i, direct = fields[1:], 0, False
    while i < len(args) and args[i].text.startswith("-") and not args[i].unresolved:
        text = args[i].text
        direct = direct or text in ("-x", "--exec") or (text[1:2] != "-" and "x" in text)
        i += 2 if text in ("-n", "-q", "--interval") else 1
    an.emit(Kind.LAYER, fields, pipes, problems)
    if not args[i:]:
        an.program(fields, env, pipes, problems, cond)
    elif direct:
        an.run(args[i:], env.fork(), pipes, depth, problems, None, cond)
    else:  # watch runs its arguments through sh -c
        an.reparse(" ".join(a.text for a in args[i:]), env.child(), pipes, depth, problems)


def _su(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
        problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args, code = fields[1:], None
    for i, a in enumerate(args):
        if a.text in ("-c", "--command") and i + 1 < len(args):
            code = args[i + 1].text
        elif a.text.startswith("--command="):
            code = a.text.split("=", 1)[1]
    an.emit(Kind.LAYER, fields, pipes, problems)
    if code is None:
        an.program(fields, env, pipes, problems, cond)
    else:
        an.reparse(code, env.child(), pipes, depth, (*problems, "runs as another user"))


def _ssh(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
         problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args, i = fields[1:], 0
    while i < len(args) and args[i].text.startswith("-") and not args[i].unresolved:
        text = args[i].text
        i += 2 if len(text) == 2 and text[1] in "BbcDEeFIiJLlmOoPpQRSWw" else 1
    rest = args[i + 1:]
    an.emit(Kind.LAYER, fields, pipes, problems)
    if rest:  # the remote shell runs the rest of the words, joined
        remote, found = env.child(None, same_dir=False), (*problems, "runs on another host")
        an.reparse(" ".join(a.text for a in rest), remote, pipes, depth, found)
    else:
        an.program(fields, env, pipes, problems, cond)


def _find(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: frozenset, depth: int,
          problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    an.program(fields, env, pipes, problems, cond)
    args, i = fields[1:], 0
    while i < len(args):
        if args[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j].text not in (";", "+"):
                j += 1
            if j > i + 1:
                found = (*problems, "runs on files that find picks")
                an.run(args[i + 1:j], env.fork(), pipes, depth, found, None, cond)
            i = j
        i += 1


_SPECIAL = {
    **dict.fromkeys(_SHELLS, _shell),
    "eval": _eval, "trap": _eval, "watch": _watch, "su": _su, "ssh": _ssh, "find": _find,
}


def analyse(text: str, cwd: str | None = None) -> Analysis:
    """Every program a command line may run, with what we could not tell about each."""
    try:
        script = parse(text)
    except ShellParseError as exc:
        logger.debug("unparseable command (%s): %.200r", exc, text)
        analyser = _Analyser(0)
        analyser.loose(text, frozenset())
        return Analysis(tuple(analyser.segments), "", str(exc))
    analyser = _Analyser(script.pipe_count)
    env = _Env(cwd if cwd and cwd.startswith("/") else None)
    analyser.script(script, env, frozenset(), 0, ())
    return Analysis(tuple(analyser.segments), script.canonical)


# -- matching policy patterns against what runs ------------------------------------------------

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
