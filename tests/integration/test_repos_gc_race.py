"""GC racing spawns and kills (property test over random interleavings, fake CLI, real git):
twenty agents spawned at once on one repository, some committing, some leaving uncommitted
work, some killed, with GC passes started anywhere among them. GC never removes a worktree in
use (every agent that is not killed still has a working worktree) and never loses work (every
commit is on a branch, every uncommitted file of a killed agent on its archive branch)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bot.app import Switchboard
from tests.conftest import ADMIN, make_settings
from tests.integration.test_repos_fake import agent_commit, git, make_origin

AGENTS = 20
WORK = ("none", "commit", "dirty", "both")


@st.composite
def plans(draw: st.DrawFn) -> dict:
    gcs = draw(st.integers(1, 4))
    return {
        "passes": draw(st.integers(4, 20)),
        "kill": draw(st.lists(st.booleans(), min_size=AGENTS, max_size=AGENTS)),
        "work": draw(st.lists(st.sampled_from(WORK), min_size=AGENTS, max_size=AGENTS)),
        "order": draw(st.permutations(range(AGENTS + gcs))),
        "yields": draw(st.lists(st.integers(0, 6), min_size=AGENTS + gcs,
                                max_size=AGENTS + gcs)),
    }


async def _scenario(home: Path, plan: dict) -> None:
    origin = make_origin(home / "origin")
    cfg = make_settings(home, fake=True, spawns_per_minute=1000, commands_per_minute=1000)
    async with Switchboard(cfg) as app:
        repos = app.pool.repos
        await app.api.repos.add("proj", str(origin), by=ADMIN)
        bare = cfg.repos_dir / "proj.git"
        commits: dict[str, str] = {}  # agent name -> its last commit
        dirty: dict[str, str] = {}  # agent name -> the text of its uncommitted file
        live: set[str] = set()  # spawned and not killed
        problems: list[str] = []

        def check_in_use() -> None:
            for name in live:
                r = next((x for x in app.pool.fleet.live() if x.name == name), None)
                tree = repos.tree_of(r.id) if r else None
                if tree is None or not (tree.path / ".git").is_file():
                    problems.append(f"{name}'s worktree is gone while it is in use")

        async def agent(i: int) -> None:
            name = f"a{i}"
            await app.api.repos.spawn(name, "hi", repo="proj", by=ADMIN)
            live.add(name)
            r = await app.pool.fleet.get(name)
            tree = repos.tree_of(r.id)
            work = plan["work"][i]
            if work in ("commit", "both"):
                commits[name] = await asyncio.to_thread(
                    agent_commit, tree, {f"f{i}.txt": f"commit {i}\n"}, f"{name} commits")
            if work in ("dirty", "both"):
                (tree.path / f"wip{i}.txt").write_text(f"wip {i}\n")
                dirty[name] = f"wip {i}"
            if plan["kill"][i]:
                live.discard(name)
                await app.api.kill(name)

        async def gc() -> None:  # a few passes, to land inside spawns' windows
            for _ in range(plan["passes"]):
                await repos.gc("test")
                check_in_use()
                await asyncio.sleep(0)

        async def step(slot: int, k: int) -> None:
            for _ in range(plan["yields"][k]):
                await asyncio.sleep(0)
            await (agent(slot) if slot < AGENTS else gc())

        await asyncio.gather(*(step(slot, k) for k, slot in enumerate(plan["order"])))
        await repos.gc("final")
        check_in_use()
        assert not problems, problems
        await _check_work(app, bare, commits, dirty, live)


async def _check_work(app, bare: Path, commits: dict[str, str], dirty: dict[str, str],
                      live: set[str]) -> None:
    repos = app.pool.repos
    for name in live:  # a live agent's last commits are taken in at its turn end, or here
        await app.api.repos.diff(name)
    refs = git("--git-dir", str(bare), "for-each-ref", "--format=%(refname)").split()
    for name, sha in commits.items():
        holders = git("--git-dir", str(bare), "for-each-ref", "--contains", sha,
                      "--format=%(refname)")
        assert holders, f"{name}'s commit {sha} is on no branch (refs: {refs})"
    archives = {a.agent_name: a.ref for a in await app.api.repos.archives("proj")}
    for name, text in dirty.items():
        if name in live:
            continue
        assert name in archives, f"{name}'s uncommitted work was not archived"
        shown = git("--git-dir", str(bare), "show", f"{archives[name]}:wip{name[1:]}.txt")
        assert shown == text
    for name in {f"a{i}" for i in range(AGENTS)} - live:  # killed: worktree removed
        r = await app.pool.fleet.get(name)
        assert repos.tree_of(r.id) is None and not Path(r.cwd).exists()


@settings(max_examples=3, deadline=None, derandomize=True, phases=(Phase.generate,),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(plan=plans())
def test_gc_racing_twenty_spawns_and_kills_keeps_work_and_worktrees_in_use(plan):
    home = Path(tempfile.mkdtemp(prefix="sbg", dir="/tmp"))
    try:
        asyncio.run(asyncio.wait_for(_scenario(home, plan), 90))
    finally:
        shutil.rmtree(home, ignore_errors=True)
