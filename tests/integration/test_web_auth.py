"""Sign-in to the web console and the HTTP API's tokens, over real HTTP against a running
Switchboard (the fake claude CLI): a one-time link from /web, its confirm page, the session
cookie; refusals of a used, expired or forged link, of a change without the CSRF token or from
another site, of a revoked token; roles; the kill switch ending every session and token; and no
secret in the audit table."""

from __future__ import annotations

import asyncio
import getpass
import io
import json
import os
import re

import aiohttp
import pytest
from yarl import URL

from bot.app import Switchboard
from bot.console import Console
from bot.web.auth import CSP, SESSION_COOKIE
from commands.base import Caller, Role
from tests.conftest import free_port, wait_for

pytestmark = pytest.mark.timeout(90)

ALICE = Caller("telegram:1", "alice", Role.ADMIN, "telegram")
VIC = Caller("telegram:2", "vic", Role.VIEWER, "telegram")
LINK = re.compile(r"(http://\S+/signin/(\S+))")


@pytest.fixture
async def app(fake_settings):
    async with Switchboard(fake_settings.with_(http_port=free_port())) as sb:
        assert sb.api is not None
        for who in (ALICE, VIC):
            platform, _, uid = who.id.partition(":")
            await sb.api.add_operator(platform, uid, who.name, who.role.name.lower(),
                                      added_by="test")
        yield sb


async def link_of(app: Switchboard, who: Caller) -> tuple[str, str]:
    reply = await app.run_command(who, "/web")
    assert reply.ok, reply.plain()
    match = LINK.search(reply.plain())
    assert match, reply.plain()
    return match.group(1), match.group(2)


def browser() -> aiohttp.ClientSession:
    # A browser keeps cookies for the loopback address as for any host.
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True),
                                 headers={"Accept": "text/html"})


async def sign_in(app: Switchboard, who: Caller, session: aiohttp.ClientSession) -> None:
    url, token = await link_of(app, who)
    async with session.get(url) as resp:  # the confirm page: uses nothing
        assert resp.status == 200
        page = await resp.text()
        assert "Sign in" in page and token in page
        assert resp.headers["Content-Security-Policy"] == CSP
        assert resp.headers["Referrer-Policy"] == "same-origin"
    origin = app.listener.url
    async with session.post(origin + "/signin", data={"token": token},
                            headers={"Origin": origin}, allow_redirects=False) as resp:
        assert resp.status == 303, await resp.text()
        assert resp.headers["Location"] == "/"
        cookie = resp.cookies[SESSION_COOKIE]
        assert cookie["httponly"] and cookie["samesite"] == "Strict"


async def csrf_of(app: Switchboard, session: aiohttp.ClientSession) -> str:
    """The session's CSRF token, as the pages hold it (read from the store's row here)."""
    rows = await app.store.web.list("session")
    cookie = session.cookie_jar.filter_cookies(URL(app.listener.url))[SESSION_COOKIE].value
    holder = await app.api.web.holder(cookie, "session")
    assert holder is not None and any(r.id == holder.credential_id for r in rows)
    return holder.csrf


async def test_a_link_signs_in_once_and_the_session_acts_as_its_operator(app):
    async with browser() as b:
        await sign_in(app, ALICE, b)
        csrf = await csrf_of(app, b)
        # The session runs commands as alice, through the same runner: an audit row like chat's.
        async with b.post(app.listener.url + "/api/v1/agents", json={},
                          headers={"X-CSRF-Token": csrf, "Origin": app.listener.url}) as resp:
            body = await resp.json()
            assert resp.status == 200 and body["ok"], body
    rows = await app.store.audit.recent(20)
    assert any(r.action == "signin" and r.ok and r.user_id == ALICE.id and r.platform == "web"
               for r in rows)
    assert any(r.action == "agents" and r.user_id == ALICE.id and r.platform == "web"
               for r in rows)


async def test_a_used_an_expired_and_a_forged_link_are_refused(app):
    url, token = await link_of(app, ALICE)
    async with browser() as b:
        await sign_in_with(b, app, token, expect=303)
    async with browser() as b2:  # the same link again, from another browser
        async with b2.get(url) as resp:
            assert resp.status == 410 and "already used" in await resp.text()
        page = await sign_in_with(b2, app, token, expect=403)
        assert "already used" in page and "/web" in page
        assert SESSION_COOKIE not in {c.key for c in b2.cookie_jar}
        page = await sign_in_with(b2, app, "x" * 43, expect=403)
        assert "not a sign-in link" in page
    # Expired: a link made ten minutes and a second ago.
    _url, old = await link_of(app, ALICE)
    await app.store.db.execute("UPDATE web_credentials SET expires_at=expires_at-601"
                               " WHERE kind='link' AND used_at IS NULL")
    async with browser() as b3:
        page = await sign_in_with(b3, app, old, expect=403)
        assert "expired" in page
    refused = [r for r in await app.store.audit.recent(20) if r.action == "signin" and not r.ok]
    assert len(refused) == 3
    # No row holds a link or a session's secret.
    dump = json.dumps([list(r) for r in await app.store.db.fetchall("SELECT * FROM audit")])
    assert token not in dump and old not in dump


