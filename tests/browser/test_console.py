"""The web console in a real headless browser, on a running Switchboard (the fake claude CLI):
sign-in by a one-time link, every page at desktop and phone width (screenshots), a hostile
agent's markup shown as text, a used or expired link refused, a viewer without buttons and a
forged POST without the CSRF token changing nothing, KILL ALL with its confirm leaving no agent
process under a banner, and a page that picks up a restarted supervisor without a reload."""

from __future__ import annotations

import json

import pytest
from playwright.async_api import expect

from bot.app import Switchboard
from tests.browser.conftest import (
    ALICE,
    OLGA,
    VIC,
    WAIT_MS,
    WIDTHS,
    add_operators,
    link_for,
    live,
    shots_dir,
    signed_in,
)
from tests.conftest import free_port, processes_with_tag, wait_for

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
PAGES = (("/", "needs", "Needs you"), ("/fleet", "fleet", "Fleet"),
         ("/agents/{agent}", "agent", "{agent}"), ("/bus", "bus", "Bus"),
         ("/schedules", "schedules", "Schedules"), ("/audit", "audit", "Audit"))


@pytest.fixture
def settings(fake_settings):
    return fake_settings.with_(http_port=free_port())


async def started(settings) -> Switchboard:
    app = Switchboard(settings)
    await app.__aenter__()
    await add_operators(app, ALICE, OLGA, VIC)
    return app


async def idle(app: Switchboard, name: str) -> str:
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 30, f"{name} idle")
    return runner.id


async def a_fleet(app: Switchboard) -> str:
    """Agents worth drawing: one with a child, a hostile one, a question open, bus mail, a
    schedule with a run."""
    for line in ("/spawn builder run the build", f"/spawn evil {HOSTILE}",
                 "/spawn reviewer --parent builder review the diff"):
        assert (await app.run_command(ALICE, line)).ok, line
    for name in ("builder", "evil", "reviewer"):
        await idle(app, name)
    assert (await app.run_command(ALICE, "/send reviewer please look at #42")).ok
    ask = {"question": "Merge the release branch now?", "options": ["Merge", "Wait"],
           "recommended": "wait", "why": "the nightly build is still red"}
    assert (await app.run_command(ALICE, f"/ask builder MCP ask_operator {json.dumps(ask)}")).ok
    reply = await app.run_command(ALICE, "/cron add every day at 9 builder check the nightly")
    assert reply.ok, reply.plain()
    assert (await app.run_command(ALICE, "/cron confirm")).ok
    await wait_for(lambda: app.api.pending(), 30, "the question")
    return "builder"


async def test_every_page_at_both_widths_after_signing_in_by_a_link(browser, settings, tmp_path):
    app = await started(settings)
    try:
        agent = await a_fleet(app)
        shots = shots_dir(tmp_path)
        for width, viewport in WIDTHS.items():
            context, page = await signed_in(browser, app, ALICE, viewport)
            errors: list[str] = []
            page.on("pageerror", lambda e, seen=errors: seen.append(str(e)))
            for path, name, heading in PAGES:
                await page.goto(app.listener.url + path.format(agent=agent))
                await expect(page.get_by_role("heading", level=1).first).to_contain_text(
                    heading.format(agent=agent), timeout=WAIT_MS)
                await live(page)
                await page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
            # The hostile agent's output is text on the page, and none of it ran.
            evil = await app.pool.fleet.get("evil")
            await page.goto(f"{app.listener.url}/agents/{evil.id}")
            await expect(page.get_by_text(f"ECHO: {HOSTILE}")).to_be_visible()
            assert await page.title() != "pwned"
            assert await page.locator("main script, main img").count() == 0
            assert errors == []
            await context.close()
    finally:
        await app.aclose()


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_used_or_expired_link_is_refused(browser, settings, width):
    app = await started(settings)
    try:
        context, page = await signed_in(browser, app, OLGA, WIDTHS[width])
        used = page.url
        await context.close()
        link = await link_for(app, OLGA)
        first, _ = await signed_in_by(browser, link)
        await first.close()
        again = await browser.new_context(viewport=WIDTHS[width])
        page = await again.new_page()
        await page.goto(link)
        await expect(page.get_by_text("This sign-in link was already used.")).to_be_visible()
        await again.close()
        stale = await link_for(app, OLGA)
        await app.store.db.execute("UPDATE web_credentials SET expires_at=expires_at-601"
                                   " WHERE kind='link' AND used_at IS NULL")
        late = await browser.new_context(viewport=WIDTHS[width])
        page = await late.new_page()
        await page.goto(stale)
        await expect(page.get_by_text("This sign-in link has expired.")).to_be_visible()
        await page.goto(app.listener.url + "/fleet")  # and no session came of it
        await expect(page.get_by_text("Sign in with a one-time link from chat.")).to_be_visible()
        await late.close()
        assert used.endswith("/")
    finally:
        await app.aclose()


