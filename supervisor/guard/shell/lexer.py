"""Reads a command line's characters into tokens and words: quoting, expansions, here-docs."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from supervisor.guard.shell.arith import (
    evaluate,
    expansion_hazard,
    harmless,
    param_hazard,
    safe_subscript,
)
from supervisor.guard.shell.syntax import _ASSIGN, _NAME, Part, Redirect, ShellParseError, Word

MAX_NESTING = 40  # parentheses, substitutions and compound commands inside one another

_OPS = (
    "<<<", "<<-", "&>>", ";;&", "&&", "||", "|&", ";;", ";&", "<<", ">>", "<&", ">&", "<>", ">|",
    "&>", ";", "&", "|", "(", ")", "<", ">",
)
_META = frozenset(" \t\n;&|()<>")
_DIGITS = "0123456789"
_BRACED_NAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_HEX = {k: re.compile(f"[0-9A-Fa-f]{{1,{n}}}") for k, n in (("x", 2), ("u", 4), ("U", 8))}
_OCTAL = re.compile("[0-7]{0,2}")
# Characters that mean something to the shell when unquoted; quoted ones are escaped in the
# canonical form so that 'a b' and a\ b read the same and '*' never reads like a glob.
_ESCAPE = frozenset(" \t|&;()<>'\"`$\\*?[]{}~#=,!")
_C_ESCAPES = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
    "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}


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
    # Constructs that may run code hidden in a variable's value ${a[x]}, $((x)), a[x]=1...:
    # (text, why), in the order met.
    hazards: list[tuple[str, str]] = field(default_factory=list)

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


def _close(s: str, i: int, opener: str, closer: str) -> int:
    """Where the closer matching an opener already read sits, skipping quotes; -1 if none."""
    depth, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = s.find("'", i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if c in "\"`":
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            if j >= n:
                return -1
            i = j + 1
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return -1


def _arith_end(s: str, i: int) -> int:
    """After '((' at i: where the closing '))' starts, or -1 when bash reads '( (' instead."""
    j = _close(s, i, "(", ")")
    return j if j >= 0 and s.startswith(")", j + 1) else -1


def _substitution(opener: str, canon: str) -> str:
    # $( (x) ) must never read like the arithmetic $((x)), which runs nothing
    return f"{opener} {canon} )" if canon.startswith("(") else f"{opener}{canon})"


def _chr(code: int) -> str:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return chr(code)


class _Lexer:
    """Tokens and words of one text. $( ), <( ), backquotes and here-documents are parsed where
    they occur: the lexer calls the grammar that parser._Parser adds (_list, _link), and reads
    nested text with a new parser of its own type."""

    def __init__(self, text: str, shared: _Shared, cond: bool = False, loop: bool = False) -> None:
        self.s = text
        self.i = 0
        self.sh = shared
        self.cond = cond
        self.loop = loop
        self.tok: _Tok | None = None
        self.heredocs: list[_Heredoc] = []

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
            elif c in "\\'\"$`":
                flush()
                parts.extend(self._quoting(c))
            else:
                buf.append(c)
                self.i += 1
        flush()
        return Word(_merge(parts))

    def _quoting(self, c: str) -> list[Part]:
        """The parts that a backslash, a quote, $ or ` at self.i opens, outside double quotes."""
        s = self.s
        if c == "\\":
            escaped = s[self.i + 1:self.i + 2]
            self.i += 2
            if escaped == "\n":  # a line continuation: nothing
                return []
            return [Part("lit", escaped or "\\", True)]
        if c == "'":
            start = self.i + 1
            j = s.find("'", start)
            if j < 0:
                raise ShellParseError("unterminated single quote")
            self.i = j + 1
            return [Part("lit", s[start:j], True)]
        if c == '"':
            self.i += 1
            return self._dq('"')
        if c == "$":
            return self._dollar(False)
        return [self._backtick(False)]

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
            end = _arith_end(s, i + 3) if s.startswith("((", i + 1) else -1
            if end >= 0:
                return [self._arith(i + 3, end, "$((", "))", quoted)]
            return [self._subst(i + 2, "$(", quoted)]
        if nxt == "[":  # $[ ]: the old spelling of $(( ))
            end = _close(s, i + 2, "[", "]")
            if end < 0:
                raise ShellParseError("unterminated $[")
            return [self._arith(i + 2, end, "$[", "]", quoted)]
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

    def _arith(self, start: int, end: int, opener: str, closer: str, quoted: bool) -> Part:
        """$(( )), $[ ] or (( )) from start to end: its value when it is only numbers and
        operators; otherwise a hazard, and the $( ) and ` ` inside are read as commands."""
        body = self.s[start:end]
        self.i = end + len(closer)
        self._enter()
        parts = type(self)(body, self.sh, cond=True, loop=self.loop)._dq(None)
        self.sh.depth -= 1
        text = "".join(p.text for p in parts)
        if all(p.kind == "lit" for p in parts) and harmless(text):
            value = evaluate(text)
            if value is not None:
                return Part("lit", str(value), True)
        else:
            self.sh.hazards.append((opener + body + closer,
                                    expansion_hazard(opener, body, closer)))
        return Part("opaque", opener + body + closer, quoted)

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
        return Part("opaque", _substitution(opener, canon), quoted)

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
        canon = type(self)("".join(buf), self.sh, cond=True, loop=self.loop).parse_all()
        self.sh.depth -= 1
        return Part("opaque", _substitution("$(", canon), quoted)

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
        self.sh.hazards.append((s[start:self.i], param_hazard(s[start:self.i])))
        return Part("opaque", s[start:self.i], quoted)

    def _array(self) -> Part:
        self.i += 1
        self._enter()
        canon = []
        while True:
            tok = self._lex()
            if tok.kind == "op" and tok.text == ")":
                break
            if tok.kind == "word" and tok.word is not None:
                canon.append(tok.text)
                self._element(tok.word)
            elif tok.kind != "nl":
                raise ShellParseError("bad array assignment")
        self.sh.depth -= 1
        return Part("opaque", "(" + " ".join(canon) + ")", False)

    def _element(self, word: Word) -> None:
        """a=([i]=v): the subscript is arithmetic (for an indexed array) unless only digits."""
        first = word.parts[0] if word.parts else None
        if first is None or first.kind != "lit" or first.quoted or not first.text.startswith("["):
            return
        raw = "".join(p.text if p.kind != "var" else f"${{{p.text}}}" for p in word.parts)
        end = _close(raw, 1, "[", "]")
        literal = all(p.kind == "lit" for p in word.parts)
        if end < 0 or not literal or not safe_subscript(raw[1:end]):
            shown = raw[:end + 1] if end > 0 else raw
            self.sh.hazards.append((raw, f"array subscript {shown} in an assignment is "
                                         "arithmetic: it can run commands hidden in variables"))

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
                type(self)(body, self.sh, cond=True, loop=self.loop)._dq(None)
                if doc.cmd is not None:  # the owner is complete: link its feeders now
                    self._link(range(first, len(self.sh.cmds)), doc.cmd)

    # -- the grammar, defined by parser._Parser ----------------------------------------------

    def parse_all(self) -> str:
        raise NotImplementedError

    def _list(self, stops: frozenset[str]) -> str:
        raise NotImplementedError

    def _link(self, feeders: range, owner: _Cmd) -> None:
        raise NotImplementedError
