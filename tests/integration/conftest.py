"""The front-end kit's fixtures, shared by its tests (test_kit.py, test_kit_faults.py): a fake
chat platform, and a real Switchboard (fake CLI) with a front desk on it and its staff."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.app import Switchboard
from bot.kit import FrontDesk
from supervisor.config import Settings
from tests.fakes.fake_chat import FakeChat
from tests.integration.test_kit import PLATFORM, add_staff, open_desk


@pytest.fixture
def chat() -> FakeChat:
    return FakeChat(PLATFORM)


@pytest.fixture
async def kit(fake_settings: Settings, chat: FakeChat
              ) -> AsyncIterator[tuple[Switchboard, FrontDesk]]:
    async with Switchboard(fake_settings) as app:
        await add_staff(app)
        desk = await open_desk(app, chat)
        try:
            yield app, desk
        finally:
            await desk.stop()
