"""Programs that run other commands: sudo, env, xargs...; shells, eval, su, ssh, find -exec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.guard.shell.segments import Kind, Pipes, _show

if TYPE_CHECKING:
    from supervisor.guard.shell.analysis import _Analyser
    from supervisor.guard.shell.expand import Field
    from supervisor.guard.shell.state import _Env

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"})


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


def _shell(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
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
    an.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
    if command_mode and rest:
        an.reparse(rest[0].text, env.child(), pipes, depth, problems)
    elif command_mode:
        an.unknown(_show(fields), pipes)
    elif not rest and stdin is not None:  # bash <<EOF: the here-document is the script
        an.reparse(stdin, env.child(), pipes, depth, problems)
    else:  # a script file, or commands from its input
        an.program(fields, env, pipes, problems, cond)


def _eval(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
          problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    an.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
    args = fields[1:]
    if name == "trap":  # trap 'code' SIGNAL: the code runs later, in this shell
        args = [a for a in args if not a.text.startswith("-")][:1]
        an.program(fields, env, pipes, problems, cond)
    if args:
        an.reparse(" ".join(a.text for a in args), env, pipes, depth, problems)


def _watch(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
           problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args, i, direct = fields[1:], 0, False
    while i < len(args) and args[i].text.startswith("-") and not args[i].unresolved:
        text = args[i].text
        direct = direct or text in ("-x", "--exec") or (text[1:2] != "-" and "x" in text)
        i += 2 if text in ("-n", "-q", "--interval") else 1
    an.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
    if not args[i:]:
        an.program(fields, env, pipes, problems, cond)
    elif direct:
        an.run(args[i:], env.fork(), pipes, depth, problems, None, cond)
    else:  # watch runs its arguments through sh -c
        an.reparse(" ".join(a.text for a in args[i:]), env.child(), pipes, depth, problems)


def _su(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
        problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args, code = fields[1:], None
    for i, a in enumerate(args):
        if a.text in ("-c", "--command") and i + 1 < len(args):
            code = args[i + 1].text
        elif a.text.startswith("--command="):
            code = a.text.split("=", 1)[1]
    an.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
    if code is None:
        an.program(fields, env, pipes, problems, cond)
    else:
        an.reparse(code, env.child(), pipes, depth, (*problems, "runs as another user"))


def _ssh(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
         problems: tuple[str, ...], stdin: str | None, cond: bool) -> None:
    args, i = fields[1:], 0
    while i < len(args) and args[i].text.startswith("-") and not args[i].unresolved:
        text = args[i].text
        i += 2 if len(text) == 2 and text[1] in "BbcDEeFIiJLlmOoPpQRSWw" else 1
    rest = args[i + 1:]
    an.emit(Kind.LAYER, fields, pipes, problems, env.cwd)
    if rest:  # the remote shell runs the rest of the words, joined
        remote, found = env.child(None, same_dir=False), (*problems, "runs on another host")
        an.reparse(" ".join(a.text for a in rest), remote, pipes, depth, found)
    else:
        an.program(fields, env, pipes, problems, cond)


def _find(an: _Analyser, name: str, fields: list[Field], env: _Env, pipes: Pipes, depth: int,
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
