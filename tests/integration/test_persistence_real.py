"""Acceptance 1 with the real CLI (mock API, GCS emulator): a supervisor with two agents, an
operator's bus message, a schedule and an open question stops; its data directory and the
CLI's config directory are deleted; a new supervisor on the same bucket restores the
database, each agent resumes its own session (the mock is sent the earlier conversation), is
told it was restarted, and every escalation, message, schedule, cost and audit row is there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from tests.conftest import run, wait_for
from tests.fakes.gcs import Emulator
from tests.fakes.mock_anthropic import MockAnthropic
from tests.integration.test_persistence_fake import _rows

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]


async def _idle(app: Switchboard, name: str) -> None:
    r = await app.pool.fleet.get(name)  # type: ignore[union-attr]
    await wait_for(lambda: r.state == "idle" and not r.busy and r.queued == 0, 90, f"{name} idle")


async def _answer(app: Switchboard, name: str, prompt: str) -> str:
    assert (await run(app, f"/ask {name} {prompt}")).ok
    store = app.store
    assert store is not None

    async def done() -> str | None:
        row = await store.db.fetchone(
            "SELECT result_text FROM turns t JOIN agents a ON a.id = t.agent_id WHERE a.name = ?"
            " AND t.prompt = ? AND t.status = 'ok'", (name, prompt))
        return row["result_text"] if row else None

    await wait_for(done, 90, f"{name}'s answer to {prompt}")
    return str(await done())


async def test_a_replaced_container_resumes_every_session_from_the_bucket(
        permissive_settings: Settings, mock_api: MockAnthropic, gcs: Emulator,
        short_home: Path) -> None:
    settings = permissive_settings.with_(gcs_bucket="sb", storage_emulator_host=gcs.host)
    async with Switchboard(settings) as app:
        assert (await run(app, "/spawn a TEXT: alpha-remembered")).ok
        assert (await run(app, "/spawn b TEXT: beta-remembered")).ok
        await _idle(app, "a")
        await _idle(app, "b")
        assert (await run(app, "/send --type info b TEXT: operator-note")).ok
        await _idle(app, "b")
        draft = await run(app, "/cron add every weekday at 9 a TEXT: morning check")
        assert draft.ok, draft.plain()
        assert (await run(app, "/cron confirm")).ok
        a = await app.pool.fleet.get("a")  # type: ignore[union-attr]
        question = await app.pool.escalations.open(  # type: ignore[union-attr]
            agent_id=a.id, kind="question", title="a asks", body="merge now?", free_text=True)
    before = _rows(settings.db_path)
    assert question.id in {e for (e,) in before["escalations"]}
    assert before["schedules"], "the schedule was made"
    assert before["messages"] and sum(float(c) for _, c in before["turns"]) > 0  # type: ignore[arg-type]

    # The container is replaced: the data directory and the CLI's config directory are gone.
    shutil.rmtree(settings.home)
    shutil.rmtree(short_home / "claude", ignore_errors=True)
    seen = len(mock_api.requests)
    async with Switchboard(settings) as app:
        after = _rows(settings.db_path)
        for table, rows in before.items():
            assert rows <= after[table], f"{table}: {rows - after[table]} missing"
        recalled_a = await _answer(app, "a", "RECALL")
        recalled_b = await _answer(app, "b", "RECALL")
    # Each resumed its own session: the mock was sent the earlier conversation ...
    assert "alpha-remembered" in recalled_a and "beta-remembered" not in recalled_a
    assert "beta-remembered" in recalled_b and "operator-note" in recalled_b
    # ... and the first turn after the restart told it so.
    later = json.dumps(mock_api.requests[seen:])
    assert "restarted" in later
