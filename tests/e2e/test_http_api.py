"""The HTTP API end to end, with a token from chat, on the real claude CLI against the mock
Anthropic API: spawn -> the permission request -> approve (the file is written) -> ask -> kill;
a revoked token and a token after the kill switch are refused; every call is in the audit
table as from the API, with the token's operator."""

from __future__ import annotations

import re

import aiohttp
import pytest

from bot.app import Switchboard
from commands.base import Caller, Role
from tests.conftest import free_port, wait_for

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

ALICE = Caller("telegram:7", "alice", Role.ADMIN, "telegram")


async def new_token(app: Switchboard, label: str) -> str:
    reply = await app.run_command(ALICE, f"/token new {label}")
    assert reply.ok, reply.plain()
    return next(b.text for b in reply.blocks if b.style == "code")


async def call(s: aiohttp.ClientSession, url: str, command: str, **params: object
               ) -> tuple[int, dict]:
    async with s.post(f"{url}/api/v1/{command}", json=params) as resp:
        return resp.status, await resp.json()


async def test_spawn_approve_ask_kill_with_a_token(real_settings, mock_api, tmp_path):
    settings = real_settings.with_(http_port=free_port())
    async with Switchboard(settings) as app:
        await app.api.add_operator("telegram", "7", "alice", "admin", added_by="test")
        token = await new_token(app, "flow")
        url = app.listener.url
        async with aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {token}"}) as s:
            status, body = await call(s, url, "spawn", name="builder", cwd=str(tmp_path),
                                      prompt="BASH: touch from-api.txt")
            assert status == 200 and body["ok"], body

            async def request_open() -> bool:
                async with s.get(f"{url}/api/v1/pending") as resp:
                    data = (await resp.json())["data"]["pending"]
                    return any(p["kind"] == "permission" for p in data)

            await wait_for(request_open, 60, "the permission request")
            async with s.get(f"{url}/api/v1/pending") as resp:
                pending = (await resp.json())["data"]["pending"]
            request = next(p for p in pending if p["kind"] == "permission")
            assert request["detail"] == "touch from-api.txt"
            assert not (tmp_path / "from-api.txt").exists()

            status, body = await call(s, url, "approve", id=request["id"])
            assert status == 200 and body["ok"], body
            await wait_for(lambda: (tmp_path / "from-api.txt").exists(), 60, "the approved tool")
            runner = await app.pool.fleet.get("builder")
            await wait_for(lambda: runner.state == "idle", 60, "the turn to end")

            status, body = await call(s, url, "ask", agent="builder", text="say done")
            assert status == 200 and body["ok"], body
            await wait_for(lambda: "say done" in mock_api.user_texts(), 60, "the asked turn")
            await wait_for(lambda: runner.state == "idle", 60, "the asked turn to end")

            async with s.get(f"{url}/api/v1/status") as resp:
                agents = (await resp.json())["data"]["agents"]
                assert [a["name"] for a in agents] == ["builder"]
            status, body = await call(s, url, "kill", agent="builder")
            assert status == 200 and body["ok"], body
            await wait_for(lambda: runner.state == "killed", 30, "the agent to end")

            # A revoked token is refused, and so is the call it would have made.
            doomed = await new_token(app, "doomed")
            listed = (await app.run_command(ALICE, "/token list")).plain()
            revoke_id = re.search(r"^(t-\w+) doomed", listed, re.MULTILINE)
            assert revoke_id, listed
            assert (await app.run_command(ALICE, f"/token revoke {revoke_id.group(1)}")).ok
            async with aiohttp.ClientSession(
                    headers={"Authorization": f"Bearer {doomed}"}) as gone:
                status, body = await call(gone, url, "spawn", name="x", prompt="hi")
                assert status == 401 and "revoked" in body["error"]

            # The kill switch, pulled through the API, ends this very token too.
            status, body = await call(s, url, "killall", confirm="confirm")
            assert status == 200, body
            await wait_for(lambda: app.api.halted, 10, "the kill switch")
            status, body = await call(s, url, "agents")
            assert status == 401
        assert app.api.agents(include_ended=False) == ()

        rows = [r for r in await app.store.audit.recent(100) if r.platform == "api"]
        # The kill switch's own row (it also fires from a file or the bucket: no operator id).
        assert any(r.action == "killswitch" and r.user_name == "alice" for r in rows)
        rows = [r for r in rows if r.action != "killswitch"]
        # The two calls with a token that no longer worked: recorded, with no operator.
        refused = [r for r in rows if r.action == "refused"]
        assert [(r.user_id, r.ok) for r in refused] == [("api:unknown", 0)] * 2
        rows = [r for r in rows if r.action != "refused"]
        actions = [r.action for r in reversed(rows)]
        for action in ("spawn", "pending", "approve", "ask", "status", "kill", "killall"):
            assert action in actions, actions
        assert all(r.user_id == ALICE.id for r in rows), [(r.action, r.user_id) for r in rows]
        approve = next(r for r in rows if r.action == "approve")
        assert request["id"] in approve.args and approve.ok
