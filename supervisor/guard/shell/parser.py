"""The bash grammar over the lexer's tokens: lists, pipelines, compound commands; parse()."""

from __future__ import annotations

from supervisor.guard.shell.lexer import _arith_end, _Cmd, _Heredoc, _Lexer, _Shared, _Tok
from supervisor.guard.shell.syntax import Command, Part, Redirect, Script, ShellParseError, Word

_REDIRECTS = frozenset({"<<<", "<<-", "&>>", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "<", ">"})


class _Parser(_Lexer):
    """The grammar: one method per construct, each recording its commands and returning its
    canonical text."""

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
            if tok.text == "(" and self.tok is tok and self.s.startswith("(", self.i):
                end = _arith_end(self.s, self.i + 1)
                if end >= 0:  # (( expr )); bash reads ((a) ) as subshells, and so do we
                    self.take()
                    part = self._arith(self.i + 1, end, "((", "))", False)
                    shown = part.text if part.kind == "opaque" else f"(( {part.text} ))"
                    return self._trailing(shown)
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
            "[[": self._test, "coproc": self._coproc,
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

    def _simple(self, first: _Tok | None = None) -> str:
        start = (first or self.peek()).start
        words: list[Word] = []
        redirects: list[Redirect] = []
        out = []
        if first is not None and first.word is not None:  # already read (coproc's lookahead)
            words.append(first.word)
            out.append(first.text)
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

    def _coproc(self) -> str:
        """coproc [NAME] command: the command runs in the background, talking through pipes."""
        self.take()
        saved = self.cond
        self.cond = True
        tok = self.peek()
        compound = ("{", "(", "if", "while", "until", "for", "select", "case", "[[")
        if tok.kind == "word" and tok.word is not None and not self._is(tok, compound):
            name = self.take()  # a NAME before a compound command, or the simple command's word
            if self._is(self.peek(), compound) and _is_name(name):
                body = f"coproc {name.text} {self._command()}"
            else:
                body = "coproc " + self._simple(name)
        else:
            body = "coproc " + self._command()
        self.cond = saved
        return body

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


def _is_name(tok: _Tok) -> bool:
    return tok.word is not None and tok.word.keyword is not None and tok.word.keyword.isidentifier()


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
    return Script(commands, canon, shared.next_pipe, tuple(dict.fromkeys(shared.hazards)))


def canonical(text: str) -> str:
    """The command line with quoting and whitespace normalised: equal texts run the same."""
    return parse(text).canonical
