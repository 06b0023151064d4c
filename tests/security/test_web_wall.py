"""Hostile agents against the web console and the HTTP API: the real CLI, every tool allowed, the
listener on every address of the host. With egress `open` (the agent reaches whatever the host
reaches, the listener included) it probes the API with no token, a guessed token, a guessed
session cookie and a forged CSRF header, tries the sign-in with a guessed link, and looks for the
operator's real token in the supervisor's files: nothing works, nothing changes, and the token
the operator holds appears nowhere the agent could read. In `model-only` mode it does not reach
the listener at all."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from commands.base import Caller, Role
from tests.conftest import free_port
from tests.security.conftest import bash_script, spawn_fleet, tool_calls
from tests.security.test_egress import host_address

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

ALICE = Caller("telegram:5", "alice", Role.ADMIN, "telegram")


def probes(base: str, home: str) -> str:
    guess = "sbt_" + "A" * 43
    return rf"""
probe() {{ echo "== $1"; shift; out=$("$@" 2>&1); rc=$?; printf '%s' "$out" | head -c 600
    echo; echo "rc=$rc"; }}
B={base}; J=Content-Type:application/json; K='{{"confirm":"confirm"}}'
C=Cookie:switchboard_session=guessed; T="Authorization: Bearer {guess}"
probe none curl -sS -m 5 -X POST -H $J -d "$K" $B/api/v1/killall
probe token curl -sS -m 5 -X POST -H "$T" -H $J -d "$K" $B/api/v1/killall
probe cookie curl -sS -m 5 -X POST -H $C -H X-CSRF-Token:x -H Origin:$B -H $J -d "$K" \
    $B/api/v1/killall
probe act curl -sS -m 5 -X POST -H $C -d verb=killall $B/act
probe signin curl -sS -m 5 -X POST -H Origin:$B -d token=guessed $B/signin
probe spawn curl -sS -m 5 -X POST -H "$T" -H $J -d '{{"name":"mole","prompt":"hi"}}' \
    $B/api/v1/spawn
probe files sh -c 'ls -la {home} 2>&1; grep -rl sbt_ {home} 2>&1 | head'
echo "== done"
"""


async def test_an_agent_that_reaches_the_listener_gets_nothing(hostile_settings, mock_api,
                                                               tmp_path):
    port = free_port()
    settings = hostile_settings.with_(egress="open", http_port=port,
                                      http_host="0.0.0.0")  # noqa: S104
    async with Switchboard(settings) as app:
        await app.api.add_operator("telegram", "5", "alice", "admin", added_by="test")
        reply = await app.run_command(ALICE, "/token new ops")
        token = next(b.text for b in reply.blocks if b.style == "code")
        base = f"http://{host_address()}:{port}"
        [agent] = await spawn_fleet(app, ["prober"], bash_script(
            probes(base, str(settings.home))))
        out = "\n".join(c.result for c in tool_calls(mock_api))
        assert "== done" in out, out[-3000:]
        # It reached the listener (open egress), and every call was refused, saying why.
        expected = {"none": "Not signed in", "cookie": "Not signed in", "act": "Not signed in",
                    "token": "does not work", "spawn": "does not work",
                    "signin": "not a sign-in link"}
        for probe, refusal in expected.items():
            section = out.split(f"== {probe}\n", 1)[1].split("\n== ", 1)[0]
            assert refusal in section and '"ok": true' not in section, (probe, section)
        assert not app.api.halted
        assert [a.name for a in app.api.agents(include_ended=True)] == ["prober"]
        assert token not in out  # the operator's token is nowhere the agent could read
        refused = [r for r in await app.store.audit.recent(50) if r.action == "refused"]
        assert any(r.platform == "api" for r in refused)  # the guessed token, recorded
        assert agent.state == "idle"
        # The operator's own token still works: the probes revoked nothing.
        assert await app.api.web.holder(token, "token") is not None


async def test_a_contained_agent_does_not_reach_the_listener(hostile_settings, mock_api):
    port = free_port()
    settings = hostile_settings.with_(egress="model-only", http_port=port,
                                      http_host="0.0.0.0")  # noqa: S104
    async with Switchboard(settings) as app:
        base = f"http://{host_address()}:{port}"
        await spawn_fleet(app, ["boxed"], bash_script(
            f"curl -sS -m 5 {base}/healthz; echo rc=$?; "
            f"curl -sS -m 5 http://127.0.0.1:{port}/healthz; echo rc=$?; echo '== done'"))
        out = "\n".join(c.result for c in tool_calls(mock_api))
        assert "== done" in out, out[-3000:]
        assert '"alive"' not in out, out
        assert "rc=0" not in out, out
