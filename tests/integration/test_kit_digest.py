"""Notice digests (issue 27, "fewer, better pushes") through the real front desk on a fake chat
and a real Switchboard, on a fake clock: the first routine notice goes out at once, the ones
within the window after it are held and sent as one silent message when it closes (and only
then acknowledged); a request, a loud notice and the answer to the operator's own /spawn are
never held; a window with one held notice sends it as its own card."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from bot.kit import FrontDesk
from supervisor.api import REVIEW_NOTICE
from supervisor.events import REPLY_NOTICE
from tests.conftest import run, wait_for
from tests.fakes.fake_chat import FakeChat, FakeClock
from tests.integration.test_kit import ALICE, ask, dm

pytestmark = pytest.mark.timeout(60)
WINDOW_S = 60.0


def pushed(chat: FakeChat) -> list:
    """What alice was sent but the agents' live status cards."""
    return [m for m in chat.sent(dm(ALICE))
            if not any(a.startswith("?/kill") for row in m.buttons for _, a in row)]


async def shown(chat: FakeChat, n: int) -> list:
    await wait_for(lambda: len(pushed(chat)) >= n, 10, f"{n} messages to alice")
    return pushed(chat)


async def test_routine_notices_within_a_minute_are_one_silent_message(fake_settings, chat):
    clock = FakeClock()
    async with Switchboard(fake_settings) as app:
        desk = FrontDesk(chat, app.fleet, app.run_command, clock=clock,
                         admin_ids=(ALICE.user_id,), digest_s=WINDOW_S)
        await desk.start()
        try:
            await app.api.notify("dev finished", "All well.")
            first = (await shown(chat, 1))[-1]
            assert "dev finished" in first.text and first.silent

            await app.api.notify("qa finished", "Two tests are flaky.")
            await app.pool.escalations.notify(None, "🧑\u200d⚖️ rev allowed dev's request",
                                              "Bash: npm test", ref_id="rk3m",
                                              tool_name=REVIEW_NOTICE)
            # Never held: a request that needs an answer, a loud notice, and the answer to the
            # operator's own /spawn (or /ask) they are waiting for.
            request = await ask(app)
            await app.api.notify("web ended with an error", "exit 1")
            messages = await shown(chat, 3)
            assert request.id in messages[1].text and not messages[1].silent
            assert "web ended with an error" in messages[2].text and not messages[2].silent
            assert (await run(app, "/spawn w hello")).ok
            reply = (await shown(chat, 4))[-1]
            assert "w finished" in reply.text and reply.silent
            finished = [r for r in await app.store.escalations.undelivered("t")
                        if r.title == "w finished"]
            assert [r.tool_name for r in finished] == [REPLY_NOTICE]
            assert len(pushed(chat)) == 4  # the two routine ones wait
            waiting = {r.title for r in await app.store.escalations.undelivered(chat.platform)}
            assert {"qa finished", "🧑\u200d⚖️ rev allowed dev's request"} <= waiting

            await clock.advance(WINDOW_S)
            digest = (await shown(chat, 5))[-1]
            assert digest.silent and digest.text.startswith("ℹ️ 2 notices")
            assert "qa finished" in digest.text and "Two tests are flaky." in digest.text
            assert "rev allowed dev's request" in digest.text
            # The reviewer's decision keeps its one-tap overturn inside the digest.
            assert [[a for _, a in row] for row in digest.buttons] == [["/overturn rk3m"]]
            left = {r.title for r in await app.store.escalations.undelivered(chat.platform)}
            assert not left & {"qa finished", "🧑\u200d⚖️ rev allowed dev's request"}

            # The next window: one held notice goes out as its own card, not a digest.
            await app.api.notify("ops finished", "Done.")
            for _ in range(50):
                await clock.advance(0)
            assert len(pushed(chat)) == 5
            await clock.advance(WINDOW_S)
            alone = (await shown(chat, 6))[-1]
            assert "ops finished" in alone.text and "notices" not in alone.text
        finally:
            await desk.stop()

