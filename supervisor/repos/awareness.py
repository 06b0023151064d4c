"""Sibling awareness for the repository manager: at each turn end an agent's new commits are
taken in and told, as notices, to the other live agents on its repository, ranked by overlap
with what each is editing (supervisor/repos/siblings.py keeps and ranks them); intentions the
same way. A mixin of supervisor.repos.manager.Repos."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from supervisor.bus.core import SYSTEM_SENDER
from supervisor.errors import InvalidRequest, RepoFailed, SupervisorError
from supervisor.repos import git
from supervisor.repos.siblings import Notice, Siblings, render

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.fleet import FleetReader
    from supervisor.bus.core import Bus
    from supervisor.clock import Clock
    from supervisor.config import Settings
    from supervisor.repos.git import Tree

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

COMMIT_NOTICE_TTL_S = 6 * 3600.0


class Awareness:
    if TYPE_CHECKING:
        _fleet: FleetReader
        _bus: Bus
        _clock: Clock
        store: Store
        settings: Settings
        siblings: Siblings
        _trees: dict[str, tuple[str, Tree]]
        _heads: dict[str, str]

        def lock(self, repo: str) -> asyncio.Lock: ...
        async def _git(self, fn: Callable[..., _T], *args: Any) -> _T: ...
        def repo_of(self, agent_id: str) -> str | None: ...
        def _name(self, agent_id: str) -> str: ...

    # -- turn ends: commits noticed, siblings told ----------------------------------------------

    async def turn_ended(self, agent_id: str) -> list[git.Commit]:
        """Take the agent's commits in; tell its siblings; deliver what waits for it."""
        entry = self._trees.get(agent_id)
        commits: list[git.Commit] = []
        if entry is not None:
            repo, tree = entry
            async with self.lock(repo):
                if agent_id not in self._trees:
                    return []  # GC took it (the agent was killed) while this waited
                head = await self._git(git.sync, tree)
                old = self._heads.get(agent_id)
                if head and old and head != old:
                    commits = await self._git(git.new_commits, tree.bare, old, head)
                    self._heads[agent_id] = head
                    await self.store.repos.set_head(agent_id, head)
            now = self._clock.now()
            for c in reversed(commits):
                await self._announce(repo, Notice(
                    repo, agent_id, self._name(agent_id), c.paths, now,
                    now + COMMIT_NOTICE_TTL_S, sha=c.sha, subject=c.subject))
        await self.deliver(agent_id)
        return commits

    async def working_set(self, agent_id: str) -> tuple[str, ...]:
        """What an agent is editing: uncommitted paths, paths its branch changed, and its
        declared intention."""
        entry = self._trees.get(agent_id)
        if entry is None:
            return ()
        repo, tree = entry
        wt = await self.store.repos.worktree(agent_id)
        paths: list[str] = []
        with contextlib.suppress(RepoFailed):
            paths += await self._git(git.dirty_paths, tree)
            base = await self._git(git.rev, tree.bare, f"refs/heads/{wt.base}") if wt else None
            head = self._heads.get(agent_id)
            if base and head and base != head:
                paths += await self._git(git.changed_paths, tree.bare, base, head)
        paths += self.siblings.intents(agent_id, self._clock.now())
        return tuple(dict.fromkeys(paths))

    def _live_siblings(self, repo: str, agent_id: str) -> list[str]:
        out = []
        for other, (r, _) in self._trees.items():
            runner = self._fleet.find(other)
            if other != agent_id and r == repo and runner is not None and runner.state.live:
                out.append(other)
        return out

    async def _announce(self, repo: str, notice: Notice, *, push: bool = False) -> None:
        for other in self._live_siblings(repo, notice.agent_id):
            score = self.siblings.hold(other, notice, await self.working_set(other))
            runner = self._fleet.find(other)
            if score and runner is not None and not runner.busy:
                await self.deliver(other)  # idle: it hears now (its next turn)
            elif score and push and runner is not None:
                await self.deliver(other, kind="interrupt")

    async def deliver(self, agent_id: str, kind: str = "info") -> bool:
        """What waits for `agent_id`, if any of it touches its work: one bus message."""
        runner = self._fleet.find(agent_id)
        repo = self.repo_of(agent_id)
        if runner is None or not runner.state.live or repo is None:
            return False
        items = self.siblings.take(agent_id, self._clock.now())
        if not items:
            return False
        try:
            await self._bus.send(SYSTEM_SENDER, runner.name, kind, render(repo, items),
                                      agent_id=agent_id)
        except SupervisorError as exc:
            logger.warning("sibling notice not sent agent=%s: %s", agent_id, exc)
            return False
        return True

    async def intend(self, agent_id: str, paths: list[str], note: str,
                     ttl_s: float | None) -> str:
        repo = self.repo_of(agent_id)
        if repo is None:
            raise InvalidRequest("you have no repository worktree: intend is for agents "
                                 "spawned with --repo")
        clean = tuple(dict.fromkeys(p.strip().lstrip("./") for p in paths if p.strip()))[:50]
        if not clean:
            raise InvalidRequest("name at least one path")
        now = self._clock.now()
        ttl = min(ttl_s or self.settings.repo_intent_ttl_s, 24 * 3600.0)
        notice = Notice(repo, agent_id, self._name(agent_id), clean, now, now + ttl,
                        note=note.strip()[:500])
        self.siblings.intend(notice)
        await self._announce(repo, notice, push=self.settings.repo_push_intentions)
        return (f"Declared: you intend to change {', '.join(clean)} for {ttl / 60:.0f} minutes."
                " Siblings whose work overlaps hear of it.")
