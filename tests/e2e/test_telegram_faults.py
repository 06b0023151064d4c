"""Faults and bad input on Telegram (issue 9): the real python-telegram-bot against the fake
Bot API, the fake claude CLI. Bad input answered and audited within a second, a refused
permission request delivered in another form, emoji split by UTF-16 length, a base URL ending
in /bot named as the problem, and `switchboard doctor` asking getMe."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from bot.app import Switchboard
from bot.doctor import Doctor, _check_telegram
from bot.kit import ChatId
from bot.telegram.front import TelegramFrontend, run_telegram
from commands.base import Reply
from supervisor.config_types import Secret
from tests.conftest import wait_for
from tests.e2e.test_telegram import ADMIN, ask, fake_tg, said, tg_settings  # noqa: F401
from tests.fakes.fake_telegram.text import utf16_len

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def tg(fake_settings, fake_tg):  # noqa: F811 - the fixture imported above
    app = Switchboard(tg_settings(fake_settings, fake_tg))
    await app.__aenter__()
    front = TelegramFrontend(app.telegram_context(), poll_timeout_s=1)
    await front.start()
    yield app, front, fake_tg
    await front.stop()
    await app.aclose()


async def audited(app, action):
    async def found():
        return [r for r in await app.store.audit.recent(5) if r.action == action]

    await wait_for(found, 1.0, f"an audit row {action!r} within a second")
    return (await found())[0]


async def test_a_lone_surrogate_and_escapes_are_answered_and_audited_within_a_second(tg):
    """Regression (issue 9): a prompt holding a lone surrogate got no reply at all (30 s)
    and no audit row."""
    app, _, fake = tg
    started = time.monotonic()
    fake.user_sends(ADMIN, "/status a\ud800b\x1b[2J")
    reply = await said(fake, ADMIN, "removed from your message", timeout=1.0)
    row = await audited(app, "status")
    assert time.monotonic() - started < 1.0
    assert "no agent" in reply["text"] and "\x1b" not in reply["text"]
    assert row.args == "a\ufffdb" and not row.ok


async def test_plain_text_and_a_forged_button_are_answered_and_audited(tg):
    app, _, fake = tg
    fake.user_sends(ADMIN, "hello there")
    await said(fake, ADMIN, "Commands start with '/'", timeout=1.0)
    assert (await audited(app, "text")).args == "hello there"
    fake.user_sends(ADMIN, "/agents")
    listing = await said(fake, ADMIN, "No agents running")
    fake.user_taps(ADMIN, listing["message_id"], "/killall\x1b[2Jconfirm", strict=False)
    await fake.wait_for(lambda: [a for a in fake.callback_answers
                                 if "not one of mine" in (a.get("text") or "")], 1.0,
                        what="the tap answered")
    assert (await audited(app, "tap")).ok == 0
    assert not app.pool.killswitch.halted


async def test_a_permission_request_telegram_refuses_goes_out_plain(tg):
    """Regression (issue 9): Telegram refusing one permission request (400) lost it, and
    the outbox row was acknowledged anyway, so it was never sent again."""
    app, _, fake = tg
    fake.fail_next(status=400, method="sendMessage", description=(
        "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 3"))
    row = await ask(app, "rm -rf build")
    card = await said(fake, ADMIN, "w wants to use Bash")
    assert "rm -rf build" in card["text"] and card.get("reply_markup")
    assert any(e.get("injected") and e["status"] == 400 for e in fake.errors)

    async def acknowledged():
        return row.id not in {r.id for r in
                              await app.store.escalations.undelivered("telegram")}

    await wait_for(acknowledged, 5, "the row acknowledged once delivered")
    assert len(await app.store.operators.copies(row.id, "telegram")) == 1


async def test_nine_thousand_emoji_reach_telegram_whole(tg):
    """Regression (issue 9): split by code points, each chunk was over 4,096 UTF-16 units:
    refused and dropped."""
    _, front, fake = tg
    futures = front.desk.reply(ChatId(str(ADMIN)), Reply.text("😀" * 9000))
    await asyncio.gather(*futures)
    shown = [m.get("text") or "" for m in fake.sent(ADMIN)]
    assert shown and all(utf16_len(t) <= 4096 for t in shown)
    whole = "".join(shown) + "".join(d["bytes"].decode() for d in fake.documents)
    assert whole.count("😀") >= 9000  # all of it as a file, its start as a message
    # (the fixture asserts the fake refused nothing)


async def test_a_base_url_ending_in_bot_is_named_as_the_problem(fake_settings, fake_tg,  # noqa: F811
                                                                caplog):
    """Regression (issue 9): it was reported as "the bot token was refused"."""
    settings = tg_settings(fake_settings, fake_tg).with_(
        telegram_api_base_url=f"{fake_tg.url}/bot")
    with caplog.at_level(logging.ERROR):
        async with Switchboard(settings) as app:
            await asyncio.wait_for(run_telegram(app.telegram_context()), 10)
    assert "TELEGRAM_API_BASE_URL ends in /bot" in caplog.text
    assert "token was refused" not in caplog.text
    assert fake_tg.token not in caplog.text


def test_doctor_asks_the_bot_api_whether_the_token_works(fake_settings, fake_tg,  # noqa: F811
                                                         capsys):
    """Regression (issue 9): `switchboard doctor` never called getMe."""
    good = tg_settings(fake_settings, fake_tg)
    for settings, ok, says in (
            (good, True, "the bot token works (getMe: @"),
            (good.with_(telegram_token=Secret("1:wrong")), False, "refused the bot token"),
            (good.with_(telegram_api_base_url=f"{fake_tg.url}/bot/"), False, "ends in /bot")):
        doctor = Doctor()
        _check_telegram(settings, doctor)
        out = capsys.readouterr().out
        assert (doctor.problems == 0) is ok and says in out, out
        assert settings.telegram_token.value not in out
    assert fake_tg.calls("getMe")
