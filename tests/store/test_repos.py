"""Conformance of RepoStore: registered git repositories, agents' worktrees and GC archives."""

from __future__ import annotations

import pytest

from store import Store
from store.errors import Conflict
from store.protocols import RepoStore
from store.repos import ACTIVE, CREATING, REMOVED, ArchiveRow
from tests.store.conftest import T0, FakeNow


@pytest.fixture
def repos(store: Store) -> RepoStore:
    return store.repos


async def test_add_get_all_and_remove(repos: RepoStore) -> None:
    row = await repos.add("web", "git@example.invalid:web.git", "/r/web.git", "main")
    assert (row.name, row.url, row.path, row.default_branch, row.created_at, row.fetched_at) == (
        "web", "git@example.invalid:web.git", "/r/web.git", "main", T0, T0)
    assert await repos.get("web") == row
    await repos.add("api", "u", "/r/api.git", "trunk")
    assert [r.name for r in await repos.all()] == ["api", "web"]
    with pytest.raises(Conflict):
        await repos.add("web", "other", "/x", "main")
    await repos.remove("web")
    await repos.remove("web")  # twice is harmless
    assert await repos.get("web") is None
    assert [r.name for r in await repos.all()] == ["api"]


async def test_fetched_stamps_the_time_and_the_default_branch(repos: RepoStore,
                                                              clock: FakeNow) -> None:
    await repos.add("web", "u", "/r/web.git", "main")
    at = clock.advance(30)
    await repos.fetched("web", "trunk")
    row = await repos.get("web")
    assert row is not None and (row.default_branch, row.created_at, row.fetched_at) == (
        "trunk", T0, at)


async def test_a_worktree_from_claim_to_removal(repos: RepoStore, clock: FakeNow) -> None:
    await repos.claim(agent_id="a1", agent_name="alpha", repo="web", path="/w/a1",
                      branch="sb/alpha", base="main")
    row = await repos.worktree("a1")
    assert row is not None
    assert (row.agent_id, row.agent_name, row.repo, row.path, row.branch, row.base, row.state,
            row.head, row.private, row.created_at, row.removed_at) == (
        "a1", "alpha", "web", "/w/a1", "sb/alpha", "main", CREATING, None, False, T0, None)
    await repos.activate("a1", admin="/r/web.git/worktrees/a1", head="abc", private=True)
    row = await repos.worktree("a1")
    assert row is not None and (row.state, row.admin, row.head, row.private) == (
        ACTIVE, "/r/web.git/worktrees/a1", "abc", True)
    await repos.set_head("a1", "def")
    at = clock.advance(9)
    await repos.removed("a1")
    row = await repos.worktree("a1")
    assert row is not None and (row.state, row.head, row.removed_at) == (REMOVED, "def", at)


async def test_one_worktree_per_agent(repos: RepoStore) -> None:
    await repos.claim(agent_id="a1", agent_name="alpha", repo="web", path="/w/a1",
                      branch="b", base="main")
    with pytest.raises(Conflict):
        await repos.claim(agent_id="a1", agent_name="alpha", repo="api", path="/w/a1b",
                          branch="b", base="main")
    assert await repos.worktree("nobody") is None


async def test_worktrees_by_repo_without_the_removed(repos: RepoStore,
                                                     clock: FakeNow) -> None:
    assert await repos.worktrees() == []
    for agent, repo in (("a1", "web"), ("a2", "api"), ("a3", "web")):
        await repos.claim(agent_id=agent, agent_name=agent, repo=repo, path=f"/w/{agent}",
                          branch=agent, base="main")
        clock.advance(1)
    await repos.removed("a1")
    assert [w.agent_id for w in await repos.worktrees()] == ["a2", "a3"]
    assert [w.agent_id for w in await repos.worktrees("web")] == ["a3"]
    assert [w.agent_id for w in await repos.worktrees("web", include_removed=True)] == [
        "a1", "a3"]
    assert [w.agent_id for w in await repos.worktrees(include_removed=True)] == [
        "a1", "a2", "a3"]
    assert await repos.worktrees("none") == []


async def test_archives_in_time_order_and_replaced_by_ref(repos: RepoStore) -> None:
    assert await repos.archives() == []
    late = ArchiveRow("refs/archive/a2", "api", "a2", "bravo", "c2", "gc", T0 + 2)
    early = ArchiveRow("refs/archive/a1", "web", "a1", "alpha", "c1", "killed", T0 + 1)
    await repos.add_archive(late)
    await repos.add_archive(early)
    assert await repos.archives() == [early, late]
    assert await repos.archives("web") == [early]
    again = ArchiveRow("refs/archive/a1", "web", "a1", "alpha", "c9", "gc again", T0 + 3)
    await repos.add_archive(again)  # same ref: replaced
    assert await repos.archives() == [late, again]
    assert await repos.archives("none") == []
