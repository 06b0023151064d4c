"""Git for the supervisor, through gitpython: bare repositories, worktrees, an agent's private
store, merges, archives. Every function here blocks; callers run them in a thread.

Git run by Switchboard never trusts what an agent can write: the worktree's `.git` file, its
administrative directory's `commondir`, its index and HEAD. Every command on a worktree names the
directories itself (GIT_DIR, GIT_COMMON_DIR, GIT_WORK_TREE), reads no system or user config (a
config file of ours instead), runs no hooks, fsmonitor or pager.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import git as gitpython

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
AGENT_PREFIX = "agent/"
ARCHIVE_PREFIX = "archive/"
# Written once into the run directory: the only "global" config our git reads.
SUPERVISOR_GITCONFIG = """\
[safe]
\tdirectory = *
[user]
\tname = Switchboard
\temail = switchboard@localhost
[core]
\thooksPath = /dev/null
\tfsmonitor = false
\tpager = cat
[gc]
\tauto = 0
[advice]
\tdetachedHead = false
"""


class GitFailed(Exception):
    """A git command failed; `detail` is its stderr (never carries a credential: those travel
    in the environment only)."""

    def __init__(self, what: str, detail: str = "") -> None:
        super().__init__(f"{what}: {detail}" if detail else what)
        self.what = what
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Credentials:
    """The operator's remote credentials, as environment for Switchboard's own git only."""

    token: str | None = None
    token_user: str = "x-access-token"
    ssh_key: Path | None = None

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        pairs: list[tuple[str, str]] = []
        if self.token:
            basic = base64.b64encode(f"{self.token_user}:{self.token}".encode()).decode()
            pairs.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        if self.ssh_key is not None:
            out["GIT_SSH_COMMAND"] = (f"ssh -i '{self.ssh_key}' -o IdentitiesOnly=yes "
                                      "-o BatchMode=yes -o StrictHostKeyChecking=accept-new")
        return out | config_env(pairs)


def config_env(pairs: list[tuple[str, str]], start: int = 0) -> dict[str, str]:
    """Config given through the environment (command-line scope): never on an argv."""
    out = {"GIT_CONFIG_COUNT": str(start + len(pairs))} if pairs else {}
    for i, (k, v) in enumerate(pairs, start):
        out[f"GIT_CONFIG_KEY_{i}"] = k
        out[f"GIT_CONFIG_VALUE_{i}"] = v
    return out


class Git:
    """Runs git with our environment. One per data directory."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.config = run_dir / "gitconfig"
        if not self.config.exists() or self.config.read_text() != SUPERVISOR_GITCONFIG:
            self.config.write_text(SUPERVISOR_GITCONFIG)
        self.env = {"GIT_CONFIG_GLOBAL": str(self.config), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false",
                    "SSH_ASKPASS": "/bin/false", "GIT_PAGER": "cat", "LC_ALL": "C"}

    def run(self, *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            ok_codes: tuple[int, ...] = (0,)) -> tuple[int, str]:
        """(exit status, stdout) of `git args`; GitFailed on any other status."""
        full = dict(self.env)
        full.update(env or {})
        cmd = gitpython.Git(str(cwd) if cwd else None)
        try:
            status, out, err = cmd.execute(
                ["git", *args], with_extended_output=True, with_exceptions=False, env=full,
                strip_newline_in_stdout=False)
        except gitpython.GitCommandNotFound as exc:
            raise GitFailed("git is not installed", str(exc)) from exc
        if status not in ok_codes:
            raise GitFailed(f"git {_subcommand(args)} failed (exit {status})",
                            str(err).strip()[-2000:])
        return status, str(out)

    def out(self, *args: str, cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> str:
        return self.run(*args, cwd=cwd, env=env)[1].strip()


def _subcommand(args: tuple[str, ...]) -> str:
    it = iter(args)
    for a in it:
        if a in ("--git-dir", "-C", "-c"):
            next(it, None)
        elif not a.startswith("-"):
            return a
    return ""


# -- bare repositories --------------------------------------------------------------------------


def clone_bare(g: Git, url: str, path: Path, creds: Credentials) -> str:
    """Clone `url` (a remote or a local path) as a bare repository; its default branch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    g.run("clone", "--bare", "--quiet", "--", url, str(path), env=creds.env())
    bare = ["--git-dir", str(path)]
    # Remote branches as remote-tracking refs, so a fetch never moves a branch we merged into.
    g.run(*bare, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    for key, value in (("core.logAllRefUpdates", "false"), ("gc.auto", "0")):
        g.run(*bare, "config", key, value)
    (path / "refs" / "heads" / "agent").mkdir(parents=True, exist_ok=True)
    return default_branch(g, path)


def default_branch(g: Git, bare: Path) -> str:
    _, out = g.run("--git-dir", str(bare), "symbolic-ref", "--quiet", "HEAD", ok_codes=(0, 1))
    ref = out.strip()
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else "main"


def fetch(g: Git, bare: Path, creds: Credentials) -> list[str]:
    """Fetch origin; fast-forward each local branch (not agents' or archives') its remote
    moved ahead of. Returns the branches moved."""
    b = ("--git-dir", str(bare))
    g.run(*b, "fetch", "--quiet", "--prune", "origin", env=creds.env())
    moved = []
    for line in g.out(*b, "for-each-ref", "--format=%(refname:strip=3) %(objectname)",
                      "refs/remotes/origin").splitlines():
        name, _, sha = line.partition(" ")
        if name == "HEAD" or name.startswith((AGENT_PREFIX, ARCHIVE_PREFIX)):
            continue
        local = rev(g, bare, f"refs/heads/{name}")
        if local == sha:
            continue
        if local is None or is_ancestor(g, bare, local, sha):
            g.run(*b, "update-ref", f"refs/heads/{name}", sha, *([local] if local else []))
            moved.append(name)
    return moved


def rev(g: Git, bare: Path, ref: str) -> str | None:
    status, out = g.run("--git-dir", str(bare), "rev-parse", "--verify", "--quiet",
                        f"{ref}^{{commit}}", ok_codes=(0, 1, 128))
    sha = out.strip()
    return sha if status == 0 and SHA_RE.match(sha) else None


def is_ancestor(g: Git, bare: Path, a: str, b: str) -> bool:
    status, _ = g.run("--git-dir", str(bare), "merge-base", "--is-ancestor", a, b,
                      ok_codes=(0, 1))
    return status == 0


def branches(g: Git, bare: Path, prefix: str = "") -> dict[str, str]:
    out = g.out("--git-dir", str(bare), "for-each-ref", "--format=%(refname:strip=2) %(objectname)",
                f"refs/heads/{prefix}")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


# -- worktrees and the agent's private store -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tree:
    """Where one agent's worktree is: enough to run git on it without reading its .git file."""

    bare: Path
    path: Path
    admin: Path  # <bare>/worktrees/<n>
    branch: str
    private: Path | None  # the agent's private store (sandboxed agents), else None

    def env(self, index: Path | None = None) -> dict[str, str]:
        env = {"GIT_DIR": str(self.admin), "GIT_COMMON_DIR": str(self.bare),
               "GIT_WORK_TREE": str(self.path)}
        if self.private is not None:  # the agent's commits not yet taken in: readable
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(self.private / "objects")
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        return env

    @property
    def private_ref(self) -> Path | None:
        return None if self.private is None else self.private / "refs" / "heads" / self.branch


def add_worktree(g: Git, bare: Path, path: Path, branch: str, base_sha: str,
                 private: Path | None) -> Tree:
    """A worktree at `path` on a new branch from `base_sha`; with `private`, the agent's
    private store too (its own objects and its own branch ref: see docs/repositories.md)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    g.run("--git-dir", str(bare), "worktree", "add", "--quiet", "-b", branch, str(path),
          base_sha)
    # Read once, now, while only we have written it.
    text = (path / ".git").read_text().strip()
    admin = Path(text.removeprefix("gitdir:").strip())
    if admin.parent != bare / "worktrees":
        raise GitFailed("git made the worktree somewhere unexpected", text)
    if private is not None:
        _private_store(private, branch, base_sha, bare)
    return Tree(bare, path, admin, branch, private)


def _private_store(private: Path, branch: str, sha: str, bare: Path) -> None:
    """A tiny bare repository: its objects and its refs/heads/agent/ are what the sandbox
    makes writable (objects/info stays read-only: it names the bare repository as the
    alternate); Switchboard fetches the agent's branch from it."""
    (private / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (private / "objects" / "pack").mkdir(parents=True, exist_ok=True)
    _alternates(private, bare)
    ref = private / "refs" / "heads" / branch
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(sha + "\n")
    (private / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
    (private / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")


def sync(g: Git, tree: Tree) -> str | None:
    """Take the agent's commits in: its private branch ref, fetched (objects checked by git)
    into the bare repository. Returns the branch head."""
    real = rev(g, tree.bare, f"refs/heads/{tree.branch}")
    ref = tree.private_ref
    if ref is None or tree.private is None:
        return real
    try:
        wanted = ref.read_text().strip()
    except OSError:
        return real
    if wanted == real or not SHA_RE.match(wanted):
        return real
    # Read-only in the sandbox; written again all the same (an unsandboxed past, a crash).
    _alternates(tree.private, tree.bare)
    g.run("--git-dir", str(tree.bare), "fetch", "--quiet", "--no-tags", "--update-head-ok",
          "--no-write-fetch-head", str(tree.private),
          f"+refs/heads/{tree.branch}:refs/heads/{tree.branch}")
    return rev(g, tree.bare, f"refs/heads/{tree.branch}")


def _alternates(private: Path, bare: Path) -> None:
    info = private / "objects" / "info"
    if info.is_symlink() or not info.is_dir():
        shutil.rmtree(info, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            info.unlink()
        info.mkdir()
    tmp = info / "alternates.new"
    tmp.write_text(str(bare / "objects") + "\n")
    os.replace(tmp, info / "alternates")


def dirty_paths(g: Git, tree: Tree) -> list[str]:
    """Paths with uncommitted changes (untracked files too), relative to the worktree."""
    _, out = g.run("status", "--porcelain=v1", "-z", "--untracked-files=all",
                   "--ignore-submodules=all", "--no-renames", env=tree.env(), cwd=tree.path)
    paths = []
    for entry in out.split("\0"):
        if len(entry) > 3:
            paths.append(entry[3:])
    return paths


def changed_paths(g: Git, bare: Path, old: str, new: str) -> list[str]:
    _, out = g.run("--git-dir", str(bare), "diff", "--name-only", "-z", "--no-renames",
                   f"{old}...{new}")
    return [p for p in out.split("\0") if p]


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    subject: str
    paths: tuple[str, ...]


def new_commits(g: Git, bare: Path, old: str, new: str, limit: int = 20) -> list[Commit]:
    """Commits on `new` not on `old`, newest first, with the paths each touched."""
    _, out = g.run("--git-dir", str(bare), "log", f"--max-count={limit}", "--no-renames",
                   "--format=%x01%H%x02%s", "--name-only", f"{old}..{new}")
    commits = []
    for chunk in out.split("\x01")[1:]:
        head, _, rest = chunk.partition("\n")
        sha, _, subject = head.partition("\x02")
        commits.append(Commit(sha, subject, tuple(p for p in rest.splitlines() if p)))
    return commits


def diff(g: Git, tree: Tree, base_sha: str, head: str) -> tuple[str, str, list[str]]:
    """(stat summary, full diff of the committed work, uncommitted paths)."""
    b = ("--git-dir", str(tree.bare))
    stat = g.out(*b, "diff", "--stat", "--no-color", f"{base_sha}...{head}")
    full = g.run(*b, "diff", "--no-color", "--no-ext-diff", "--no-textconv",
                 f"{base_sha}...{head}")[1]
    return stat, full, dirty_paths(g, tree)


# -- merging ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merged:
    kind: str  # "up to date", "fast-forward", "merge commit", "conflict"
    sha: str | None
    conflicts: tuple[str, ...] = ()


def merge(g: Git, bare: Path, base: str, branch: str, mode: str) -> Merged:
    """Merge `branch` into `base` in the bare repository, or report the conflicting paths and
    change nothing (the trial merge is `git merge-tree --write-tree`: no worktree, no index)."""
    b = ("--git-dir", str(bare))
    base_sha = rev(g, bare, f"refs/heads/{base}")
    head = rev(g, bare, f"refs/heads/{branch}")
    if base_sha is None or head is None:
        raise GitFailed(f"branch {base if base_sha is None else branch} does not exist")
    if is_ancestor(g, bare, head, base_sha):
        return Merged("up to date", base_sha)
    if mode == "ff" and is_ancestor(g, bare, base_sha, head):
        g.run(*b, "update-ref", f"refs/heads/{base}", head, base_sha)
        return Merged("fast-forward", head)
    status, out = g.run(*b, "merge-tree", "--write-tree", "--name-only", "--no-messages",
                        base_sha, head, ok_codes=(0, 1))
    lines = out.split("\n")
    tree = lines[0].strip()
    if status == 1:
        conflicts = tuple(dict.fromkeys(p for p in lines[1:] if p.strip()))
        return Merged("conflict", None, conflicts)
    sha = g.out(*b, "commit-tree", tree, "-p", base_sha, "-p", head, "-m",
                f"Merge branch '{branch}' into {base}")
    g.run(*b, "update-ref", f"refs/heads/{base}", sha, base_sha)
    return Merged("merge commit", sha)


# -- archives and removal ------------------------------------------------------------------------


def snapshot(g: Git, tree: Tree, head: str) -> str:
    """A commit of everything in the worktree (tracked or not, ignored files aside) on top of
    `head`, or `head` itself when nothing is uncommitted. The agent's index is not touched."""
    with tempfile.TemporaryDirectory(prefix="sb-archive-") as tmp:
        index = Path(tmp) / "index"
        env = tree.env(index)
        g.run("read-tree", head, env=env, cwd=tree.path)
        g.run("add", "-A", "--ignore-errors", "--", ".", env=env, cwd=tree.path,
              ok_codes=(0, 1))
        new_tree = g.out("write-tree", env=env, cwd=tree.path)
        if new_tree == g.out("--git-dir", str(tree.bare), "rev-parse", f"{head}^{{tree}}"):
            return head
        return g.out("--git-dir", str(tree.bare), "commit-tree", new_tree, "-p", head, "-m",
                     "Switchboard archive: uncommitted changes", env=tree.env())


def keep(g: Git, bare: Path, ref: str, sha: str) -> None:
    g.run("--git-dir", str(bare), "update-ref", f"refs/heads/{ref}", sha)


def remove_worktree(g: Git, tree: Tree) -> None:
    """The worktree, its administrative directory, its branch and the private store: gone.
    The paths are ours (recorded at creation), not git's `worktree remove`, which would find
    the worktree through files its agent could write."""
    b = ("--git-dir", str(tree.bare))
    shutil.rmtree(tree.path, ignore_errors=True)
    if tree.admin.parent == tree.bare / "worktrees":
        shutil.rmtree(tree.admin, ignore_errors=True)
    g.run(*b, "worktree", "prune")
    g.run(*b, "update-ref", "-d", f"refs/heads/{tree.branch}", ok_codes=(0, 1))
    if tree.private is not None:
        shutil.rmtree(tree.private, ignore_errors=True)
