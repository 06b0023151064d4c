"""Repository for registered git repositories, agents' worktrees and GC's archive branches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.clock import Now, system_now
from store.db import AnyDatabase

# A worktree's record: 'creating' before the worktree exists (a spawn holds it), 'active' while
# it exists, 'removed' once Switchboard removed it.
CREATING, ACTIVE, REMOVED = "creating", "active", "removed"


@dataclass(frozen=True, slots=True)
class RepoRow:
    name: str
    url: str
    path: str
    default_branch: str
    created_at: float
    fetched_at: float | None


@dataclass(frozen=True, slots=True)
class WorktreeRow:
    agent_id: str
    agent_name: str
    repo: str
    path: str
    admin: str  # the worktree's administrative directory inside the bare repository
    branch: str
    base: str
    head: str | None  # the branch head Switchboard last saw (at creation, then each turn end)
    private: bool  # whether the agent's git writes go to its private store (sandboxed)
    state: str
    created_at: float
    removed_at: float | None

    @classmethod
    def of(cls, row: Any) -> WorktreeRow:
        d = dict(row)
        d["private"] = bool(d["private"])
        return cls(**d)


@dataclass(frozen=True, slots=True)
class ArchiveRow:
    ref: str
    repo: str
    agent_id: str
    agent_name: str
    commit_sha: str
    reason: str
    created_at: float


class RepoRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now

    # -- repositories -------------------------------------------------------------------------

    async def add(self, name: str, url: str, path: str, default_branch: str) -> RepoRow:
        now = self._now()
        await self.db.execute(
            "INSERT INTO repos (name, url, path, default_branch, created_at, fetched_at)"
            " VALUES (?,?,?,?,?,?)", (name, url, path, default_branch, now, now))
        return RepoRow(name, url, path, default_branch, now, now)

    async def get(self, name: str) -> RepoRow | None:
        row = await self.db.fetchone("SELECT * FROM repos WHERE name = ?", (name,))
        return RepoRow(**dict(row)) if row else None

    async def all(self) -> list[RepoRow]:
        return [RepoRow(**dict(r)) for r in
                await self.db.fetchall("SELECT * FROM repos ORDER BY name")]

    async def remove(self, name: str) -> None:
        await self.db.execute("DELETE FROM repos WHERE name = ?", (name,))

    async def fetched(self, name: str, default_branch: str) -> None:
        await self.db.execute("UPDATE repos SET fetched_at = ?, default_branch = ? WHERE name = ?",
                              (self._now(), default_branch, name))

    # -- worktrees ------------------------------------------------------------------------------

    async def claim(self, *, agent_id: str, agent_name: str, repo: str, path: str, branch: str,
                    base: str) -> None:
        """The 'in use' record, written before the worktree is created."""
        await self.db.execute(
            "INSERT INTO worktrees (agent_id, agent_name, repo, path, branch, base, state,"
            " created_at) VALUES (?,?,?,?,?,?,?,?)",
            (agent_id, agent_name, repo, path, branch, base, CREATING, self._now()))

    async def activate(self, agent_id: str, *, admin: str, head: str, private: bool) -> None:
        await self.db.execute(
            "UPDATE worktrees SET state = ?, admin = ?, head = ?, private = ? WHERE agent_id = ?",
            (ACTIVE, admin, head, int(private), agent_id))

    async def set_head(self, agent_id: str, head: str) -> None:
        await self.db.execute("UPDATE worktrees SET head = ? WHERE agent_id = ?",
                              (head, agent_id))

    async def removed(self, agent_id: str) -> None:
        await self.db.execute(
            "UPDATE worktrees SET state = ?, removed_at = ? WHERE agent_id = ?",
            (REMOVED, self._now(), agent_id))

    async def worktree(self, agent_id: str) -> WorktreeRow | None:
        row = await self.db.fetchone("SELECT * FROM worktrees WHERE agent_id = ?", (agent_id,))
        return WorktreeRow.of(row) if row else None

    async def worktrees(self, repo: str | None = None, *,
                        include_removed: bool = False) -> list[WorktreeRow]:
        sql = "SELECT * FROM worktrees WHERE 1=1"
        params: list[Any] = []
        if repo is not None:
            sql += " AND repo = ?"
            params.append(repo)
        if not include_removed:
            sql += " AND state != ?"
            params.append(REMOVED)
        rows = await self.db.fetchall(sql + " ORDER BY created_at", tuple(params))
        return [WorktreeRow.of(r) for r in rows]

    # -- archives -------------------------------------------------------------------------------

    async def add_archive(self, row: ArchiveRow) -> None:
        await self.db.execute(
            "INSERT INTO repo_archives (ref, repo, agent_id, agent_name, commit_sha, reason,"
            " created_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT (ref) DO UPDATE SET"
            " repo = excluded.repo, agent_id = excluded.agent_id,"
            " agent_name = excluded.agent_name, commit_sha = excluded.commit_sha,"
            " reason = excluded.reason, created_at = excluded.created_at",
            (row.ref, row.repo, row.agent_id, row.agent_name, row.commit_sha, row.reason,
             row.created_at))

    async def archives(self, repo: str | None = None) -> list[ArchiveRow]:
        if repo is None:
            rows = await self.db.fetchall("SELECT * FROM repo_archives ORDER BY created_at")
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM repo_archives WHERE repo = ? ORDER BY created_at", (repo,))
        return [ArchiveRow(**dict(r)) for r in rows]
