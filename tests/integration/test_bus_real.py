"""The bus with the real claude CLI and the mock Anthropic API: agents message each other
through their in-process MCP tools; pushed delivery, one turn for everything pending, routing
by name, role, topic and broadcast, and an interrupt that interrupts."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run, wait_for

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

SEND = "mcp__switchboard__send_message"


def tool(name: str, **args: object) -> str:
    return f"TOOL {name} {json.dumps(args)}"


async def idle(app, runner, what=""):
    await wait_for(lambda: runner.state == "idle" and not runner.busy and not runner.queued,
                   90, what or f"{runner.name} idle")


async def turns(app, runner):
    return list(reversed(await app.store.turns.recent(runner.id, 50)))


async def test_task_and_result_between_two_agents_and_three_queued_as_one_turn(real_app):
    b = await _spawn(real_app, "bee", "TEXT: ready")
    await idle(real_app, b)
    # bee answers a task with a result: the task's body is what the mock makes bee do.
    answer = tool(SEND, to="ant", type="result", body="TEXT: got your result")
    # bee takes a moment first: ant's own first turn ends, its queued SLEEP starts alone, and
    # the result lands while that one runs (not before it, which would join the two).
    a = await _spawn(real_app, "ant", tool(SEND, to="bee", type="task", body=f"SLEEP 2: {answer}"))
    # Queued behind ant's first turn: ant is busy when bee's result comes back.
    assert (await run(real_app, "/ask ant SLEEP 5")).ok
    await wait_for(lambda: a.busy and a.queued == 0, 60,
                   "ant's second turn")
    await wait_for(_has_result(real_app, a), 60, "bee's result stored")
    for text in ("TEXT: one", "TEXT: two"):
        assert (await run(real_app, f"/send --type info ant {text}")).ok
    await idle(real_app, a, "ant done with all")
    ta = await turns(real_app, a)
    assert [t.prompt.split()[0] for t in ta[:2]] == ["TOOL", "SLEEP"]
    third = ta[2]
    ids = [int(x) for x in re.findall(r'<message n="\d" of="3" id="(\d+)"', third.prompt)]
    assert len(ids) == 3 and ids == sorted(ids)  # one turn, in order
    assert third.prompt.count("written=") == 3
    assert 'from="bee" type="result"' in third.prompt
    # Delivered when the busy turn ended, never mid-turn.
    assert ta[1].ended_at is not None and third.started_at >= ta[1].ended_at
    result = (await _results(real_app, a))[0]
    assert result.created_at < ta[1].ended_at
    # bee's own turn: the task from ant, and the result it sent is consumed by ant.
    tb = await turns(real_app, b)
    assert any('from="ant" type="task"' in t.prompt for t in tb)

    async def consumed_by_ant() -> bool:  # acknowledged just after ant's turn ends
        view = await real_app.api.message(result.id)
        return [(d.recipient, d.state) for d in view.deliveries] == [("ant", "consumed")]

    await wait_for(consumed_by_ant, 10, "bee's result consumed by ant")


async def _results(app, a):
    return [m for m in await app.store.bus.recent(a.id, 50)
            if m.type == "result" and m.sender != a.id]


def _has_result(app, a):
    async def check():
        return await _results(app, a)
    return check


async def _spawn(app, name, prompt, *extra):
    reply = await run(app, f"/spawn {' '.join(extra)} {name} {prompt}")
    assert reply.ok, reply.plain()
    return await app.pool.fleet.get(name)


async def test_role_topic_broadcast_routing_and_interrupt(real_app):
    rev = await _spawn(real_app, "rev", "TEXT: hi", "--role", "reviewer")
    sub = await _spawn(real_app, "sub", tool("mcp__switchboard__subscribe", topic="news"))
    plain = await _spawn(real_app, "plain", "TEXT: hi")
    for r in (rev, sub, plain):
        await idle(real_app, r)
    sent = {}
    for to in ("role:reviewer", "topic:news", "*"):
        reply = await run(real_app, f"/send --type info {to} TEXT: to {to}")
        assert reply.ok, reply.plain()
        sent[to] = int(re.search(r"#(\d+)", reply.plain()).group(1))
    for r in (rev, sub, plain):
        await idle(real_app, r)
    reached = {to: sorted(d.recipient for d in (await real_app.api.message(i)).deliveries)
               for to, i in sent.items()}
    assert reached == {"role:reviewer": ["rev"], "topic:news": ["sub"],
                       "*": ["plain", "rev", "sub"]}

    async def all_consumed() -> bool:  # acknowledged just after each turn ends
        views = [await real_app.api.message(i) for i in sent.values()]
        return all(d.state == "consumed" for v in views for d in v.deliveries)

    await wait_for(all_consumed, 10, "every delivery consumed")
    # An interrupt ends the running turn and is the next one.
    assert (await run(real_app, "/ask plain SLEEP 60")).ok
    await wait_for(lambda: plain.busy, 60, "plain busy")
    reply = await run(real_app, "/send --type interrupt plain TEXT: stop now")
    assert reply.ok, reply.plain()
    await idle(real_app, plain, "plain interrupted and done")
    tp = await turns(real_app, plain)
    sleeping = next(t for t in tp if t.prompt == "SLEEP 60")
    assert sleeping.status == "interrupted" and sleeping.ended_at - sleeping.started_at < 30
    assert 'type="interrupt"' in tp[-1].prompt and tp[-1].status == "ok"