async def sign_in_with(b: aiohttp.ClientSession, app: Switchboard, token: str, *,
                       expect: int) -> str:
    origin = app.listener.url
    async with b.post(origin + "/signin", data={"token": token}, headers={"Origin": origin},
                      allow_redirects=False) as resp:
        assert resp.status == expect, await resp.text()
        return await resp.text()


async def test_a_sign_in_posted_from_another_site_is_refused(app):
    _url, token = await link_of(app, ALICE)
    async with browser() as b:
        async with b.post(app.listener.url + "/signin", data={"token": token},
                          headers={"Origin": "https://evil.example"},
                          allow_redirects=False) as resp:
            assert resp.status == 403
    assert await app.api.web.link_state(token) == "ok"  # not spent by the forged post


async def test_a_change_without_the_csrf_token_changes_nothing(app):
    async with browser() as b:
        await sign_in(app, ALICE, b)
        origin = app.listener.url
        # A forged form post: the cookie goes along (same site), the CSRF token does not.
        async with b.post(origin + "/api/v1/spawn", json={"name": "w", "prompt": "hi"},
                          headers={"Origin": origin}) as resp:
            assert resp.status == 403
            assert "CSRF" in await resp.text()
        # A wrong token, and the right token from another origin.
        csrf = await csrf_of(app, b)
        async with b.post(origin + "/api/v1/spawn", json={"name": "w", "prompt": "hi"},
                          headers={"Origin": origin, "X-CSRF-Token": "nope"}) as resp:
            assert resp.status == 403
        async with b.post(origin + "/api/v1/spawn", json={"name": "w", "prompt": "hi"},
                          headers={"Origin": "http://evil.example",
                                   "X-CSRF-Token": csrf}) as resp:
            assert resp.status == 403
        # A GET never changes anything.
        async with b.get(origin + "/api/v1/spawn?name=w&prompt=hi") as resp:
            assert resp.status == 405
    assert app.api.agents(include_ended=True) == ()
    refused = [r for r in await app.store.audit.recent(20) if r.action == "refused"]
    assert len(refused) == 3 and all(r.user_id == ALICE.id for r in refused)


async def test_no_session_and_a_role_too_low(app):
    origin = app.listener.url
    async with aiohttp.ClientSession() as anon:
        async with anon.get(origin + "/api/v1/agents") as resp:
            assert resp.status == 401
            body = await resp.json()
            assert "/web" in body["fix"]
    async with browser() as b:
        await sign_in(app, VIC, b)
        csrf = await csrf_of(app, b)
        async with b.post(origin + "/api/v1/spawn", json={"name": "w", "prompt": "hi"},
                          headers={"Origin": origin, "X-CSRF-Token": csrf}) as resp:
            body = await resp.json()
            assert resp.status == 403 and not body["ok"]
            assert "operator role" in body["text"]
        async with b.get(origin + "/api/v1/agents") as resp:
            assert resp.status == 200
    assert app.api.agents(include_ended=True) == ()


async def test_tokens_from_chat_work_until_revoked(app):
    reply = await app.run_command(ALICE, "/token new nightly-report")
    assert reply.ok, reply.plain()
    secret = next(b.text for b in reply.blocks if b.style == "code")
    token_id = re.search(r"API token (t-\w+)", reply.plain()).group(1)
    origin = app.listener.url
    auth = {"Authorization": f"Bearer {secret}"}
    async with aiohttp.ClientSession(headers=auth) as s:
        async with s.get(origin + "/api/v1/status") as resp:
            body = await resp.json()
            assert resp.status == 200 and body["ok"] and "agents" in body["data"]
        listed = await app.run_command(ALICE, "/token list")
        assert token_id in listed.plain() and secret not in listed.plain()
        # A viewer cannot revoke an admin's token.
        refused = await app.run_command(VIC, f"/token revoke {token_id}")
        assert not refused.ok and "not yours" in refused.plain()
        assert (await app.run_command(ALICE, f"/token revoke {token_id}")).ok
        async with s.get(origin + "/api/v1/status") as resp:
            assert resp.status == 401
            assert "revoked" in (await resp.json())["error"]
    rows = await app.store.audit.recent(30)
    assert any(r.action == "status" and r.platform == "api" and r.user_id == ALICE.id
               for r in rows)
    assert any(r.action == "refused" and r.platform == "api" and r.args == "GET /api/v1/status"
               for r in rows)
    dump = json.dumps([list(r) for r in await app.store.db.fetchall("SELECT * FROM audit")])
    assert secret not in dump
    assert "API token" in dump  # the issue is recorded, the secret masked


