"""What a line's commands change for later ones: directory, variables, functions, lookup."""

from __future__ import annotations

import os.path
from dataclasses import dataclass, field

from supervisor.guard.shell.expand import Field, Symbolic
from supervisor.guard.shell.syntax import _ASSIGN, _NAME

MAX_VALUE = 4096  # longer variable values are not tracked (doubling them grows without bound)

_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})
# Builtins that may set any variable: after them no variable's value is known.
_TAINTING = frozenset({"read", "mapfile", "readarray", "getopts", "let", "source", ".", "wait"})
# Builtins that change which program a name runs (aliases, hashed paths, shell options).
_RELINKING = frozenset({"hash", "alias", "enable", "shopt", "set"})


def normpath(path: str, cwd: str | None = None) -> str:
    """An absolute path with '.', '..' and repeated slashes collapsed, resolved against cwd."""
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if not path.startswith("/"):
        path = os.path.join(cwd if cwd and cwd.startswith("/") else "/", path)
    path = os.path.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


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


def _effects(name: str, args: list[Field], env: _Env, cond: bool) -> None:
    """What a builtin changes for the commands after it: directory, variables, lookup."""
    if name in ("cd", "pushd", "popd"):
        _change_dir(name, args, env, cond)
    elif name in _DECLARE:
        _declare(args, env, cond)
    elif name == "unset":
        for a in args:
            if _NAME.fullmatch(a.text):
                env.assign(a.text, {None}, cond)
    elif name in _TAINTING or (name == "printf" and any(a.text.startswith("-v") for a in args)):
        env.tainted = True
    elif name in _RELINKING and f"{name} ran" not in env.changed:
        env.changed += (f"{name} ran",)


def _change_dir(name: str, args: list[Field], env: _Env, cond: bool) -> None:
    """cd, pushd, popd: the new directory, or None when we cannot tell it."""
    targets = [a for a in args if not (a.text.startswith("-") and len(a.text) > 1)]
    if cond or name == "popd" or len(targets) != 1 or targets[0].unresolved or targets[0].glob:
        env.cwd = None
    elif targets[0].text == "-" or not (targets[0].text.startswith(("/", "~")) or env.cwd):
        env.cwd = None
    else:
        env.cwd = normpath(targets[0].text, env.cwd)


def _declare(args: list[Field], env: _Env, cond: bool) -> None:
    """declare, export, local...: the variables they assign (unknown when options change how)."""
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
