"""Answering the agents from the web console, in a real headless browser, with the real claude
CLI on the mock Anthropic API and Telegram (the fake Bot API) running beside it: a permission
request appears in Needs you and Allow lets the tool run (the file is written); Deny with a
reason reaches the model (at desktop and at phone width); a request answered on Telegram updates
the open page."""

from __future__ import annotations

import asyncio
import json

import pytest
from playwright.async_api import expect

from bot.app import Switchboard
from bot.kit import LinkState
from bot.telegram.front import run_telegram
from tests.browser.conftest import ALICE, PHONE, WAIT_MS, live, signed_in
from tests.conftest import free_port, make_settings, wait_for
from tests.e2e.test_telegram import ADMIN, said, tap, tg_settings
from tests.fakes.fake_telegram import FakeTelegram

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240),
              pytest.mark.real_cli]


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        fake.add_chat(ADMIN, first_name="alice", username="alice")
        yield fake


@pytest.fixture
def settings(short_home, mock_api, fake_tg):
    (short_home / "t").mkdir(exist_ok=True)
    return tg_settings(make_settings(short_home, mock_api), fake_tg).with_(
        http_port=free_port())


async def test_allow_and_deny_from_the_page_and_an_answer_on_telegram(
        browser, settings, fake_tg, mock_api, tmp_path):
    app = Switchboard(settings)
    await app.__aenter__()
    # Telegram as `switchboard run` keeps it up: its link state is what the header shows.
    telegram = asyncio.create_task(run_telegram(app.telegram_context()), name="telegram")
    link = app.links.link("telegram")
    try:
        await wait_for(lambda: link.state == LinkState.CONNECTED, 30, "telegram connected")
        await app.store.operators.upsert("telegram", str(ADMIN), "alice", "admin", "test")
        context, page = await signed_in(browser, app, ALICE)
        await live(page)
        # The header says how each chat front end is linked.
        await expect(page.locator("header .links")).to_contain_text("Telegram: connected",
                                                                    timeout=WAIT_MS)
        # Allow: the request appears on the open page (the stream), whole; the file is written.
        work = tmp_path / "allow"
        work.mkdir()
        assert (await app.run_command(ALICE, f"/spawn writer --cwd {work} BASH: "
                                      "echo from-the-web > web.txt")).ok
        card = page.locator("article.request", has_text="echo from-the-web > web.txt")
        await expect(card).to_be_visible(timeout=WAIT_MS)
        await expect(card.locator("pre.command")).to_have_text("echo from-the-web > web.txt")
        await card.get_by_role("button", name="Allow", exact=True).click()
        await wait_for(lambda: (work / "web.txt").exists(), 60, "the command ran")
        assert (work / "web.txt").read_text() == "from-the-web\n"
        await expect(page.locator("ul.answered")).to_contain_text(
            "Allowed by alice on the web console", timeout=WAIT_MS)

        # Deny with a reason: the model reads it.
        work = tmp_path / "deny"
        work.mkdir()
        assert (await app.run_command(ALICE, f"/spawn remover --cwd {work} BASH: "
                                      "rm -rf build-cache")).ok
        card = page.locator("article.request", has_text="rm -rf build-cache")
        await expect(card).to_be_visible(timeout=WAIT_MS)
        await card.get_by_placeholder("reason (the model reads it)").fill(
            "keep the cache, it took an hour")
        await card.get_by_role("button", name="Deny").click()
        remover = await app.pool.fleet.get("remover")
        await wait_for(lambda: remover.state == "idle" and not remover.busy, 60, "remover done")
        assert "keep the cache, it took an hour" in json.dumps(mock_api.requests[-1]["messages"])
        audit = await app.store.audit.recent(20)
        assert any(r.action == "deny" and r.platform == "web" and r.user_id == ALICE.id
                   for r in audit)

        # Answered on Telegram while the page is open (at phone width): the page says so.
        await context.close()
        context, page = await signed_in(browser, app, ALICE, PHONE)
        await live(page)
        work = tmp_path / "tg"
        work.mkdir()
        assert (await app.run_command(ALICE, f"/spawn phoner --cwd {work} BASH: "
                                      "touch from-phone.txt")).ok
        card = page.locator("article.request", has_text="touch from-phone.txt")
        await expect(card).to_be_visible(timeout=WAIT_MS)
        message = await said(fake_tg, ADMIN, "phoner wants to use Bash")
        await tap(fake_tg, ADMIN, message, "Allow")
        await expect(card).to_have_count(0, timeout=WAIT_MS)
        await expect(page.locator("ul.answered")).to_contain_text(
            "Allowed by alice on Telegram", timeout=WAIT_MS)
        await wait_for(lambda: (work / "from-phone.txt").exists(), 60, "the command ran")

        # And at phone width from the page itself: Allow, then Deny with a reason.
        work = tmp_path / "phone"
        work.mkdir()
        assert (await app.run_command(ALICE, f"/spawn thumb --cwd {work} BASH: "
                                      "touch thumbed.txt")).ok
        card = page.locator("article.request", has_text="touch thumbed.txt")
        await expect(card).to_be_visible(timeout=WAIT_MS)
        await card.get_by_role("button", name="Allow", exact=True).click()
        await wait_for(lambda: (work / "thumbed.txt").exists(), 60, "the command ran")
        thumb = await app.pool.fleet.get("thumb")
        await wait_for(lambda: thumb.state == "idle" and not thumb.busy, 60, "thumb done")
        assert (await app.run_command(ALICE, "/ask thumb BASH: rm -rf thumbs")).ok
        card = page.locator("article.request", has_text="rm -rf thumbs")
        await expect(card).to_be_visible(timeout=WAIT_MS)
        await card.get_by_placeholder("reason (the model reads it)").fill("not from a phone")
        await card.get_by_role("button", name="Deny").click()
        await wait_for(lambda: "not from a phone" in json.dumps(mock_api.requests[-1]),
                       60, "the reason reached the model")
        await context.close()
    finally:
        telegram.cancel()
        await asyncio.gather(telegram, return_exceptions=True)
        await app.aclose()
