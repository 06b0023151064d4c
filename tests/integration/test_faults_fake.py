"""Faults and bad input against the supervisor, with the small fake claude CLI."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time

import pytest

from tests.conftest import run, wait_for
from tests.subproc import Supervisor, write_config

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


def _turns(home, agent: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{home / 'switchboard.db'}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT t.prompt, t.status FROM turns t JOIN agents a ON a.id = t.agent_id"
            " WHERE a.name = ? ORDER BY t.id", (agent,)).fetchall()
    finally:
        conn.close()


@pytest.mark.timeout(120)
def test_sigkill_mid_turn_is_reported_after_restart_and_reruns_on_one_answer(short_home):
    """Regression: a turn running when the supervisor was SIGKILLed was silently closed as
    "interrupted" on the next start: never re-run, never reported. Now the next start asks the
    operator (a question that survives restarts) and one answer runs it again."""
    home = short_home / "sb"
    write_config(home, fake=True)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn slow SLEEP 60")
        sup.expect("→ working")
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
    finally:
        sup.close()
    assert _turns(home, "slow") == [("SLEEP 60", "running")]
    sup2 = Supervisor(home)
    try:
        line = sup2.expect("slow: a turn was interrupted")
        esc_id = re.search(r"\b([a-z2-9]{4,8}) · ", line) or re.search(
            r"/answer ([a-z2-9]{4,8})", sup2.expect("/answer"))
        assert esc_id, sup2.seen
        assert _turns(home, "slow") == [("SLEEP 60", "interrupted")]  # not re-run unasked
        sup2.send(f"/answer {esc_id.group(1)} 1")
        sup2.expect("the interrupted turn runs again")
        deadline = time.monotonic() + 20
        while _turns(home, "slow")[-1:] != [("SLEEP 60", "running")]:
            assert time.monotonic() < deadline, _turns(home, "slow")
            time.sleep(0.05)
        os.kill(sup2.proc.pid, signal.SIGKILL)  # the re-run is interrupted in its turn
        sup2.proc.wait(10)
    finally:
        sup2.close()
    sup3 = Supervisor(home)  # reports it again, sweeps what was left, and shuts down cleanly
    try:
        sup3.expect("slow: a turn was interrupted")
        assert [s for _, s in _turns(home, "slow")] == ["interrupted", "interrupted"]
        sup3.send("/quit")
        sup3.proc.wait(30)
        assert sup3.proc.returncode == 0
    finally:
        sup3.close()
