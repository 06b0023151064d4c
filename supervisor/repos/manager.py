"""Repositories and agents' worktrees: registering bare repositories, a worktree per agent on
its own branch, what the sandbox shows of them, commits noticed at turn end and told to
siblings, diffs, merges, and the GC that removes dead agents' worktrees without losing work.

Git runs in threads (asyncio.to_thread), one operation at a time per repository (its lock). A
worktree is recorded as in use ('creating', and in `_in_use`) before it is created, so a GC
running during a spawn never takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from store.errors import StoreError
from store.repos import ACTIVE, CREATING, ArchiveRow, RepoRow, WorktreeRow
from supervisor.errors import InvalidRequest, RepoFailed, SupervisorError, UnknownRepo
from supervisor.events import AgentState, TurnFinished
from supervisor.redact import SECRETS
from supervisor.repos import git
from supervisor.repos.awareness import Awareness
from supervisor.repos.git import Credentials, GitFailed, Tree
from supervisor.repos.siblings import Siblings

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.fleet import FleetReader
    from supervisor.bus.core import Bus
    from supervisor.clock import Clock
    from supervisor.config import Settings
    from supervisor.events import EventHub
    from supervisor.guard.escalations import Escalations
    from supervisor.process.sandbox import Isolation

logger = logging.getLogger(__name__)
T = TypeVar("T")

REPO_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
BRANCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,199}$")


@dataclass(frozen=True, slots=True)
class Wall:
    """What an agent's sandbox adds for its worktree: mounts (source, target, writable) and
    environment."""

    binds: tuple[tuple[Path, Path, bool], ...]
    env: dict[str, str]


@dataclass(frozen=True, slots=True)
class GcReport:
    removed: tuple[str, ...]  # agent names whose worktrees went
    archived: tuple[tuple[str, str], ...]  # (agent name, archive branch)
    kept: tuple[str, ...]  # in use, or could not be archived (never removed then)


def _url_has_credentials(url: str) -> bool:
    """A URL with a user:password (or a token as the user) in it. Its secret part is added to
    the redactor at once: the refused command is still audited, and must not carry it."""
    m = re.match(r"^[a-z][a-z0-9+.-]*://([^/@]+)@", url, re.I)
    if m is None or url.startswith("ssh://git@"):
        return False
    SECRETS.add(*(p for p in m.group(1).split(":") if len(p) >= 4), m.group(1))
    return True


def _local_source(source: str) -> str:
    local = Path(source).expanduser()
    if not local.exists():
        raise InvalidRequest(f"{source} is neither a URL nor an existing directory")
    return str(local.resolve())


class Repos(Awareness):
    """The repositories of one supervisor. Built by the pool, started after its agents.
    `isolation` is the host's sandbox as the pool probed it at its start (None before)."""

    def __init__(self, settings: Settings, store: Store, hub: EventHub, fleet: FleetReader,
                 bus: Bus, escalations: Escalations, isolation: Callable[[], Isolation | None],
                 clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self._hub = hub
        self._fleet = fleet
        self._bus = bus
        self._escalations = escalations
        self._isolation = isolation
        self._clock = clock
        self.git = git.Git(settings.run_dir)
        self._locks: dict[str, asyncio.Lock] = {}
        self._in_use: set[str] = set()  # agent ids whose worktree a spawn is making
        self._trees: dict[str, tuple[str, Tree]] = {}  # agent id -> (repo, its tree)
        self._heads: dict[str, str] = {}  # agent id -> branch head last seen
        self.siblings = Siblings()
        self._tasks: list[asyncio.Task[None]] = []
        self._gc_soon = asyncio.Event()
        self._gc_why = "timer"
        self._loaded = False
        self.gc_runs = 0

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def creds(self) -> Credentials:
        s = self.settings
        creds = Credentials(s.repo_token.value if s.repo_token else None, s.repo_token_user,
                            s.repo_ssh_key)
        for value in creds.env().values():
            if value.startswith("Authorization: "):  # the token, encoded: a secret too
                SECRETS.add(value.split()[-1])
        return creds

    def lock(self, repo: str) -> asyncio.Lock:
        return self._locks.setdefault(repo, asyncio.Lock())

    async def _git(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, self.git, *args)
        except GitFailed as exc:
            raise RepoFailed(exc.what, exc.detail) from exc

    async def repo(self, name: str) -> RepoRow:
        row = await self.store.repos.get(name)
        if row is None:
            raise UnknownRepo(name)
        return row

    def tree_of(self, agent_id: str) -> Tree | None:
        entry = self._trees.get(agent_id)
        return entry[1] if entry else None

    def repo_of(self, agent_id: str) -> str | None:
        entry = self._trees.get(agent_id)
        return entry[0] if entry else None

    def _tree(self, wt: WorktreeRow) -> Tree:
        repo_path = self.settings.repos_dir / f"{wt.repo}.git"
        private = self._private_dir(wt.agent_id) if wt.private else None
        return Tree(repo_path, Path(wt.path), Path(wt.admin) if wt.admin else
                    repo_path / "worktrees" / Path(wt.path).name, wt.branch, private)

    def _private_dir(self, agent_id: str) -> Path:
        return self.settings.agents_dir.resolve() / agent_id / "git"

    # -- lifecycle ------------------------------------------------------------------------------

    async def load(self) -> None:
        """The recorded worktrees, before any agent's loop runs: a recovered agent's first
        turn needs its sandbox's view of the repository (wall) and its intend tool."""
        for wt in await self.store.repos.worktrees():
            if wt.state == ACTIVE:
                self._trees[wt.agent_id] = (wt.repo, self._tree(wt))
                if wt.head:
                    self._heads[wt.agent_id] = wt.head
        self._loaded = True

    async def start(self) -> GcReport:
        """Collect dead agents' worktrees, and start the GC timer and the watcher of turn
        ends."""
        if not self._loaded:
            await self.load()
        report = await self.gc("start")
        self._tasks = [asyncio.create_task(self._gc_loop(), name="repos:gc"),
                       asyncio.create_task(self._watch_turns(), name="repos:turns")]
        return report

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def gc_soon(self, why: str = "kill") -> None:
        """After a kill or a removal: a GC pass now, in the GC task."""
        self._gc_why = why
        self._gc_soon.set()

    async def _gc_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.repo_gc_interval_s):
                    await self._gc_soon.wait()
            self._gc_soon.clear()
            why, self._gc_why = self._gc_why, "timer"
            try:
                await self.gc(why)
            except (SupervisorError, StoreError, OSError):
                logger.exception("worktree gc failed")

    async def _watch_turns(self) -> None:
        with self._hub.subscription(TurnFinished) as events:
            while True:
                ev = await events.get()
                if isinstance(ev, TurnFinished) and ev.agent_id:
                    try:
                        await self.turn_ended(ev.agent_id)
                    except (SupervisorError, StoreError, OSError):
                        logger.exception("turn-end repository check failed agent=%s",
                                         ev.agent_id)

    # -- repositories ---------------------------------------------------------------------------

    async def add(self, name: str, source: str) -> RepoRow:
        if not REPO_NAME_RE.match(name):
            raise InvalidRequest(f"{name!r} is not a valid repository name: a letter, then "
                                 "letters, digits, '.', '_' or '-', at most 40 characters")
        if await self.store.repos.get(name) is not None:
            raise InvalidRequest(f"a repository named {name!r} exists; /repo remove {name} "
                                 "first, or pick another name")
        if _url_has_credentials(source):
            raise InvalidRequest("the URL carries credentials; give the URL without them and "
                                 "set repo_token (or repo_ssh_key) in the settings instead")
        if "://" not in source and not re.match(r"^[\w.-]+@[\w.-]+:", source):
            source = _local_source(source)
        path = self.settings.repos_dir / f"{name}.git"
        async with self.lock(name):
            if path.exists():  # noqa: ASYNC240 - one stat
                await asyncio.to_thread(shutil.rmtree, path, True)  # left by a failed add
            try:
                branch = await self._git(git.clone_bare, source, path, self.creds)
            except RepoFailed:
                await asyncio.to_thread(shutil.rmtree, path, True)
                raise
            return await self.store.repos.add(name, source, str(path), branch)

    async def listing(self) -> list[tuple[RepoRow, list[WorktreeRow]]]:
        return [(r, await self.store.repos.worktrees(r.name))
                for r in await self.store.repos.all()]

    async def remove(self, name: str) -> RepoRow:
        row = await self.repo(name)
        async with self.lock(name):
            busy = [w.agent_name for w in await self.store.repos.worktrees(name)]
            if busy:
                raise InvalidRequest(f"agents still have worktrees on {name}: "
                                     f"{', '.join(busy)}; kill them first (GC archives their "
                                     "work and removes the worktrees; /repo gc does it now), "
                                     "then remove the repository")
            await self.store.repos.remove(name)
            await asyncio.to_thread(shutil.rmtree, row.path, True)
        return row

    async def fetch(self, name: str) -> list[str]:
        row = await self.repo(name)
        async with self.lock(name):
            moved = await self._git(git.fetch, Path(row.path), self.creds)
            branch = await self._git(git.default_branch, Path(row.path))
            await self.store.repos.fetched(name, branch)
        return moved

    async def archives(self, name: str | None = None) -> list[ArchiveRow]:
        if name is not None:
            await self.repo(name)
        return await self.store.repos.archives(name)

    # -- worktrees for spawns -------------------------------------------------------------------

    async def spawn(self, name: str, repo: str, base: str | None, agent_id: str,
                    start: Callable[[], Awaitable[Any]]) -> Any:
        """Make the agent's worktree, then `start` the agent in it; undone if it is refused."""
        row = await self.repo(repo)
        base = base or row.default_branch
        if not BRANCH_RE.match(base) or ".." in base:
            raise InvalidRequest(f"{base!r} is not a branch name")
        bare = Path(row.path)
        branch = f"{git.AGENT_PREFIX}{name}"
        path = (self.settings.workspaces / f"{name}-{agent_id}").resolve()
        iso = self._isolation()
        private = self._private_dir(agent_id) if iso is not None and iso.ok else None
        self._in_use.add(agent_id)
        try:
            async with self.lock(repo):
                base_sha = await self._git(git.rev, bare, f"refs/heads/{base}")
                if base_sha is None:
                    raise InvalidRequest(f"repository {repo} has no branch {base!r}")
                if await self._git(git.rev, bare, f"refs/heads/{branch}") is not None:
                    branch = f"{branch}-{agent_id}"  # a stopped namesake still holds the name
                await self.store.repos.claim(agent_id=agent_id, agent_name=name, repo=repo,
                                             path=str(path), branch=branch, base=base)
                try:
                    tree = await self._git(git.add_worktree, bare, path, branch, base_sha,
                                           private)
                    await asyncio.to_thread(self._hand_over, tree)
                except BaseException:
                    await self.store.repos.removed(agent_id)
                    raise
                await self.store.repos.activate(agent_id, admin=str(tree.admin), head=base_sha,
                                                private=private is not None)
                self._trees[agent_id] = (repo, tree)
                self._heads[agent_id] = base_sha
            try:
                return await start()
            except BaseException:
                await self._undo(repo, agent_id, tree)
                raise
        finally:
            self._in_use.discard(agent_id)

    async def _undo(self, repo: str, agent_id: str, tree: Tree) -> None:
        async with self.lock(repo):
            self._trees.pop(agent_id, None)
            self._heads.pop(agent_id, None)
            with contextlib.suppress(RepoFailed):
                await self._git(git.remove_worktree, tree)
            await self.store.repos.removed(agent_id)

    def _hand_over(self, tree: Tree) -> None:
        """Root: the agent uid must write its worktree, its administrative directory and its
        private store (the worktree itself is handed over by the sandbox's prepare)."""
        iso = self._isolation()
        if iso is None or not iso.ok or iso.uid is None or iso.gid is None:
            return
        tops = [tree.admin]
        if tree.private is not None:
            tops += [tree.private / "refs" / "heads" / "agent", tree.private / "objects"]
        for top in tops:
            for base, dirs, files in os.walk(top):
                if Path(base) == tree.bare / "objects" or base.endswith("/objects"):
                    dirs[:] = [d for d in dirs if d != "info"]  # read-only to the agent
                for n in (*dirs, *files):
                    os.chown(os.path.join(base, n), iso.uid, iso.gid, follow_symlinks=False)
            os.chown(top, iso.uid, iso.gid, follow_symlinks=False)

    def wall(self, agent_id: str) -> Wall | None:
        """The sandbox's view of the agent's repository: the bare repository read-only, its
        own administrative directory writable, its own branch ref and objects in its private
        store (see docs/repositories.md)."""
        entry = self._trees.get(agent_id)
        if entry is None:
            return None
        _, tree = entry
        env = {"GIT_AUTHOR_NAME": self._name(agent_id), "GIT_COMMITTER_NAME": self._name(agent_id),
               "GIT_AUTHOR_EMAIL": f"{self._name(agent_id)}@switchboard.local",
               "GIT_COMMITTER_EMAIL": f"{self._name(agent_id)}@switchboard.local",
               **git.config_env([("safe.directory", "*")])}
        if tree.private is None:
            return Wall((), env)
        env["GIT_OBJECT_DIRECTORY"] = str(tree.private / "objects")
        objects = tree.private / "objects"
        return Wall((
            (tree.bare, tree.bare, False),
            (tree.admin, tree.admin, True),
            (tree.private / "refs" / "heads" / "agent", tree.bare / "refs" / "heads" / "agent",
             True),
            (objects, objects, True),
            (objects / "info", objects / "info", False),  # its alternates: ours to name
        ), env)

    def _name(self, agent_id: str) -> str:
        r = self._fleet.find(agent_id)
        return r.name if r is not None else agent_id

    # -- diff and merge ---------------------------------------------------------------------------

    async def _agent_tree(self, agent_id: str) -> tuple[WorktreeRow, Tree]:
        wt = await self.store.repos.worktree(agent_id)
        if wt is None or wt.state != ACTIVE:
            raise InvalidRequest("that agent has no worktree (spawn it with --repo)")
        entry = self._trees.get(agent_id)
        return wt, entry[1] if entry else self._tree(wt)

    async def diff(self, agent_id: str) -> tuple[WorktreeRow, str, str, list[str]]:
        wt, tree = await self._agent_tree(agent_id)
        async with self.lock(wt.repo):
            head = await self._git(git.sync, tree)
            base = await self._git(git.rev, tree.bare, f"refs/heads/{wt.base}")
            if head is None or base is None:
                raise RepoFailed(f"branch {wt.branch} or {wt.base} is missing")
            stat, full, dirty = await self._git(git.diff, tree, base, head)
        return wt, stat, full, dirty

    async def merge(self, agent_id: str) -> tuple[WorktreeRow, git.Merged]:
        wt, tree = await self._agent_tree(agent_id)
        async with self.lock(wt.repo):
            await self._git(git.sync, tree)
            result = await self._git(git.merge, tree.bare, wt.base, wt.branch,
                                     self.settings.repo_merge)
        if result.kind == "conflict":
            paths = "\n".join(result.conflicts)
            await self._escalations.notify(
                agent_id, f"Merge conflict: {wt.branch} into {wt.base} ({wt.repo})",
                f"{len(result.conflicts)} path(s) conflict; nothing was changed:\n{paths}",
                detail=paths, detail_name="conflicts.txt")
        return wt, result

    # -- GC ---------------------------------------------------------------------------------------

    def in_use(self, agent_id: str) -> bool:
        """A spawn is making it, or its agent exists and was not killed."""
        if agent_id in self._in_use:
            return True
        r = self._fleet.find(agent_id)
        return r is not None and r.state != AgentState.KILLED

    async def gc(self, why: str = "timer") -> GcReport:
        removed: list[str] = []
        archived: list[tuple[str, str]] = []
        kept: list[str] = []
        for repo in await self.store.repos.all():
            async with self.lock(repo.name):
                for wt in await self.store.repos.worktrees(repo.name):
                    if self.in_use(wt.agent_id):
                        continue
                    try:
                        ref = await self._collect(wt)
                    except (RepoFailed, OSError) as exc:
                        logger.warning("worktree kept: could not archive agent=%s: %s",
                                       wt.agent_id, exc)
                        kept.append(wt.agent_name)
                        continue
                    removed.append(wt.agent_name)
                    if ref:
                        archived.append((wt.agent_name, ref))
        self.gc_runs += 1
        if removed:
            logger.info("worktree gc why=%s removed=%d archived=%d", why, len(removed),
                        len(archived))
        return GcReport(tuple(removed), tuple(archived), tuple(kept))

    async def _collect(self, wt: WorktreeRow) -> str | None:
        """Archive what is not safe elsewhere (uncommitted changes, unmerged commits), then
        remove. Called under the repository's lock. Nothing is removed unless archived."""
        tree = self._trees.get(wt.agent_id, (wt.repo, self._tree(wt)))[1]
        ref: str | None = None
        if wt.state == ACTIVE and tree.path.exists():
            ref = await self._archive(wt, tree)
        elif wt.state == CREATING and tree.path.exists():
            ref = await self._archive(wt, tree)  # a spawn that died half way: same care
        await self._git(git.remove_worktree, tree)
        await self.store.repos.removed(wt.agent_id)
        self._trees.pop(wt.agent_id, None)
        self._heads.pop(wt.agent_id, None)
        self.siblings.forget(wt.agent_id)
        return ref

    async def _archive(self, wt: WorktreeRow, tree: Tree) -> str | None:
        head = await self._git(git.sync, tree)
        if head is None:
            return None
        base = await self._git(git.rev, tree.bare, f"refs/heads/{wt.base}")
        snap = await self._git(git.snapshot, tree, head)
        if snap == head and base is not None and await self._git(git.is_ancestor, tree.bare,
                                                                  head, base):
            return None  # nothing uncommitted, nothing unmerged
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock.now()))
        ref = f"{git.ARCHIVE_PREFIX}{wt.agent_name}/{stamp}"
        if await self._git(git.rev, tree.bare, f"refs/heads/{ref}") is not None:
            ref = f"{ref}-{wt.agent_id}"
        await self._git(git.keep, tree.bare, ref, snap)
        reason = "uncommitted changes" if snap != head else "unmerged commits"
        await self.store.repos.add_archive(ArchiveRow(ref, wt.repo, wt.agent_id, wt.agent_name,
                                                      snap, reason, self._clock.now()))
        return ref
