"""Sibling awareness end to end with the real claude CLI and the mock Anthropic API: agents on
one repository commit with git inside their sandboxes; a sibling working on overlapping paths
hears of the commit when its turn ends, ranked above a non-overlapping one, and a sibling whose
work overlaps nothing is not disturbed."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from supervisor.bus.core import SYSTEM
from tests.conftest import run, wait_for
from tests.integration.test_repos_fake import bare_git, make_origin

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]


async def _spawn(app, name: str, prompt: str):
    reply = await run(app, f"/spawn {name} --repo proj {prompt}")
    assert reply.ok, reply.plain()
    return await app.pool.fleet.get(name)


async def _idle(r, what: str = "") -> None:
    await wait_for(lambda: r.state == "idle" and not r.busy and not r.queued, 90,
                   what or f"{r.name} idle")


async def _turns(app, r):
    return list(reversed(await app.store.turns.recent(r.id, 50)))


async def test_commit_notice_reaches_the_overlapping_sibling_after_its_turn(
        permissive_settings, tmp_path):
    origin = make_origin(tmp_path / "origin", {"shared.txt": "s\n", "c.txt": "c\n",
                                               "d.txt": "d\n"})
    async with Switchboard(permissive_settings) as app:
        assert (await run(app, f"/repo add proj {origin}")).ok
        ant = await _spawn(app, "ant", "TEXT: ready")
        bee = await _spawn(app, "bee", "BASH: echo b >> shared.txt")  # uncommitted, overlapping
        cat = await _spawn(app, "cat", "TEXT: ready")
        dan = await _spawn(app, "dan", "BASH: echo d >> d.txt")  # overlaps nothing
        for r in (ant, bee, cat, dan):
            await _idle(r)
        repos = app.pool.repos
        heads = {r.id: repos._heads[r.id] for r in (ant, cat)}

        assert (await run(app, "/ask bee SLEEP 12")).ok
        await wait_for(lambda: bee.busy, 60, "bee busy")
        assert (await run(app, "/ask ant BASH: echo a >> shared.txt && "
                               "git commit -qam 'ant: shared'")).ok
        assert (await run(app, "/ask cat BASH: echo c >> c.txt && git commit -qam 'cat: c'")).ok
        await wait_for(lambda: all(repos._heads[i] != h for i, h in heads.items()), 90,
                       "both commits taken in at their turn ends")
        assert bee.busy, "bee's turn ended before the commits: the test proves nothing"
        # Committed inside the sandbox, taken into the bare repository by Switchboard.
        assert bare_git(app, "proj", "log", "-1", "--format=%s", "agent/ant") == "ant: shared"

        # The notice is a bus message delivered once the sleep ends: there is a moment between
        # the two turns where bee is idle, so wait for the notice's turn itself to end.
        async def noticed() -> bool:
            last = (await _turns(app, bee))[-1]
            return last.prompt != "SLEEP 12" and last.status != "running"

        await wait_for(noticed, 90, "bee's sleep and the notice turn")
        tb = await _turns(app, bee)
        sleep = next(t for t in tb if t.prompt == "SLEEP 12")
        notice = tb[-1]
        assert "What your siblings on repository proj" in notice.prompt, notice.prompt
        assert notice.started_at >= sleep.ended_at  # delivered when its turn ended
        text = notice.prompt
        assert 'ant committed' in text and 'cat committed' in text
        assert text.index("ant committed") < text.index("cat committed")  # ranked by overlap
        assert "overlaps your work on shared.txt" in text
        # dan's work overlaps neither commit: no message, no turn.
        await _idle(ant)
        await _idle(cat)
        assert len(await _turns(app, dan)) == 1
        assert await app.store.bus.of_recipient(dan.id) == []
        assert [m for m in await app.store.bus.recent(dan.id, 20) if m.sender == SYSTEM] == []
