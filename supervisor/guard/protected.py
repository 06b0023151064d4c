"""Paths no policy file can open up: Switchboard's own files (reads refused, writes refused) and
files whose change alters what agents run (writes asked): Claude Code's settings and hooks, git's
config and hooks, shell start-up files. Also how a Bash word may name such a path."""

from __future__ import annotations

import glob
import os.path
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import islice
from pathlib import Path

from supervisor.guard.shell import normpath

MAX_GLOB = 1000  # files a glob in a Bash word may expand to before we stop looking and ask

# Programs whose arguments are never files they write (a redirection is checked on its own).
READERS = frozenset({
    "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "ls", "echo", "printf", "pwd",
    "basename", "dirname", "realpath", "readlink", "stat", "which", "test", "[", "[[", "true",
    "false", "diff", "cmp", "du",
})
_CLAUDE = "Claude Code settings, hooks, agents and commands there change what agents run"
_GIT = "git's config and hooks there name programs git runs"
_STARTUP = "shell start-up files run in every new shell"
_NAMES = {  # a file name (lower case), wherever it is
    ".claude.json": "Claude Code's configuration names the MCP servers agents start",
    "claude.md": "CLAUDE.md is read by agents as instructions",
    "claude.local.md": "CLAUDE.local.md is read by agents as instructions",
    ".mcp.json": "MCP servers listed there are programs agents start",
    # attributes pick the diff, merge and filter drivers git runs on a file
    ".gitattributes": ".gitattributes chooses the programs git runs on files",
    **dict.fromkeys((".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
                     ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".envrc"), _STARTUP),
}
_DIRS = {  # a directory name (lower case): anything in it, or the name itself
    ".claude": _CLAUDE,
    ".git": _GIT,
    ".ssh": "ssh configuration runs commands (ProxyCommand) and grants logins",
}
_PLACES = (  # absolute places, ~ being the supervisor's user's home
    ("/etc/profile", _STARTUP), ("/etc/profile.d/*", _STARTUP), ("/etc/bash.bashrc", _STARTUP),
    ("/etc/zsh/*", _STARTUP), ("/etc/environment", _STARTUP),
    ("~/.gitconfig", "git configuration names programs git runs"),
    ("~/.config/git/*", "git configuration names programs git runs"),
    ("/etc/gitconfig", "git configuration names programs git runs"),
)
_SPLIT = re.compile(r"[\s'\"`(),;=<>|&!:]+")  # what separates paths in code: open('x', 'w')
_GLOB = re.compile(r"[*?[]")


def _places() -> tuple[tuple[str, str], ...]:
    return tuple((os.path.expanduser(p), why) for p, why in _PLACES)


def write_hazard(path: str) -> str | None:
    """Why writing this absolute path changes what agents run, or None."""
    comps = [c.lower() for c in path.split("/") if c]
    for comp in comps:
        if comp in _DIRS:
            return _DIRS[comp]
    if comps and comps[-1] in _NAMES:
        return _NAMES[comps[-1]]
    return next((why for place, why in _places()
                 if fnmatchcase(path, place) or path == place.removesuffix("/*")), None)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _forms(path: str) -> tuple[str, ...]:
    """The path and, when a symlink leads elsewhere, where it leads."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return (path,)
    return (path,) if real == path else (path, real)


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """Switchboard's own files, as whoever runs the supervisor knows them: home (the data
    directory: database, log, run/, workspaces/), the settings, policy and credentials files,
    and any extra files or directories; None is left out, a file that does not exist yet is
    still protected. The agents' workspaces live under home: a path under the agent's own cwd
    is not Switchboard's when that cwd is inside home/workspaces (the named files always are)."""

    home: Path | str | None = None
    settings: Path | str | None = None
    policy: Path | str | None = None
    credentials: Path | str | None = None  # GOOGLE_APPLICATION_CREDENTIALS
    extra: tuple[Path | str, ...] = ()  # more files or directories (CLAUDE_CONFIG_DIR...)
    _home: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())
    _files: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())
    _shared: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        def forms(p: Path | str | None) -> tuple[str, ...]:
            return () if p is None or str(p) == "" else _forms(normpath(str(p), os.getcwd()))

        object.__setattr__(self, "_home", forms(self.home))
        # home/context, the shared context every agent reads and writes, is theirs, not ours
        # (a link in it to anything else of ours is still ours: its target is checked too).
        object.__setattr__(self, "_shared", tuple(h.rstrip("/") + "/context"
                                                  for h in self._home))
        files = [self.settings, self.policy, self.credentials, *self.extra]
        object.__setattr__(self, "_files", tuple(f for p in files for f in forms(p)))

    def targets(self) -> tuple[str, ...]:
        """Every path of Switchboard's, for matching against a glob."""
        return (*self._home, *self._files)

    @classmethod
    def default(cls) -> ProtectedPaths:
        """What a policy protects when its caller says nothing: the default data directory."""
        return cls(home="~/.switchboard")

    def owns(self, paths: tuple[str, ...], agent_cwd: str | None) -> bool:
        """Whether any of these absolute paths (a path and its symlink target) is Switchboard's."""
        if any(_under(p, f) for p in paths for f in self._files):
            return True
        mine = self.workspace(agent_cwd)
        return any(_under(p, h) and not (mine and _under(p, mine))
                   and not any(_under(p, s) for s in self._shared)
                   for p in paths for h in self._home)

    def holds(self, root: str) -> bool:
        """Whether a directory tree searched from root holds Switchboard's files."""
        return any(_under(p, root) for p in (*self._home, *self._files))

    def workspace(self, agent_cwd: str | None) -> str | None:
        """The agent's own workspace: its cwd, when that is inside home/workspaces."""
        if not agent_cwd or not agent_cwd.startswith("/"):
            return None
        cwd = normpath(agent_cwd)
        for h in self._home:
            spaces = h.rstrip("/") + "/workspaces/"
            if cwd.startswith(spaces) and len(cwd) > len(spaces):
                return cwd
        return None


