"""Follows a parsed line to every program it may run, peeling wrappers and tracking variables."""

from __future__ import annotations

import logging
import os.path
import re
import shlex
from itertools import product

from supervisor.guard.shell.arith import assigned_subscript, builtin_hazards, safe_subscript
from supervisor.guard.shell.expand import MAX_READINGS, Field, _value, expand
from supervisor.guard.shell.parser import parse
from supervisor.guard.shell.risky import git_problems
from supervisor.guard.shell.segments import Analysis, Kind, Pipes, Segment, _basename, _show
from supervisor.guard.shell.state import _DECLARE, _effects, _Env, normpath
from supervisor.guard.shell.syntax import (
    _ASSIGN,
    _NAME,
    Command,
    Script,
    ShellParseError,
    Word,
    _assign_split,
)
from supervisor.guard.shell.wrappers import _SPECIAL, _WRAPPERS, _options, _Wrapper

logger = logging.getLogger(__name__)

MAX_REPARSE = 8  # strings run again as shell code inside one another: bash -c, eval, ssh, watch
MAX_LOOSE = 400  # segments the fallback reader of unparseable text may produce
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_READS = frozenset({"<", "<&"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_SYSTEM_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"}
)


class _Analyser:
    def __init__(self, first_pipe: int) -> None:
        self.segments: list[Segment] = []
        self.next_pipe = first_pipe

    def emit(self, kind: Kind, fields: list[Field], pipes: Pipes,
             problems: tuple[str, ...], cwd: str | None = None) -> None:
        program = _basename(fields[0].text) if fields else ""
        args = tuple(f.text for f in fields[1:])
        self.segments.append(Segment(kind, program, args, _show(fields), pipes, problems,
                                     cwd=cwd))

    def hazard(self, text: str, why: str, pipes: Pipes) -> None:
        """A construct that may run a command we cannot see (arithmetic on a variable...)."""
        self.segments.append(Segment(Kind.UNKNOWN, text=text, pipes=pipes, problems=(why,)))

    def unknown(self, text: str, pipes: Pipes, why: str = "cannot tell what runs") -> None:
        problems = (f"{why}: {text}",)
        self.segments.append(Segment(Kind.UNKNOWN, text=text, pipes=pipes, problems=problems))

    def loose(self, text: str, pipes: Pipes) -> None:
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

    def reparse(self, text: str, env: _Env, pipes: Pipes, depth: int,
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

    def script(self, script: Script, env: _Env, pipes: Pipes, depth: int,
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
        for text, why in script.hazards:
            self.hazard(text, why, pipes)
        if script.hazards:  # ${x:=v}, $((x=1)): any variable may have been set
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

    def command(self, cmd: Command, env: _Env, pipes: Pipes, depth: int,
                problems: tuple[str, ...], looped: dict[str, set[str | None]]) -> None:
        if cmd.kind == "function":
            env.functions.add(cmd.words[0].keyword or "")
            return
        targets = [r.target for r in cmd.redirects if r.target is not None]
        combos = self._combos([*cmd.words, *targets], env, looped, cmd.loop)
        if cmd.kind == "for":
            self._for(cmd, env, combos)
            return
        words = list(cmd.words)
        assigns = self._leading_assigns(words, pipes)
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
            fields: list[Field] = []
            for word in words:
                declared = decl and _assign_split(word) is not None
                fields += expand(word, combo, env.ifs, split=not declared)
            self.run(fields, env, pipes, depth, problems, stdin, cond)

    def _for(self, cmd: Command, env: _Env, combos: list[dict[str, str | None]]) -> None:
        """`for name in words`: the loop variable takes any of the words' values."""
        name = cmd.words[0].keyword or ""
        vals: set[str | None] = set() if len(cmd.words) > 1 else {None}
        for combo in combos:
            for word in cmd.words[2:]:
                fields = expand(word, combo, env.ifs)
                vals.update(None if f.unresolved or f.glob else f.text for f in fields)
        if _NAME.fullmatch(name):
            env.assign(name, vals, cond=True)

    def _leading_assigns(self, words: list[Word],
                         pipes: Pipes) -> list[tuple[str, bool, Word]]:
        """Pops the assignments (NAME=v, NAME[i]=v) that open a simple command off `words`."""
        assigns: list[tuple[str, bool, Word]] = []
        while words:
            if (split := _assign_split(words[0])) is not None:
                assigns.append(split)
            elif (sub := assigned_subscript(words[0])) is not None:
                name, subscript = sub
                if subscript is None or not safe_subscript(subscript):
                    raw = "".join(p.text for p in words[0].parts)
                    self.hazard(raw, f"array subscript in {raw[:80]} is arithmetic: it can run "
                                     "commands hidden in variables", pipes)
                assigns.append((name, True, Word(())))  # an element: the value is not known
            else:
                break
            words.pop(0)
        return assigns

    def _writes(self, cmd: Command, combos: list[dict[str, str | None]], env: _Env,
                pipes: Pipes) -> None:
        """Files the command's redirections write or read (and sockets they open), as one
        segment."""
        paths: list[str] = []
        reads: list[str] = []
        problems: list[str] = []
        for r in cmd.redirects:
            if r.target is None:
                continue
            for combo in combos:
                for f in expand(r.target, combo, env.ifs):
                    dup = r.op in (">&", "<&") and (f.text == "-" or f.text.isdigit())  # 2>&1
                    verb = "writes" if r.op in _WRITES else "reads"
                    if f.text.startswith(("/dev/tcp/", "/dev/udp/")):  # bash opens a socket
                        problems.append(f"opens a network connection: {f.text}")
                    elif (r.op not in _WRITES and r.op not in _READS) or dup:
                        continue
                    elif f.unresolved or f.glob:
                        problems.append(f"cannot tell what it {verb}: {f.text}")
                    elif f.text in _HARMLESS_TARGETS or f.text.startswith("/dev/fd/"):
                        continue
                    elif not f.text.startswith(("/", "~")) and env.cwd is None:
                        problems.append(f"cannot tell what it {verb}: {f.text} (unknown cwd)")
                    else:
                        path = normpath(f.text, env.cwd)
                        (paths if r.op in _WRITES else reads).append(path)
                        if r.op == "<>":
                            reads.append(path)
        if paths or reads or problems:
            text = " ".join([*(f"> {p}" for p in paths), *(f"< {p}" for p in reads)])
            self.segments.append(Segment(Kind.WRITE, text=text or problems[0], pipes=pipes,
                                         problems=tuple(problems), writes=tuple(paths),
                                         reads=tuple(reads)))

    def run(self, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
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

    def unwrap(self, spec: _Wrapper, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
               problems: tuple[str, ...], stdin: str | None,
               cond: bool) -> tuple[list[Field], tuple[str, ...]] | None:
        """The wrapped command's fields and problems, or None when nothing more runs."""
        args = fields[1:]
        options = _options(spec, args)
        if options is None:  # an option that means no command follows (command -v, sudo -l)
            self.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
            self.program(fields, env, pipes, problems, cond)
            return None
        i, changed, split = options
        i += spec.positionals
        names: list[str] = []
        while spec.assignments and i < len(args) and (m := _ASSIGN.match(args[i].text)):
            names.append(m.group(1))
            i += 1
        rest = args[i:]
        if split is not None:
            try:
                rest = [Field(w) for w in shlex.split(split)] + rest
            except ValueError:
                rest = [Field(split, unresolved=True), *rest]
        self.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
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

    def program(self, fields: list[Field], env: _Env, pipes: Pipes,
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
        if name == "git":
            found += git_problems([a.text for a in args])
        for why in builtin_hazards(name, args):
            self.hazard(_show(fields), why, pipes)
        self.emit(Kind.RUN, fields, pipes, tuple(found), env.cwd)
        _effects(name, args, env, cond)


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
