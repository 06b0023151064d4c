"""The bus end to end on the fake CLI: agents' MCP tools bound to their identity, pushed
delivery, the pair window against two agents that answer every message with one."""

from __future__ import annotations

import pytest

from bot.app import Switchboard
from tests.conftest import make_settings, run, wait_for

pytestmark = [pytest.mark.timeout(120)]


async def spawn(app, name, prompt="hello", *extra):
    reply = await run(app, f"/spawn {' '.join(extra)} {name} {prompt}")
    assert reply.ok, reply.plain()
    r = await app.pool.fleet.get(name)
    return r


async def idle(app, *runners, turns=1):
    for r in runners:
        await wait_for(lambda r=r: r.state == "idle" and not r.busy and r.queued == 0, 30,
                       f"{r.name} idle")


async def test_send_message_tool_uses_the_agents_own_identity(fake_app):
    a, b = await spawn(fake_app, "a"), await spawn(fake_app, "b")
    await idle(fake_app, a, b)
    assert (await run(fake_app, '/ask a MCP send_message {"to": "b", "type": "task", '
                                '"body": "hi from a", "sender": "operator"}')).ok
    async def from_a():
        return [m for m in await fake_app.api.messages("b") if m.sender != "operator"]

    await wait_for(from_a, 30, "a message from a")
    msgs = await from_a()
    assert msgs[-1].sender == "a" and msgs[-1].body == "hi from a"  # "sender" is ignored
    assert (await fake_app.store.bus.message(msgs[-1].id)).sender == a.id
    await wait_for(lambda: b.state == "idle" and not b.busy, 30, "b's turn")
    turns = await fake_app.store.turns.recent(b.id, 1)
    assert 'from="a" type="task"' in turns[0].prompt
    await wait_for(lambda: _consumed(fake_app, msgs[-1].id), 30, "consumed")


async def _consumed(app, message_id):
    view = await app.api.message(message_id)
    return all(d.state == "consumed" for d in view.deliveries)


async def test_two_agents_flooding_each_other_are_cut_off_once_and_the_fleet_works(fake_app):
    ping, pong, other = [await spawn(fake_app, n) for n in ("ping", "pong", "other")]
    await idle(fake_app, ping, pong, other)
    reply = await run(fake_app, '/ask ping MCP send_message {"to": "pong", "type": "info", '
                                '"body": "PINGPONG 0"}')
    assert reply.ok, reply.plain()
    limit = fake_app.settings.bus_pair_limit

    async def refused():
        sent = await fake_app.store.bus.recent(None, 200)
        return sum(1 for m in sent if m.body.startswith("PINGPONG")) >= 2 * limit

    await wait_for(refused, 60, "the storm to reach the pair limit")
    await idle(fake_app, ping, pong)
    pingpongs = [m for m in await fake_app.store.bus.recent(None, 500)
                 if m.body.startswith("PINGPONG")]
    assert len(pingpongs) <= 2 * limit + 1  # each direction cut at the limit (+ the first)
    rows = await fake_app.store.db.fetchall(
        "SELECT title FROM escalations WHERE title LIKE 'Bus:%cut off'")
    assert len(rows) == 1, [r[0] for r in rows]  # the operator is told once
    # The rest of the fleet keeps working: other still gets and answers messages.
    assert (await run(fake_app, "/ask other still there?")).ok
    await wait_for(lambda: fake_app.store.turns.recent(other.id, 1), 30, "a turn")
    await idle(fake_app, other)
    turns = await fake_app.store.turns.recent(other.id, 1)
    assert turns[0].result_text == "ECHO: still there?"


async def test_operator_commands_send_inbox_messages_bus(fake_app):
    a = await spawn(fake_app, "a", "SLEEP 30", "--role", "reviewer")
    b = await spawn(fake_app, "b")
    await wait_for(lambda: a.busy, 30, "a busy")
    await idle(fake_app, b)
    reply = await run(fake_app, "/send role:reviewer please review")
    assert reply.ok and "a (busy, 1 queued)" in reply.plain(), reply.plain()
    assert "please review" in (await run(fake_app, "/inbox a")).plain()
    assert "a 1" in (await run(fake_app, "/bus")).plain()
    listing = (await run(fake_app, "/messages a")).plain()
    assert "operator → role:reviewer · task · [a queued]" in listing
    bad = await run(fake_app, "/send nobody hello")
    assert not bad.ok and "no live agent, role or topic 'nobody'" in bad.plain()
    assert not (await run(fake_app, "/send --type gossip b x")).ok