def literal_root(pattern: str) -> str:
    """The directory a glob pattern starts from: /a/b/*.py -> /a/b, /a/.ss*/x -> /a."""
    m = _GLOB.search(pattern)
    if m is None:
        return pattern
    head = pattern[:m.start()]
    return head if head.endswith("/") else os.path.dirname(head) or "/"


def _probe(pattern: str) -> str | None:
    """A glob may match a protected name whatever exists now: '*.md' matches CLAUDE.md."""
    for comp in (c for c in pattern.split("/") if c):
        if not _GLOB.search(comp):
            continue
        for name, why in (*_DIRS.items(), *_NAMES.items()):
            if name.startswith(".") != comp.startswith("."):
                continue  # bash's * and ? do not match a leading dot
            if fnmatchcase(name, comp.lower()):
                return why
    return None


def _comp_match(a: str, b: str) -> bool:
    if a == "**" or b == "**":
        return True
    if a.startswith(".") != b.startswith("."):
        return False  # bash's * and ? do not match a leading dot
    return fnmatchcase(a, b) or fnmatchcase(b, a)


def may_match(pattern: str, target: str) -> bool:
    """Whether a glob pattern may match the target (itself a path or a glob), or a directory
    above or below it: /root/.ss?/id_rsa may match /root/.ssh/**."""
    pa = [c for c in pattern.split("/") if c]
    ta = [c for c in target.split("/") if c]
    return all(_comp_match(a, b) for a, b in zip(pa, ta, strict=False))


def named_paths(word: str, cwd: str | None) -> Iterator[tuple[str, bool]]:
    """The absolute paths a Bash word may name: the word, pieces of it (--file=x, code in a
    string) and what a glob in it matches now; each with whether it is a glob's pattern."""
    pieces = {word, *(p for p in _SPLIT.split(word) if p)}
    pieces |= {p[2:] for p in pieces if re.match(r"-[A-Za-z].", p)}  # -o<file>
    for piece in pieces:
        text = "~" + piece[len("${HOME}"):] if piece.startswith("${HOME}") else piece
        if not text.startswith(("/", "~")) and cwd is None:
            continue
        try:
            path = normpath(text, cwd)
        except (ValueError, RuntimeError):
            continue
        if not _GLOB.search(text):
            yield from ((f, False) for f in _forms(path))
            continue
        yield path, True
        matches = list(islice(glob.iglob(path), MAX_GLOB + 1))
        if len(matches) > MAX_GLOB:
            yield literal_root(path), False
        yield from ((m, False) for m in matches)


def mentions_hazard(word: str, cwd: str | None) -> tuple[str, str] | None:
    """(what, why) when a Bash word names a file whose change alters what agents run."""
    for piece in {word, *(p for p in _SPLIT.split(word) if p)}:
        if _GLOB.search(piece) and (why := _probe(piece)):
            return piece, why
        if (why := write_hazard("/" + piece.lstrip("/~"))) is not None:
            return piece, why
    for path, pattern in named_paths(word, cwd):
        if not pattern and (why := write_hazard(path)) is not None:
            return path, why
    return None
