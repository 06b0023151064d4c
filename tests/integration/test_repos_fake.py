"""Repositories and worktrees with real git repositories and the fake CLI: two agents get
separate worktrees and branches, a clean merge, a conflicting merge that escalates and changes
nothing, and GC after a kill that leaves uncommitted work recoverable on an archive branch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from supervisor.repos.git import Tree
from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(60)

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_COUNT": "1",
           "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    full.update(GIT_ENV)
    full.update(env or {})
    return subprocess.run(["git", *args], cwd=cwd, env=full, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_origin(where: Path, files: dict[str, str] | None = None) -> Path:
    """A plain repository on branch main with `files` committed."""
    where.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", str(where))
    for name, text in (files or {"README": "hello\n", "shared.txt": "one\ntwo\nthree\n"}).items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    git("add", "-A", cwd=where)
    git("commit", "-qm", "initial", cwd=where)
    return where


def agent_env(tree: Tree) -> dict[str, str]:
    """git as the agent's sandbox runs it: its objects go to its private store."""
    env = {"GIT_DIR": str(tree.admin), "GIT_COMMON_DIR": str(tree.bare),
           "GIT_WORK_TREE": str(tree.path)}
    if tree.private is not None:
        env["GIT_OBJECT_DIRECTORY"] = str(tree.private / "objects")
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(tree.bare / "objects")
    return env


def agent_commit(tree: Tree, files: dict[str, str], message: str) -> str:
    """What `git commit -am` inside the sandbox leaves behind: the objects in the agent's
    private store and its branch ref there (the sandbox mounts it over refs/heads/agent/)."""
    for name, text in files.items():
        (tree.path / name).parent.mkdir(parents=True, exist_ok=True)
        (tree.path / name).write_text(text)
    env = agent_env(tree)
    git("add", "-A", cwd=tree.path, env=env)
    if tree.private is None:
        git("commit", "-qm", message, cwd=tree.path, env=env)
        return git("rev-parse", "HEAD", cwd=tree.path, env=env)
    ref = tree.private / "refs" / "heads" / tree.branch
    parent = ref.read_text().strip()
    sha = git("commit-tree", git("write-tree", cwd=tree.path, env=env), "-p", parent, "-m",
              message, cwd=tree.path, env=env)
    ref.write_text(sha + "\n")
    return sha


def bare_git(app, repo: str, *args: str) -> str:
    return git("--git-dir", str(app.settings.repos_dir / f"{repo}.git"), *args)


async def spawn(app, name: str, repo: str = "proj", extra: str = "") -> object:
    reply = await run(app, f"/spawn {name} --repo {repo} {extra} TEXT: ready")
    assert reply.ok, reply.plain()
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 30, f"{name} idle")
    return runner


async def test_two_agents_separate_worktrees_clean_merge_then_conflict(fake_app, tmp_path):
    origin = make_origin(tmp_path / "origin")
    reply = await run(fake_app, f"/repo add proj {origin}")
    assert reply.ok, reply.plain()
    a, b = await spawn(fake_app, "ant"), await spawn(fake_app, "bee")
    ta, tb = fake_app.pool.repos.tree_of(a.id), fake_app.pool.repos.tree_of(b.id)
    assert a.cwd != b.cwd and Path(a.cwd) == ta.path and Path(b.cwd) == tb.path
    assert (ta.branch, tb.branch) == ("agent/ant", "agent/bee")
    # Sandboxed agents write their commits to a private store of their own.
    assert (ta.private is not None) == fake_app.pool.isolation.ok
    assert (ta.path / "README").read_text() == "hello\n"
    main0 = bare_git(fake_app, "proj", "rev-parse", "main")

    # A clean merge: ant's commit fast-forwards main.
    sha_a = agent_commit(ta, {"shared.txt": "ONE\ntwo\nthree\n"}, "ant: first line")
    diff = await run(fake_app, "/diff ant")
    assert diff.ok and "shared.txt" in diff.plain(), diff.plain()
    assert diff.attachments and b"+ONE" in diff.attachments[0].content
    merged = await run(fake_app, "/merge ant")
    assert merged.ok and "fast-forward" in merged.plain(), merged.plain()
    assert bare_git(fake_app, "proj", "rev-parse", "main") == sha_a != main0

    # bee changed the same line from the old base: a conflict, reported, nothing moved.
    sha_b = agent_commit(tb, {"shared.txt": "uno\ntwo\nthree\n", "new.txt": "x\n"}, "bee")
    assert (await run(fake_app, "/diff bee")).ok  # takes bee's commit in, as a turn end does
    refs_before = bare_git(fake_app, "proj", "for-each-ref")
    conflict = await run(fake_app, "/merge bee")
    assert not conflict.ok and "shared.txt" in conflict.plain(), conflict.plain()
    assert "new.txt" not in conflict.plain()
    assert bare_git(fake_app, "proj", "for-each-ref") == refs_before
    assert bare_git(fake_app, "proj", "rev-parse", "main") == sha_a
    assert bare_git(fake_app, "proj", "rev-parse", "agent/bee") == sha_b
    # The escalation: a notice to every front end, listing the conflicting paths.
    assert await _notice_with(fake_app, "shared.txt")


async def _notice_with(app, text: str) -> bool:
    rows = await app.store.db.fetchall(
        "SELECT title, body FROM escalations WHERE title LIKE 'Merge conflict%'")
    return any(text in r["body"] for r in rows)


