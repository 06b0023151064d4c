"""Faults and bad input against the supervisor, with the small fake claude CLI."""

from __future__ import annotations

import pytest

from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(60)


async def _idle(app, name: str, prompt: str = "hello"):
    assert (await run(app, f"/spawn {name} {prompt}")).ok
    runner = await app.pool.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 30, f"{name} idle")
    return runner


async def test_a_prompt_with_a_lone_surrogate_and_controls_gets_its_reply(fake_app):
    """Regression: a lone surrogate reached the store and the CLI's stdin, neither of which
    can encode it, and the turn vanished with no reply. The API cleans what reaches it."""
    runner = await _idle(fake_app, "uni")
    sent = await fake_app.api.ask("uni", "hi \ud800 there\x1b]52;c;Zm9v\x07 \u00e9\U0001f600\r\nok")
    assert sent.agent.name == "uni"
    await wait_for(lambda: runner.state == "idle" and not runner.busy and not runner.queued, 20)
    last = (await fake_app.store.turns.recent(runner.id, 1))[0]
    assert last.status == "ok"
    assert last.result_text == "ECHO: hi \ufffd there]52;c;Zm9v \u00e9\U0001f600\nok"