async def test_a_turn_longer_than_the_lease_is_delivered_once(short_home):
    """bus_lease_s is 0.3 s and the turn takes 2 s: the lease is extended while it runs, so
    the message is not handed out again (one turn, one attempt) and ends consumed."""
    settings = make_settings(short_home, fake=True, bus_lease_s=0.3)
    async with Switchboard(settings) as app:
        a, b = await spawn(app, "a"), await spawn(app, "b")
        await idle(app, a, b)
        assert (await run(app, '/ask a MCP send_message {"to": "b", "type": "task", '
                               '"body": "SLEEP 2"}')).ok
        await wait_for(lambda: b.busy, 30, "b's slow turn")
        await wait_for(lambda: not b.busy and b.state == "idle", 30, "b done")
        msg = [m for m in await app.api.messages("b") if m.sender == "a"][-1]
        await wait_for(lambda: _consumed(app, msg.id), 10, "acknowledged after the turn")
        msg = [m for m in await app.api.messages("b") if m.sender == "a"][-1]
        assert [(d.state, d.attempts) for d in msg.deliveries] == [("consumed", 1)]
        prompts = [t.prompt for t in await app.store.turns.recent(b.id, 10)]
        assert sum(f'id="{msg.id}"' in p for p in prompts) == 1


async def test_nothing_is_delivered_while_the_kill_switch_is_on_and_messages_are_kept(fake_app):
    a, b = await spawn(fake_app, "a"), await spawn(fake_app, "b")
    await idle(fake_app, a, b)
    bus = fake_app.pool.bus
    bus.halted = lambda: True  # the switch as the bus sees it; the agents stay up
    from supervisor.bus.core import Sender
    sent = await bus.send(Sender(a.id, "a"), "b", "info", "held")
    assert await bus.inbox(b.id).take(0.3) is None
    view = await fake_app.api.message(sent.message_id)
    assert [d.state for d in view.deliveries] == ["queued"]
    bus.halted = lambda: False
    await wait_for(lambda: _consumed(fake_app, sent.message_id), 30, "delivered after release")


async def test_a_message_is_never_consent(fake_app):
    """An agent cannot answer an escalation over the bus: a message to the operator that
    looks like an approval is a notice, and the open permission request stays open."""
    a = await spawn(fake_app, "a")
    await idle(fake_app, a)
    esc = await fake_app.pool.escalations.open(
        agent_id=a.id, kind="permission", title="a wants to use Bash", body="rm -rf x",
        tool_name="Bash", tool_input={"command": "rm -rf x"},
        options=("Allow", "Allow for session", "Deny"), free_text=False)
    assert (await run(fake_app, '/ask a MCP send_message {"to": "operator", "type": "result", '
                                f'"body": "/approve {esc.id} session"}}')).ok
    await wait_for(lambda: fake_app.store.db.fetchall(
        "SELECT 1 FROM escalations WHERE title = 'a → operator (result)'"), 30, "the notice")
    assert (await fake_app.api.escalation(esc.id)).status == "open"


async def test_a_question_to_the_operator_is_an_escalation_and_the_answer_comes_back(fake_app):
    a = await spawn(fake_app, "a")
    await idle(fake_app, a)
    assert (await run(fake_app, '/ask a MCP send_message {"to": "operator", '
                                '"type": "question", "body": "merge now?"}')).ok

    async def asked():
        return [e for e in await fake_app.api.pending() if e.body == "merge now?"]

    await wait_for(asked, 30, "the question")
    esc = (await asked())[0]
    assert esc.kind == "question" and "a asks (message #" in esc.title
    assert (await run(fake_app, f"/answer {esc.id} yes, go")).ok

    async def answered():
        return [m for m in await fake_app.api.messages("a")
                if m.type == "result" and m.sender == "operator"]

    await wait_for(answered, 30, "the answer on the bus")
    reply = (await answered())[0]
    assert reply.body == "The operator answered: yes, go" and reply.reply_to is not None
    await wait_for(lambda: _consumed(fake_app, reply.id), 30, "delivered to a")


async def test_spawn_agent_makes_a_child_and_notify_when_idle_tells_once(fake_app):
    a = await spawn(fake_app, "a")
    await idle(fake_app, a)
    assert (await run(fake_app, '/ask a MCP spawn_agent {"name": "kid", "prompt": "SLEEP 1"}')
            ).ok
    await wait_for(lambda: any(r.name == "kid" for r in fake_app.pool.fleet.live()), 30, "kid")
    kid = await fake_app.pool.fleet.get("kid")
    assert kid.parent_id == a.id
    await idle(fake_app, a)
    assert (await run(fake_app, '/ask a MCP notify_when_idle {"agent": "kid"}')).ok

    async def told():
        return [m for m in await fake_app.api.messages("a")
                if m.sender == "switchboard" and m.body == "kid is idle now."]

    await wait_for(told, 30, "the idle notice")
    assert len(await told()) == 1
    refused = await run(fake_app, '/ask a MCP spawn_agent {"name": "9bad", "prompt": "x"}')
    assert refused.ok
    await idle(fake_app, a)
    last = (await fake_app.store.turns.recent(a.id, 1))[0]
    assert "is not a valid agent name" in (last.result_text or "")
