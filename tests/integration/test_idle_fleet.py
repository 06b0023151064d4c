"""An idle fleet is quiet (issue 11): once an agent's priority is set, its sandbox's init sleeps
until a signal comes. Before, each init retried setting its session's autogroup every 50 ms for
30 s whenever the kernel's machine-wide rate for such changes (one every 100 ms without
CAP_SYS_ADMIN) turned it away, even after the supervisor had set it already: 300 idle agents
kept a third of a 2-core machine busy, and slowed their own shutdown."""

from __future__ import annotations

import asyncio

import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from tests.conftest import make_settings, wait_for

N = 20
DEFAULT_NICE = Settings.model_fields["agent_nice"].default


def _wakeups(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        fields = dict(line.split(":", 1) for line in fh if "ctxt_switches" in line)
    return sum(int(v) for v in fields.values())


async def test_the_inits_of_an_idle_fleet_stay_asleep(short_home):
    settings = make_settings(short_home, fake=True, agent_nice=DEFAULT_NICE).with_(
        max_agents=N, spawns_per_minute=1000, messages_per_minute=1000)
    async with Switchboard(settings) as app:
        assert app.pool is not None
        runners = await asyncio.gather(*(app.pool.spawn(f"q{i:02d}", "hello") for i in range(N)))
        await wait_for(lambda: all(r.state == "idle" for r in runners), 90, f"{N} agents idle")
        inits = [r.process.init_pid for r in runners if r.process is not None]
        if not all(inits):
            pytest.skip("agents are not sandboxed here: no init of their own")
        before = {pid: _wakeups(pid) for pid in inits}
        await asyncio.sleep(0.5)
        woke = {pid: _wakeups(pid) - n for pid, n in before.items()}
        # Set at once by a supervisor with the capability: no wake-up at all. Without it, the
        # retries back off to one a second. The old loop woke each init about ten times here.
        assert sum(woke.values()) <= N, woke
