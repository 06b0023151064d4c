"""Deep links end to end through the front-end kit (a fake chat platform, a real Switchboard on
the fake CLI): a front desk given the web console's public address sends every escalation with
the link to its page; one without sends none."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from bot.kit import FrontDesk
from tests.conftest import wait_for
from tests.fakes.fake_chat import FakeChat, FakeClock
from tests.integration.test_kit import ALICE, PLATFORM, ask, dm

pytestmark = pytest.mark.timeout(60)
URL = "https://sb.example.org"


@pytest.mark.parametrize("web_url", [URL, ""])
async def test_each_pushed_request_links_to_its_page(fake_settings, web_url):
    chat = FakeChat(PLATFORM)
    async with Switchboard(fake_settings) as app:
        desk = FrontDesk(chat, app.fleet, app.run_command, clock=FakeClock(),
                         admin_ids=(ALICE.user_id,), web_url=web_url)
        await desk.start()
        try:
            row = await ask(app, "make deploy")
            await wait_for(lambda: any(row.id in t for t in chat.texts(dm(ALICE))), 20,
                           "the request in chat")
            card = next(t for t in chat.texts(dm(ALICE)) if row.id in t)
            if web_url:
                assert f"Open in the web console: {URL}/#req-{row.id}" in card, card
            else:
                assert "web console" not in card, card
        finally:
            await desk.stop()
