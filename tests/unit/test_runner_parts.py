"""The runner's pure parts: the transition table, SDK message records, cost deltas, the inbox."""

from __future__ import annotations

import asyncio

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from supervisor.agents.lifecycle import TRANSITIONS, InvalidTransition, allowed, check
from supervisor.agents.records import NO_TOOL, cost_delta, record_of, turn_status
from supervisor.bus.inbox import MemoryInbox
from supervisor.events import AgentState as S


def result(total: float, usage: dict | None = None, **kw: object) -> ResultMessage:
    base = dict(subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=1,
                session_id="s", total_cost_usd=total, usage={"input_tokens": 3,
                                                             "output_tokens": 4},
                result="done")
    base.update(kw)
    msg = ResultMessage(**base)  # type: ignore[arg-type]
    if usage is not None:
        msg.model_usage = usage
    return msg


def test_every_state_has_a_row_and_killed_is_final():
    assert set(TRANSITIONS) == set(S)
    for new in S:
        assert not allowed(S.KILLED, new)
    with pytest.raises(InvalidTransition, match="from killed to working"):
        check(S.KILLED, S.WORKING)


@pytest.mark.parametrize(("old", "new"), [
    (S.STARTING, S.WORKING), (S.WORKING, S.WAITING), (S.WAITING, S.WORKING),
    (S.WORKING, S.STALLED), (S.STALLED, S.WORKING), (S.WORKING, S.IDLE), (S.IDLE, S.PAUSED),
    (S.PAUSED, S.IDLE), (S.FAILED, S.STARTING), (S.STOPPED, S.STARTING), (S.IDLE, S.KILLED),
    (S.IDLE, S.IDLE),
])
def test_the_lifecycle_the_runner_uses_is_allowed(old, new):
    check(old, new)


@pytest.mark.parametrize(("old", "new"), [(S.STOPPED, S.PAUSED), (S.FAILED, S.WAITING),
                                          (S.STOPPED, S.STALLED)])
def test_nonsense_is_refused(old, new):
    assert not allowed(old, new)


def test_records_of_each_message_kind():
    init = record_of(SystemMessage(subtype="init", data={"session_id": "abc"}))
    assert (init.kind, init.summary, init.session_id) == ("system", "session abc", "abc")
    asst = record_of(AssistantMessage(content=[
        TextBlock("thinking aloud"), ToolUseBlock("t1", "Bash", {"command": "ls -la"})],
        model="m"))
    assert asst.kind == "assistant" and asst.tool == "Bash"
    assert [(o.kind, o.text) for o in asst.outputs] == [("text", "thinking aloud"),
                                                       ("tool_use", "Bash: ls -la")]
    assert asst.summary == "thinking aloud\n[tool] Bash: ls -la"
    res = record_of(UserMessage(content=[ToolResultBlock("t1", "x" * 3000, True)]))
    assert res.tool == NO_TOOL and res.summary.startswith("[result error] xxx")
    assert len(res.outputs[0].text) == 2000
    done = record_of(result(0.1))
    assert done.kind == "result" and done.summary == "[success] done"


def test_cost_deltas_from_cumulative_counters():
    usage = {"m": {"costUSD": 0.5, "inputTokens": 10, "outputTokens": 20}}
    usd, per_model, base = cost_delta({}, result(0.5, usage), "m")
    assert usd == 0.5 and per_model == {"m": (0.5, 10, 20)}
    usage2 = {"m": {"costUSD": 0.75, "inputTokens": 15, "outputTokens": 30}}
    usd, per_model, base2 = cost_delta(base, result(0.75, usage2), "m")
    assert usd == pytest.approx(0.25) and per_model == {"m": (pytest.approx(0.25), 5, 10)}
    assert base == {"__total__": 0.5, "m:usd": 0.5, "m:in": 10, "m:out": 20}  # not mutated
    # A new process starts counting from zero again: its first total is the turn's cost.
    usd, _, _ = cost_delta(base2, result(0.1), "m")
    assert usd == pytest.approx(0.1)


def test_turn_status():
    assert turn_status(result(0)) == "ok"
    assert turn_status(result(0, is_error=True)) == "error"  # an API error says "success"
    assert turn_status(result(0, subtype="error_during_execution",
                              terminal_reason="aborted_streaming")) == "interrupted"


async def test_memory_inbox_order_drop_and_wake():
    box = MemoryInbox()
    assert await box.take(0.01) is None
    await box.put("a")
    await box.put("b")
    assert len(box) == 2
    taken = await box.take(1)
    assert taken is not None and taken.text == "a"
    await box.ack(taken)
    assert await box.drop_all("over budget") == 1 and len(box) == 0

    async def waiter() -> object:
        return await box.take(30)

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    box.wake()
    assert await asyncio.wait_for(task, 5) is None


def test_passing_api_errors_are_retryable_alike():
    from supervisor.agents.records import retryable_api_error

    def api_error(status: int | None) -> ResultMessage:
        msg = result(0.0, is_error=True, result=f"API Error: {status}")
        msg.api_error_status = status
        return msg

    assert retryable_api_error(api_error(529)) == 529
    assert retryable_api_error(api_error(500)) == 500
    assert retryable_api_error(api_error(401)) is None  # a bad key does not pass by itself
    assert retryable_api_error(api_error(None)) is None
    assert retryable_api_error(result(0.0)) is None  # a success is never retried
