"""The web console's routes over real HTTP (aiohttp as the browser) on a running Switchboard
(the fake CLI): the audit trail filtered and exported as CSV (no cell a spreadsheet would run)
and JSON; the page headers also on the event stream; the vendored library cached; nothing
changes on a GET; an action with a bad target or verb says what was wrong."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import aiohttp
import pytest

from bot.app import Switchboard
from bot.web.auth import CSP
from supervisor.guard.escalations import Kind
from supervisor.guard.gate import PERMISSION_OPTIONS
from tests.conftest import free_port
from tests.integration.test_repos_fake import make_origin, spawn
from tests.integration.test_web_auth import ALICE, VIC, browser, csrf_of, sign_in

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def app(fake_settings):
    async with Switchboard(fake_settings.with_(http_port=free_port())) as sb:
        assert sb.api is not None
        for who in (ALICE, VIC):
            platform, _, uid = who.id.partition(":")
            await sb.api.add_operator(platform, uid, who.name, who.role.name.lower(),
                                      added_by="test")
        yield sb


async def test_the_audit_is_filtered_and_exported_as_csv_and_json(app):
    assert not (await app.run_command(ALICE, "/pause =HYPERLINK(\"http://x\")")).ok
    assert (await app.run_command(VIC, "/agents")).ok
    url = app.listener.url
    async with browser() as b:
        await sign_in(app, ALICE, b)
        async with b.get(url + "/audit?who=alice&action=pause") as resp:
            page = await resp.text()
            assert resp.status == 200 and "=HYPERLINK(&#34;http://x&#34;)" in page
            assert "<td>vic</td>" not in page  # vic's row is filtered out...
        async with b.get(url + "/audit") as resp:
            assert "<td>vic</td>" in await resp.text()  # ...and there without the filter
        async with b.get(url + "/audit.csv?who=alice&action=pause") as resp:
            assert resp.headers["Content-Disposition"] == 'attachment; filename="audit.csv"'
            rows = list(csv.reader(io.StringIO(await resp.text())))
        assert rows[0][:6] == ["id", "at", "platform", "user_id", "user_name", "action"]
        assert [r[5] for r in rows[1:]] == ["pause"]
        assert rows[1][6] == "'=HYPERLINK(\"http://x\")"  # a formula becomes text
        async with b.get(url + "/audit.json?days=1") as resp:
            body = await resp.json()
        assert {r["action"] for r in body} >= {"pause", "agents", "signin"}
        async with b.get(url + "/audit?days=-3") as resp:
            assert resp.status == 400 and "days" in await resp.text()


async def test_headers_caching_and_no_change_on_a_get(app):
    url = app.listener.url
    async with browser() as b:
        await sign_in(app, ALICE, b)
        async with b.get(url + "/fleet") as resp:
            assert resp.headers["Content-Security-Policy"] == CSP
            assert resp.headers["Cache-Control"] == "no-store"
            page = await resp.text()
        version = page.split("/static/htmx.min.js?v=")[1].split('"')[0]
        async with b.get(f"{url}/static/htmx.min.js?v={version}") as resp:
            assert resp.status == 200
            assert resp.headers["Cache-Control"] == "public, max-age=31536000, immutable"
            assert resp.headers["Content-Type"].startswith(("application/javascript",
                                                            "text/javascript"))
        async with b.get(url + "/static/nothing.js") as resp:
            assert resp.status == 404
        async with b.get(url + "/events?view=fleet") as resp:
            assert resp.headers["Content-Type"] == "text/event-stream"
            assert resp.headers["Content-Security-Policy"] == CSP
            first = await resp.content.readuntil(b"event: fleet")
            assert b"id: " in first
        # An action is a POST: a GET of it changes nothing.
        async with b.get(url + "/act?verb=killall") as resp:
            assert resp.status in (404, 405)
        assert not app.api.halted
        csrf = {"X-CSRF-Token": await csrf_of(app, b), "Origin": url, "HX-Request": "true"}
        async with b.post(url + "/act", data={"verb": "pause", "target": "a b; /killall"},
                          headers=csrf) as resp:
            assert resp.status == 400 and "Bad target" in await resp.text()
        async with b.post(url + "/act", data={"verb": "shutdown"}, headers=csrf) as resp:
            assert resp.status == 400 and "Unknown action" in await resp.text()
        assert not app.api.halted


async def test_a_page_needs_a_session(app):
    async with browser() as b:
        async with b.get(app.listener.url + "/fleet", allow_redirects=False) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/signin"
    async with aiohttp.ClientSession() as script:
        async with script.get(app.listener.url + "/events") as resp:
            assert resp.status == 401


async def test_several_requests_of_one_agent_for_one_tool_are_allowed_at_once(app):
    assert (await app.run_command(ALICE, "/spawn dev hello")).ok
    dev = await app.pool.fleet.get("dev")
    rows = [await app.pool.escalations.open(
        agent_id=dev.id, kind=Kind.PERMISSION, title="dev wants to use Bash",
        body="Why asked: Bash: no rule decides it", tool_name="Bash",
        tool_input={"command": f"make step{i}"}, options=PERMISSION_OPTIONS,
        detail=f"make step{i}", detail_name="command.sh") for i in range(3)]
    url = app.listener.url
    async with browser() as b:
        await sign_in(app, ALICE, b)
        async with b.get(url + "/") as resp:
            page = await resp.text()
        assert "Allow all 3 of dev's Bash" in page
        assert all(f"make step{i}" in page for i in range(3))
        headers = {"X-CSRF-Token": await csrf_of(app, b), "Origin": url, "HX-Request": "true"}
        async with b.post(url + "/act", data={"verb": "approve_all", "target": "dev",
                                              "text": "Bash"}, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
    for row in rows:
        closed = await app.api.escalation(row.id)
        assert closed is not None and closed.status != "open"
        assert closed.answered_by == "alice" and closed.answered_via == "web"
    audit = await app.store.audit.recent(5)
    assert any(r.action == "approve" and r.args == "all dev Bash" and r.platform == "web"
               for r in audit)


async def test_an_agent_in_a_worktree_shows_its_repository_branch_and_diff(app, tmp_path):
    origin = make_origin(tmp_path / "origin")
    assert (await app.run_command(ALICE, f"/repo add proj {origin}")).ok
    runner = await spawn(app, "coder")
    (Path(runner.cwd) / "shared.txt").write_text("one\nTWO <b>\nthree\n")
    url = app.listener.url
    async with browser() as b:
        await sign_in(app, ALICE, b)
        async with b.get(url + "/fleet") as resp:
            fleet = await resp.text()
        branch = (await app.api.repos.diff(runner.id)).worktree.branch
        assert f"proj · {branch}" in fleet
        async with b.get(f"{url}/agents/{runner.id}") as resp:
            page = await resp.text()
        assert "Worktree diff" in page and f"proj · {branch} against main" in page
        assert "uncommitted: " in page and "shared.txt" in page


async def test_schedules_show_their_next_slots(app):
    reply = await app.run_command(ALICE, "/cron add every day at 9 new:triage triage <new> issues")
    assert reply.ok, reply.plain()
    assert (await app.run_command(ALICE, "/cron confirm")).ok
    async with browser() as b:
        await sign_in(app, ALICE, b)
        async with b.get(app.listener.url + "/schedules") as resp:
            page = await resp.text()
    [line] = [x for x in page.splitlines() if "next: " in x]
    assert line.count("09:00 UTC") == 3, line
    assert "triage &lt;new&gt; issues" in page and "not run yet" in page


async def test_the_fleet_page_shows_the_hosts_and_a_late_one_with_its_heartbeat(app):
    """Every worker on the database (one on SQLite): its agents and memory; a worker three
    heartbeats overdue (died, hangs or is cut off) says how long ago it was heard from."""
    assert (await app.run_command(ALICE, "/spawn coder TEXT: ready")).ok
    await app.store.workers.beat("w-gone", host="gone-host", pid=4242, agents=2,
                                 memory_available=None, coordinator=False)
    await app.store.db.execute("UPDATE workers SET heartbeat_at = heartbeat_at - 125"
                               " WHERE id = 'w-gone'")
    async with browser() as b:
        await sign_in(app, VIC, b)
        async with b.get(app.listener.url + "/fleet") as resp:
            fleet = await resp.text()
    hosts = fleet.split("<h2>Hosts", 1)[1]
    here = next(h for h in await app.api.hosts() if h.this)
    assert f"<b>{here.host}</b> <span class=\"meta\">pid {os.getpid()} · coordinator · this " \
           "one</span> · 1 agent · " in hosts
    assert " GB free" in hosts.split("gone-host", 1)[0]
    gone = hosts.split("<b>gone-host</b>", 1)[1].split("</li>", 1)[0]
    assert 'pid 4242</span> · 2 agents · memory unknown' in gone
    assert "last heartbeat 2m0" in gone and "host late" in hosts
    assert "last heartbeat" not in hosts.split("gone-host", 1)[0]  # this one is never late
