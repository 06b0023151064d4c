"""The web console in a real headless browser: Debian's chromium driven by Playwright
(`executable_path`, nothing downloaded), one browser per test module, a context (its own cookies)
per person and width. Sign-in is always by a one-time link from /web, as a person does it.

Without chromium the tests are skipped, saying why; under CI=true (.ci/run) they fail.

Screenshots of each page at both widths are written where SWITCHBOARD_SCREENSHOTS says (the
committed ones in docs/web/ are made with SWITCHBOARD_SCREENSHOTS=docs/web), else to the test's
temporary directory."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.app import Switchboard
from commands.base import Caller, Role

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 375, "height": 740}
WIDTHS = {"desktop": DESKTOP, "phone": PHONE}
LINK = re.compile(r"(https?://\S+/signin/\S+)")
ALICE = Caller("telegram:100", "alice", Role.ADMIN, "telegram")
OLGA = Caller("telegram:200", "olga", Role.OPERATOR, "telegram")
VIC = Caller("telegram:300", "vic", Role.VIEWER, "telegram")
# What the page shows within: htmx swaps and the stream's frames are milliseconds apart, the
# real CLI's turns and a server restart seconds.
WAIT_MS = 30_000



@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[object]:
    if CHROMIUM is None:
        why = "chromium is not installed (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI") == "true":  # CI installs it: missing there is a failure
            pytest.fail(why)
        pytest.skip(why)
    from playwright.async_api import async_playwright

    pw = await async_playwright().start()
    chromium = await pw.chromium.launch(executable_path=CHROMIUM)
    try:
        yield chromium
    finally:
        await chromium.close()
        await pw.stop()


def shots_dir(tmp: Path) -> Path:
    where = os.environ.get("SWITCHBOARD_SCREENSHOTS")
    path = Path(where) if where else tmp / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


async def add_operators(app: Switchboard, *people: Caller) -> None:
    assert app.api is not None
    for who in people:
        platform, _, uid = who.id.partition(":")
        await app.api.add_operator(platform, uid, who.name, who.role.name.lower(),
                                   added_by="test")


async def link_for(app: Switchboard, who: Caller) -> str:
    """The one-time link /web answers with, as chat shows it."""
    reply = await app.run_command(who, "/web")
    assert reply.ok, reply.plain()
    match = LINK.search(reply.plain())
    assert match, reply.plain()
    return match.group(1)


async def signed_in(browser, app: Switchboard, who: Caller, viewport=DESKTOP):  # noqa: ANN001
    """A new browser context signed in as `who` by a link, on Needs you."""
    from playwright.async_api import expect

    context = await browser.new_context(viewport=viewport)
    page = await context.new_page()
    await page.goto(await link_for(app, who))
    await expect(page.get_by_text("Sign in to this Switchboard's web console?")).to_be_visible()
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Needs you")).to_be_visible()
    return context, page


async def live(page) -> None:  # noqa: ANN001
    """Wait until the page's event stream is open (htmx's SSE extension marks nothing; the
    header's first frame does: the stream's snapshot replaces it)."""
    await page.wait_for_function(
        "() => { const e = document.querySelector('[sse-connect]');"
        " return e && e['htmx-internal-data'] && e['htmx-internal-data'].sseEventSource"
        " && e['htmx-internal-data'].sseEventSource.readyState === 1 }", timeout=WAIT_MS)
