"""`api.memory`: the operator's side of managed project memory (supervisor/repos/memory.py):
show a project's memory, replace its curated region, search it and its archive."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.errors import InvalidRequest, SupervisorError, UnknownAgent

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.pool import AgentPool

CURATED_MAX_BYTES = 100_000


@dataclass(frozen=True, slots=True)
class MemoryView:
    project: str
    curated: str
    managed: tuple[str, ...]
    slice: str  # what an agent started on the project now gets
    archived: int  # lines trimmed into the archive so far


class UnknownProject(SupervisorError):
    def __init__(self, ref: str, known: list[str]) -> None:
        listed = ", ".join(known[:10]) or "none yet"
        super().__init__(f"no project {ref!r}", what=f"There is no project {ref!r}.",
                         fix="Name a registered repository (/repo list), an agent working on "
                             "the project, or the project's directory (an absolute path). "
                             f"Projects with a memory: {listed}.")


class MemoryAPI:
    def __init__(self, pool: AgentPool, store: Store) -> None:
        self._pool = pool
        self._store = store
        self.memory = pool.project_memory.memory

    async def project(self, ref: str) -> str:
        """`repo:<name>` or `dir:<path>` from what the operator typed: that form itself, a
        registered repository's name, an agent (its project), or a directory's path."""
        ref = ref.strip()
        if ref.startswith(("repo:", "dir:")):
            return ref
        if await self._store.repos.get(ref) is not None:
            return f"repo:{ref}"
        if ref.startswith("/"):
            return f"dir:{await asyncio.to_thread(Path(ref).resolve)}"
        try:
            r = await self._pool.fleet.get(ref)
        except UnknownAgent:
            raise UnknownProject(ref, self.memory.projects()) from None
        found = self._pool.project_memory.project_of(r.id, r.cwd)
        if found is None:
            raise InvalidRequest(f"{r.name} works in a workspace of its own, which has no "
                                 "project memory (only a repository or a --cwd directory "
                                 "has one)")
        return found

    async def show(self, ref: str) -> MemoryView:
        project = await self.project(ref)
        mem = await asyncio.to_thread(self.memory.read, project)
        archived = await asyncio.to_thread(self.memory.search, project, "", 10**9)
        return MemoryView(project, mem.curated.decode(errors="replace"), mem.managed,
                          self.memory.slice(project), len(archived) - len(mem.managed))

    async def edit(self, ref: str, curated: str) -> MemoryView:
        """Replace the curated region with `curated` (the managed one is kept)."""
        data = curated.encode()
        if len(data) > CURATED_MAX_BYTES:
            raise InvalidRequest(f"the curated region may hold {CURATED_MAX_BYTES:,} bytes, "
                                 f"not {len(data):,}")
        project = await self.project(ref)
        await asyncio.to_thread(self.memory.edit, project, data)
        return await self.show(project)

    async def search(self, ref: str, query: str) -> tuple[str, tuple[str, ...]]:
        if not query.strip():
            raise InvalidRequest("say what to search for")
        project = await self.project(ref)
        return project, tuple(await asyncio.to_thread(self.memory.search, project, query))


__all__ = ["MemoryAPI", "MemoryView", "UnknownProject"]