async def signed_in_by(browser, link: str):
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(link)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Needs you")).to_be_visible()
    return context, page


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_viewer_sees_no_buttons_and_a_forged_post_changes_nothing(browser, settings,
                                                                          width):
    app = await started(settings)
    try:
        await a_fleet(app)
        builder = await app.pool.fleet.get("builder")
        context, page = await signed_in(browser, app, VIC, WIDTHS[width])
        await expect(page.get_by_text("Merge the release branch now?")).to_be_visible()
        for path in ("/", "/fleet", f"/agents/{builder.id}"):
            await page.goto(app.listener.url + path)
            await live(page)
            assert await page.locator("main button, header button, main textarea").count() == 0
            assert await page.get_by_text("KILL ALL").count() == 0
        # Even posted by hand with the viewer's own token, a change is refused.
        csrf = json.loads(await page.locator("body").get_attribute("hx-headers"))
        answer = await page.request.post(app.listener.url + "/act", form={
            "verb": "pause", "target": builder.id}, headers=csrf)
        assert answer.status == 403 and "operator" in await answer.text()
        await context.close()

        # An operator's session, and a POST without its CSRF token (another site's form):
        # refused, audited, nothing paused.
        context, page = await signed_in(browser, app, OLGA, WIDTHS[width])
        forged = await page.request.post(app.listener.url + "/act", form={
            "verb": "pause", "target": builder.id})
        assert forged.status == 403
        assert "CSRF" in await forged.text()
        wrong = await page.request.post(app.listener.url + "/act", form={
            "verb": "pause", "target": builder.id, "csrf": "guessed"})
        assert wrong.status == 403
        assert builder.state != "paused"
        rows = await app.store.audit.recent(30)
        assert sum(r.action == "refused" and r.user_id == OLGA.id for r in rows) == 2
        assert not any(r.action == "pause" for r in rows)
        # ...while the page's own button works, through the command runner, audited as chat.
        await page.goto(app.listener.url + "/fleet")
        await page.locator(f"#row-{builder.id}").get_by_role("button", name="Pause").click()
        await expect(page.locator("#flash")).to_contain_text("builder", timeout=WAIT_MS)
        await wait_for(lambda: builder.state == "paused", 20, "builder paused")
        await expect(page.locator(f"#row-{builder.id} .pill")).to_have_text("paused",
                                                                          timeout=WAIT_MS)
        rows = await app.store.audit.recent(5)
        assert any(r.action == "pause" and r.platform == "web" and r.user_id == OLGA.id
                   and r.ok for r in rows)
        await context.close()
    finally:
        await app.aclose()