async def test_the_kill_switch_ends_every_session_and_token(app):
    reply = await app.run_command(ALICE, "/token new ci")
    secret = next(b.text for b in reply.blocks if b.style == "code")
    _url, unused_link = await link_of(app, ALICE)
    origin = app.listener.url
    async with browser() as b:
        await sign_in(app, ALICE, b)
        csrf = await csrf_of(app, b)
        async with b.post(origin + "/api/v1/killall", json={"confirm": "confirm"},
                          headers={"Origin": origin, "X-CSRF-Token": csrf}) as resp:
            assert resp.status == 200, await resp.text()
        await wait_for(lambda: app.api.halted, 10, "the kill switch")
        async with b.get(origin + "/api/v1/status") as resp:
            assert resp.status == 401  # this browser's own session ended too
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {secret}"}) as s:
        async with s.get(origin + "/api/v1/status") as resp:
            assert resp.status == 401
    assert await app.api.web.link_state(unused_link) == "revoked"
    # While halted a new link still works (looking, and an admin's release); no new token.
    async with browser() as b:
        await sign_in(app, ALICE, b)
    refused = await app.run_command(ALICE, "/token new again")
    assert not refused.ok and "kill switch" in refused.plain()


async def test_malformed_calls_say_what_was_wrong(app):
    reply = await app.run_command(ALICE, "/token new script")
    secret = next(b.text for b in reply.blocks if b.style == "code")
    origin = app.listener.url
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {secret}"}) as s:
        async with s.post(origin + "/api/v1/spawn", data=b"{not json",
                          headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400 and "not valid JSON" in (await resp.json())["error"]
        async with s.post(origin + "/api/v1/spawn", json={"name": "w", "promtp": "x"}) as resp:
            body = await resp.json()
            assert resp.status == 400 and "promtp" in body["error"] and "prompt" in body["fix"]
        async with s.post(origin + "/api/v1/nosuch", json={}) as resp:
            assert resp.status == 404
        async with s.post(origin + "/api/v1/pause", json={"agent": "ghost"}) as resp:
            body = await resp.json()
            assert resp.status == 422 and not body["ok"] and "ghost" in body["text"]
        async with s.get(origin + "/api/v1/openapi.json") as resp:
            spec = await resp.json()
            spawn = spec["paths"]["/api/v1/spawn"]["post"]
            assert spawn["x-role"] == "operator"
            props = spawn["requestBody"]["content"]["application/json"]["schema"]["properties"]
            assert {"name", "prompt"} <= set(props)
            assert "get" in spec["paths"]["/api/v1/agents"]
            assert "get" not in spec["paths"]["/api/v1/kill"]


async def test_the_console_operator_signs_in_with_a_link_from_the_console(app):
    """Whoever holds the terminal is an admin, so /web from the console gives a link that
    works (the console registers its user as an operator when it starts)."""
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    task = asyncio.create_task(Console(app.console_context(), stdin=os.fdopen(read_fd),
                                       stdout=out).run())
    try:
        await wait_for(lambda: "Switchboard console" in out.getvalue(), 10, "the banner")
        await asyncio.to_thread(os.write, write_fd, b"/web\n")
        await wait_for(lambda: LINK.search(out.getvalue()), 10, "the link")
    finally:
        os.write(write_fd, b"/quit\n")
        os.close(write_fd)
        await asyncio.wait_for(task, 30)
    url, token = LINK.search(out.getvalue()).groups()
    async with browser() as b:
        await sign_in_with(b, app, token, expect=303)
        async with b.get(app.listener.url + "/api/v1/status") as resp:
            assert resp.status == 200
    user = getpass.getuser()
    row = await app.api.operator("console", user)
    assert row is not None and row.role == "admin" and row.added_by == "console"


async def test_web_without_a_listener_says_how_to_turn_it_on(quiet_app):
    """No http_port: /web refuses with the setting to change, and issues no link."""
    await quiet_app.api.add_operator("telegram", "1", "alice", "admin", added_by="test")
    reply = await quiet_app.run_command(ALICE, "/web")
    assert not reply.ok
    assert "no HTTP listener" in reply.plain() and "SWITCHBOARD_HTTP_PORT" in reply.plain()
    assert await quiet_app.store.web.list("link", live_only=False) == []
