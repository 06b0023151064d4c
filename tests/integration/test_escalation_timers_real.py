"""The pool's timer service applies a pause timeout to a real agent: no answer in time pauses
it and leaves the request open; the late answer resumes it and the tool runs."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from commands.base import Caller, Role
from tests.conftest import make_settings, run, wait_for

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

ALICE = Caller("tg:1", "alice", Role.OPERATOR, "telegram")


async def _two(titles) -> bool:
    return len(await titles()) >= 2


async def test_pause_timeout_pauses_then_the_late_answer_resumes(short_home, mock_api, tmp_path):
    settings = make_settings(short_home, mock_api, approval_reminder_s=0.5,
                             approval_timeout_s=1.0, approval_on_timeout="pause")
    async with Switchboard(settings) as app:
        reply = await run(app, f"/spawn dozy --cwd {tmp_path} BASH: touch late.txt")
        assert reply.ok, reply.plain()
        runner = await app.pool.fleet.get("dozy")
        await wait_for(app.pool.escalations.pending, 60, "an open permission request")
        [row] = await app.pool.escalations.pending()
        await wait_for(lambda: runner.state == "paused", 30, "the pause after the timeout")
        still = await app.store.escalations.get(row.id)
        assert still.status == "open" and still.timed_out_at is not None

        async def titles() -> list[str]:
            return [r.title for r in await app.store.escalations.undelivered("t")
                    if r.ref_id == row.id]

        # The state flips before the notice about it is written: wait for the notice.
        await wait_for(lambda: _two(titles), 30, "the timeout's notice")
        assert await titles() == [f"Reminder: {row.title}",
                                  f"No answer to {row.id}: agent paused"]
        assert (await app.run_command(ALICE, f"/approve {row.id}")).ok
        await wait_for(lambda: runner.state == "idle", 60, "the resumed agent's turn ending")
        assert (tmp_path / "late.txt").exists()
