"""The model API failing for minutes: the real CLI retries by itself (its system/api_retry
messages) and the operator is told within a minute, with the status and how many tries."""

from __future__ import annotations

import re
import time

import pytest

from bot.app import Switchboard
from supervisor.agents.api_trouble import ApiTrouble
from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.mark.real_cli
async def test_a_model_api_answering_500_to_everything_is_told_within_a_minute(
        permissive_settings, mock_api):
    """Issue 25: with every request answered 500, a turn ran over 5 minutes (26 failed
    requests) and the operator was told nothing."""
    mock_api.on_request = lambda body: ({"error": 500}
                                        if "FAILING" in str(body.get("messages", "")) else None)
    env = {**permissive_settings.agent_env, "CLAUDE_CODE_MAX_RETRIES": "10"}  # the CLI's default
    async with Switchboard(permissive_settings.with_(agent_env=env)) as app:
        started = time.monotonic()
        assert (await run(app, "/spawn flaky FAILING please")).ok

        async def told() -> list[str]:
            return [e.body for e in await app.store.escalations.undelivered("t")
                    if e.title == "flaky: the model API keeps failing"]

        await wait_for(told, 60, "the notice that the model API keeps failing")
        assert time.monotonic() - started < 60
        [body] = await told()
        assert "HTTP 500" in body and "/stop flaky" in body, body
        tries = int(re.search(r"(\d+) failed tries", body).group(1))
        assert tries >= 2 and len(mock_api.requests) >= tries, body
        runner = await app.pool.fleet.get("flaky")
        assert runner.busy  # the CLI is still retrying: the notice came while it waits
        assert (await run(app, "/kill flaky")).ok


def test_told_once_per_turn_after_a_few_tries_or_half_a_minute():
    trouble = ApiTrouble()
    data = {"error_status": 500, "error": "api_error", "max_retries": 10, "retry_delay_ms": 4000}
    assert [trouble.retried("a", data, t) for t in (0.0, 1.0, 2.0)] == [None, None, None]
    notice = trouble.retried("a", data, 3.0)
    assert notice is not None and "4 failed tries of 10" in notice.body
    assert "HTTP 500 (api_error)" in notice.body and "next in 4s" in notice.body
    assert trouble.retried("a", data, 4.0) is None  # once per turn
    trouble.begin()
    assert trouble.retried("a", data, 100.0) is None
    assert trouble.retried("a", data, 131.0) is not None  # slow retries: after 30 s