@pytest.mark.parametrize("width", WIDTHS)
async def test_kill_all_with_its_confirm_leaves_no_agent_process(browser, settings, tmp_path,
                                                                 width):
    app = await started(settings)
    try:
        for i in range(3):
            assert (await app.run_command(ALICE, f"/spawn k{i} BG")).ok
        runners = [await app.pool.fleet.get(f"k{i}") for i in range(3)]
        for r in runners:
            await idle(app, r.name)
        context, page = await signed_in(browser, app, ALICE, WIDTHS[width])
        await live(page)
        await page.get_by_text("KILL ALL").click()  # the first step opens the confirm
        assert all(r.state == "idle" for r in runners)
        await page.get_by_role("button", name="Yes, kill every agent now").click()
        banner = page.locator(".banner")
        await expect(banner).to_contain_text("Halted since", timeout=WAIT_MS)
        await expect(banner).to_contain_text("by alice via the web console")
        assert all(r.state == "killed" for r in runners)
        assert processes_with_tag(app.settings.instance_id + "/") == []
        await page.screenshot(path=str(shots_dir(tmp_path) / f"halted-{width}.png"),
                              full_page=True)
        # The kill switch ended every web session (layer 3): this page is signed out now.
        await page.goto(app.listener.url + "/fleet")
        await expect(page.get_by_text("Sign in with a one-time link from chat.")).to_be_visible()
        # An admin signs in again and sees the banner with the release.
        context2, page2 = await signed_in(browser, app, ALICE, WIDTHS[width])
        await expect(page2.locator(".banner")).to_contain_text("Halted since")
        await page2.get_by_text("Release…").click()
        await page2.get_by_role("button", name="Turn the kill switch off").click()
        await expect(page2.locator(".banner")).to_have_count(0, timeout=WAIT_MS)
        assert not app.api.halted
        await context.close()
        await context2.close()
    finally:
        await app.aclose()


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_restarted_supervisor_is_picked_up_without_a_reload(browser, settings, width):
    app = await started(settings)
    try:
        context, page = await signed_in(browser, app, ALICE, WIDTHS[width])
        await page.goto(app.listener.url + "/fleet")
        await live(page)
        await page.evaluate("() => { window.sameDocument = true }")
        await app.aclose()
        app = Switchboard(settings)  # the same home and port: a restart
        await app.__aenter__()
        assert (await app.run_command(ALICE, "/spawn after restarted")).ok
        await expect(page.locator(".agent .name")).to_contain_text("after", timeout=WAIT_MS)
        assert await page.evaluate("() => window.sameDocument") is True
        await context.close()
    finally:
        await app.aclose()




async def test_what_a_person_types_survives_the_stream_redrawing_the_region(browser, settings):
    app = await started(settings)
    try:
        assert (await app.run_command(ALICE, "/spawn dev hello")).ok
        await idle(app, "dev")
        first = {"question": "Which port?"}
        assert (await app.run_command(ALICE, f"/ask dev MCP ask_operator {json.dumps(first)}")).ok
        context, page = await signed_in(browser, app, OLGA)
        await live(page)
        box = page.get_by_placeholder("your answer")
        await expect(box).to_have_count(1, timeout=WAIT_MS)
        await box.fill("8080, the one the proxy")
        # Another request arrives: the stream redraws Needs you under the half-typed answer.
        assert (await app.run_command(ALICE, "/spawn other hi")).ok
        await idle(app, "other")
        second = {"question": "Which colour?"}
        assert (await app.run_command(ALICE,
                                      f"/ask other MCP ask_operator {json.dumps(second)}")).ok
        await expect(page.get_by_text("Which colour?")).to_be_visible(timeout=WAIT_MS)
        await expect(page.get_by_placeholder("your answer").first).to_have_value(
            "8080, the one the proxy")
        await page.get_by_placeholder("your answer").first.press("Enter")
        rows: list = []

        async def answered() -> bool:
            rows[:] = [r for r in await app.api.pending()]
            return len(rows) == 1

        await wait_for(answered, 30, "the first question answered")
        await expect(page.locator("ul.answered")).to_contain_text("Answered by olga",
                                                                  timeout=WAIT_MS)
        await context.close()
    finally:
        await app.aclose()


async def test_a_changed_agent_is_swapped_in_alone(browser, settings):
    """While the same agents are shown, the stream sends only the rows that changed and the
    page swaps each in by its id: the rest of the region stays the same element."""
    app = await started(settings)
    try:
        for name in ("one", "two"):
            assert (await app.run_command(ALICE, f"/spawn {name} hi")).ok
        one = await idle(app, "one")
        await idle(app, "two")
        context, page = await signed_in(browser, app, OLGA)
        await page.goto(app.listener.url + "/fleet")
        await live(page)
        assert (await app.run_command(ALICE, "/pause one")).ok
        pill = page.locator(f"#row-{one} .pill")
        await expect(pill).to_have_text("paused", timeout=WAIT_MS)
        await page.evaluate("() => { document.querySelector('.rows').dataset.kept = 'yes' }")
        assert (await app.run_command(ALICE, "/resume one")).ok
        await expect(pill).to_have_text("idle", timeout=WAIT_MS)
        assert await page.evaluate("() => document.querySelector('.rows').dataset.kept") == "yes"
        await expect(page.locator(f"#row-{one}")).to_have_count(1)
        await context.close()
    finally:
        await app.aclose()