async def test_kill_with_uncommitted_changes_gc_archives_them(fake_app, tmp_path):
    origin = make_origin(tmp_path / "origin")
    assert (await run(fake_app, f"/repo add proj {origin}")).ok
    a = await spawn(fake_app, "ant")
    tree = fake_app.pool.repos.tree_of(a.id)
    sha = agent_commit(tree, {"done.txt": "committed\n"}, "ant: committed work")
    (tree.path / "wip.txt").write_text("not committed yet\n")
    (tree.path / "README").write_text("edited\n")
    assert (await run(fake_app, "/kill ant")).ok
    async def removed() -> bool:
        row = await fake_app.store.repos.worktree(a.id)
        return row.state == "removed"

    await wait_for(removed, 20, "GC removed the worktree")
    assert not tree.path.exists() and not tree.admin.exists()
    archives = await fake_app.api.repos.archives("proj")
    assert len(archives) == 1 and archives[0].ref.startswith("archive/ant/")
    ref = archives[0].ref
    assert bare_git(fake_app, "proj", "show", f"{ref}:wip.txt") == "not committed yet"
    assert bare_git(fake_app, "proj", "show", f"{ref}:README") == "edited"
    assert bare_git(fake_app, "proj", "show", f"{ref}:done.txt") == "committed"
    assert bare_git(fake_app, "proj", "rev-parse", f"{ref}^") == sha
    listing = await run(fake_app, "/repo archives")
    assert ref in listing.plain()
    # The agent branch is gone with its worktree; the work is on the archive branch only.
    assert "agent/ant" not in bare_git(fake_app, "proj", "branch", "--list")


async def _repo_with(app, tmp_path) -> None:
    origin = make_origin(tmp_path / "origin", {"shared.txt": "s\n", "c.txt": "c\n"})
    assert (await run(app, f"/repo add proj {origin}")).ok


INTEND = 'MCP intend {"paths": ["shared.txt"], "note": "rewriting it"}'


async def _turns(app, r):
    return list(reversed(await app.store.turns.recent(r.id, 50)))


async def test_an_intention_reaches_the_overlapping_sibling_only(fake_app, tmp_path):
    await _repo_with(fake_app, tmp_path)
    ant, bee, cat = [await spawn(fake_app, n) for n in ("ant", "bee", "cat")]
    repos = fake_app.pool.repos
    (repos.tree_of(bee.id).path / "shared.txt").write_text("bee's edit\n")  # overlapping
    (repos.tree_of(cat.id).path / "c.txt").write_text("cat's edit\n")  # not
    assert (await run(fake_app, f"/ask ant {INTEND}")).ok

    async def bee_heard() -> bool:
        return any("ant intends to change shared.txt" in t.prompt
                   for t in await _turns(fake_app, bee))

    await wait_for(bee_heard, 30, "bee told of ant's intention")
    notice = next(t for t in await _turns(fake_app, bee) if "intends" in t.prompt)
    assert "rewriting it" in notice.prompt and "overlaps your work on shared.txt" in notice.prompt
    await wait_for(lambda: not ant.busy and not ant.queued, 10, "ant's turn over")
    ta = await _turns(fake_app, ant)
    assert "Declared: you intend to change shared.txt" in (ta[-1].result_text or "")
    await wait_for(lambda: not cat.busy and not cat.queued, 10, "cat idle")
    assert len(await _turns(fake_app, cat)) == 1  # not disturbed


async def test_push_intentions_interrupts_the_busy_sibling(fake_settings, tmp_path):
    from bot.app import Switchboard

    async with Switchboard(fake_settings.with_(repo_push_intentions=True)) as app:
        await _repo_with(app, tmp_path)
        await spawn(app, "ant")
        bee = await spawn(app, "bee")
        (app.pool.repos.tree_of(bee.id).path / "shared.txt").write_text("bee's edit\n")
        assert (await run(app, "/ask bee SLEEP 60")).ok
        await wait_for(lambda: bee.busy, 10, "bee busy")
        assert (await run(app, f"/ask ant {INTEND}")).ok
        await wait_for(lambda: not bee.busy and not bee.queued, 30, "bee interrupted")
        tb = await _turns(app, bee)
        sleep = next(t for t in tb if t.prompt == "SLEEP 60")
        assert sleep.status == "interrupted"
        assert "ant intends to change shared.txt" in tb[-1].prompt


async def test_worktrees_survive_a_restart_and_gc_at_start_keeps_live_ones(fake_settings,
                                                                          tmp_path):
    from bot.app import Switchboard

    async with Switchboard(fake_settings) as app:
        await _repo_with(app, tmp_path)
        ant = await spawn(app, "ant")
        sha = agent_commit(app.pool.repos.tree_of(ant.id), {"n.txt": "n\n"}, "ant: n")
        ant_id = ant.id
    async with Switchboard(fake_settings) as app:
        repos = app.pool.repos
        tree = repos.tree_of(ant_id)
        assert tree is not None and (tree.path / ".git").is_file()  # GC at start kept it
        assert repos.wall(ant_id) is not None and repos.gc_runs >= 1
        diff = await run(app, "/diff ant")
        assert diff.ok and "n.txt" in diff.plain(), diff.plain()
        assert bare_git(app, "proj", "rev-parse", "agent/ant") == sha
