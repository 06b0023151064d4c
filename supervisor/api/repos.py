"""The repositories part of the supervisor's API (SupervisorAPI.repos): registering bare
repositories, spawning agents into worktrees, diffs, merges, archives, GC. Frozen views out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.api.views import Actor, AgentView, agent_view
from supervisor.errors import AgentExists, InvalidRequest
from supervisor.names import check_names, new_agent_id
from supervisor.redact import SECRETS
from supervisor.sanitize import clean_text
from supervisor.schedule.standing import charter_text

if TYPE_CHECKING:
    from pathlib import Path

    from supervisor.agents.pool import AgentPool
    from supervisor.agents.runner import AgentRunner
    from supervisor.repos import Repos


@dataclass(frozen=True, slots=True)
class WorktreeView:
    agent_id: str
    agent_name: str
    repo: str
    path: str
    branch: str
    base: str
    head: str | None
    state: str


@dataclass(frozen=True, slots=True)
class RepoView:
    name: str
    url: str
    default_branch: str
    created_at: float
    fetched_at: float | None
    worktrees: tuple[WorktreeView, ...] = ()


@dataclass(frozen=True, slots=True)
class ArchiveView:
    ref: str
    repo: str
    agent_name: str
    commit: str
    reason: str
    created_at: float


@dataclass(frozen=True, slots=True)
class DiffView:
    worktree: WorktreeView
    summary: str  # git diff --stat of the branch against its base
    diff: str  # the whole diff
    uncommitted: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MergeView:
    worktree: WorktreeView
    kind: str  # "up to date", "fast-forward", "merge commit", "conflict"
    commit: str | None
    conflicts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GcView:
    removed: tuple[str, ...]
    archived: tuple[tuple[str, str], ...]
    kept: tuple[str, ...]


def _wt(w: object) -> WorktreeView:
    return WorktreeView(w.agent_id, w.agent_name, w.repo, w.path, w.branch,  # type: ignore[attr-defined]
                        w.base, w.head, w.state)  # type: ignore[attr-defined]


class RepoAPI:
    """Over the pool and its repositories; `not_halted` is the API's kill-switch guard and
    `charter_refused` its check of a charter file against the policy."""

    def __init__(self, pool: AgentPool, not_halted: Callable[[], None],
                 charter_refused: Callable[[Path], str | None]) -> None:
        self._pool = pool
        self._repos: Repos = pool.repos
        self._not_halted = not_halted
        self._charter_refused = charter_refused

    async def add(self, name: str, source: str, *, by: Actor) -> RepoView:
        """Register a repository: a bare clone in the data directory (its remote's
        credentials come from the settings, never from the URL)."""
        self._not_halted()
        row = await self._repos.add(clean_text(name).strip(), clean_text(source).strip())
        return RepoView(row.name, row.url, row.default_branch, row.created_at, row.fetched_at)

    async def list(self) -> tuple[RepoView, ...]:
        return tuple(RepoView(r.name, r.url, r.default_branch, r.created_at, r.fetched_at,
                              tuple(_wt(w) for w in wts))
                     for r, wts in await self._repos.listing())

    async def remove(self, name: str, *, by: Actor) -> RepoView:
        row = await self._repos.remove(name.strip())
        return RepoView(row.name, row.url, row.default_branch, row.created_at, row.fetched_at)

    async def fetch(self, name: str, *, by: Actor) -> tuple[str, ...]:
        """Fetch the remote; returns the branches that moved (fast-forwards only)."""
        self._not_halted()
        return tuple(await self._repos.fetch(name.strip()))

    async def archives(self, name: str | None = None) -> tuple[ArchiveView, ...]:
        return tuple(ArchiveView(a.ref, a.repo, a.agent_name, a.commit_sha, a.reason,
                                 a.created_at) for a in await self._repos.archives(name))

    async def spawn(self, name: str, prompt: str, *, repo: str, base: str | None = None,
                    by: Actor, model: str | None = None, parent: str | None = None,
                    permission_mode: str | None = None, project_settings: bool = False,
                    role: str | None = None,
                    charter: str | None = None) -> tuple[AgentView, WorktreeView]:
        """An agent in a new worktree of `repo` on branch agent/<name> from `base` (the
        repository's default branch); the worktree is removed if the spawn is refused."""
        self._not_halted()
        name, prompt = clean_text(name), clean_text(prompt)
        pool = self._pool
        pool.require_running()
        if not prompt.strip():
            raise InvalidRequest("the prompt is empty: say what the agent should do")
        check_names(name, role)
        if await pool.store.agents.live_name_taken(name):
            raise AgentExists(name)
        text = None if charter is None else charter_text(
            clean_text(charter), refused=self._charter_refused, redact=SECRETS)
        agent_id = new_agent_id()

        async def start() -> AgentRunner:
            return await pool.spawn(name, prompt, model=model, parent=parent,
                                    permission_mode=permission_mode,
                                    project_settings=project_settings, by=by.id, role=role,
                                    charter=text, agent_id=agent_id)

        runner = await self._repos.spawn(name, repo.strip(), base, agent_id, start)
        wt = await pool.store.repos.worktree(agent_id)
        return agent_view(runner), _wt(wt)

    async def _agent(self, ref: str) -> str:
        return (await self._pool.fleet.get(ref)).id

    async def diff(self, ref: str) -> DiffView:
        wt, stat, full, dirty = await self._repos.diff(await self._agent(ref))
        return DiffView(_wt(wt), stat, full, tuple(dirty))

    async def merge(self, ref: str, *, by: Actor) -> MergeView:
        """Merge the agent's branch into its base when clean; a conflict is an escalation
        that lists the paths, and nothing changes."""
        self._not_halted()
        wt, result = await self._repos.merge(await self._agent(ref))
        return MergeView(_wt(wt), result.kind, result.sha, result.conflicts)

    async def gc(self) -> GcView:
        report = await self._repos.gc("operator")
        return GcView(report.removed, report.archived, report.kept)
