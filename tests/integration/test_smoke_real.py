"""First light: spawn a real CLI agent that runs Bash and answers, then a second turn."""

from __future__ import annotations

import pytest

from tests.conftest import run, wait_for


@pytest.fixture
def real_settings(permissive_settings):
    return permissive_settings


pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(120)]


async def test_spawn_runs_tool_and_second_turn(real_app, mock_api, tmp_path):
    reply = await run(real_app, f"/spawn alpha --cwd {tmp_path} BASH: echo hello > made.txt")
    assert reply.ok, reply.plain()
    runner = await real_app.pool.fleet.get("alpha")
    await wait_for(lambda: runner.state == "idle", 60, "first turn")
    assert (tmp_path / "made.txt").read_text().strip() == "hello"
    pid = runner.process.cli_pid
    turns = await real_app.store.turns.recent(runner.id)
    assert turns[0].result_text.startswith("TOOL RESULT"), turns[0]
    reply = await run(real_app, "/ask alpha RECALL")
    assert reply.ok
    await wait_for(lambda: len(mock_api.requests) >= 3 and runner.state == "idle", 60, "turn 2")
    turns = await real_app.store.turns.recent(runner.id)
    assert turns[0].result_text == "HISTORY: BASH: echo hello > made.txt | RECALL"
    assert runner.process.cli_pid == pid  # same process, new turn
