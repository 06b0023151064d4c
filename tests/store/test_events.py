"""Conformance of EventStore: each agent's append-only event log, its tail, its ingest and its
retention steps (the latter run in a writer's transaction, as the ingest and retention do)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import Store
from store.errors import Conflict
from store.events import EventRepo, RawEvent, encode
from store.protocols import EventStore
from tests.store.conftest import T0, FakeNow, MakeAgent, Tx


@pytest.fixture
def events(store: Store) -> EventStore:
    return store.events


@pytest.fixture
async def agents(make_agent: MakeAgent) -> None:
    await make_agent("a1", "alpha")
    await make_agent("b1", "bravo")


def raw(agent_id: str, summary: str, at: float, data: object = None) -> RawEvent:
    return (agent_id, None, "text", summary, encode(data if data is not None else {}), at)


async def test_events_tail_is_the_last_n_in_order(events: EventStore, agents: None) -> None:
    for i in range(10):
        await events.append("a1", None, "text", f"e{i}", {"i": i, "path": Path("/x")})
    tail = await events.tail("a1", 3)
    assert [e.summary for e in tail] == ["e7", "e8", "e9"]
    assert tail[-1].data == {"i": 9, "path": "/x"}  # non-JSON values stored as text
    assert await events.count("a1") == 10
    assert await events.tail("nobody", 5) == []


async def test_append_returns_increasing_ids_and_stamps_the_time(events: EventStore,
                                                                 agents: None,
                                                                 clock: FakeNow) -> None:
    first = await events.append("a1", None, "tool_use", "Bash: ls", {"cmd": "ls"})
    clock.advance(1.5)
    second = await events.append("a1", None, "text", "done", '{"already": "json"}')
    assert second > first > 0
    one, two = await events.tail("a1", 10)
    assert (one.id, one.agent_id, one.turn_id, one.kind, one.summary, one.data, one.at) == (
        first, "a1", None, "tool_use", "Bash: ls", {"cmd": "ls"}, T0)
    assert (two.id, two.data, two.at) == (second, {"already": "json"}, T0 + 1.5)


async def test_an_event_can_name_its_turn(store: Store, events: EventStore,
                                          agents: None) -> None:
    turn = await store.turns.start("a1", "p")
    await events.append("a1", turn, "text", "in a turn", {})
    [row] = await events.tail("a1", 1)
    assert row.turn_id == turn


async def test_an_event_belongs_to_a_known_agent(events: EventStore) -> None:
    with pytest.raises(Conflict):
        await events.append("ghost", None, "text", "boo", {})


async def test_tails_and_counts_are_per_agent(events: EventStore, agents: None) -> None:
    await events.append("a1", None, "text", "a-1", {})
    await events.append("b1", None, "text", "b-1", {})
    await events.append("a1", None, "text", "a-2", {})
    assert [e.summary for e in await events.tail("a1", 10)] == ["a-1", "a-2"]
    assert [e.summary for e in await events.tail("b1", 10)] == ["b-1"]
    assert (await events.count("a1"), await events.count("b1"), await events.count("x")) == (
        2, 1, 0)
    assert await events.tail("a1", 0) == []


async def test_append_many_keeps_each_rows_time_and_order(events: EventStore,
                                                          agents: None) -> None:
    await events.append_many([raw("a1", "one", T0 - 30, {"n": 1}), raw("b1", "other", T0 - 20),
                              raw("a1", "two", T0 - 10, {"n": 2})])
    assert [(e.summary, e.at, e.data) for e in await events.tail("a1", 5)] == [
        ("one", T0 - 30, {"n": 1}), ("two", T0 - 10, {"n": 2})]
    await events.append_many([])
    assert await events.count("a1") == 2


async def test_insert_rows_in_a_writer_transaction(events: EventStore, agents: None,
                                                   events_tx: Tx) -> None:
    rows = [raw("a1", f"e{i}", T0 + i, {"i": i}) for i in range(5)]
    assert await events_tx(lambda c: EventRepo.insert_rows(c, rows)) == 5
    assert [e.summary for e in await events.tail("a1", 10)] == [f"e{i}" for i in range(5)]
    assert await events_tx(lambda c: EventRepo.insert_rows(c, [])) == 0


async def test_insert_rows_repairs_a_lone_surrogate(events: EventStore, agents: None,
                                                    events_tx: Tx) -> None:
    rows = [raw("a1", "bad \ud800 text", T0), raw("a1", "fine", T0)]
    assert await events_tx(lambda c: EventRepo.insert_rows(c, rows)) == 2
    assert [e.summary for e in await events.tail("a1", 5)] == ["bad ? text", "fine"]


async def test_first_kept_finds_the_first_event_not_older_than_the_cutoff(
        events: EventStore, agents: None, events_tx: Tx) -> None:
    assert await events_tx(lambda c: EventRepo.first_kept(c, T0)) is None
    await events.append_many([raw("a1", f"e{i}", T0 + 10 * i) for i in range(6)])
    ids = [e.id for e in await events.tail("a1", 10)]
    assert await events_tx(lambda c: EventRepo.first_kept(c, T0 - 1)) == ids[0]
    assert await events_tx(lambda c: EventRepo.first_kept(c, T0 + 25)) == ids[3]
    assert await events_tx(lambda c: EventRepo.first_kept(c, T0 + 30)) == ids[3]
    # every event older than the cutoff: one past the last
    assert await events_tx(lambda c: EventRepo.first_kept(c, T0 + 99)) == ids[-1] + 1


async def test_delete_before_takes_the_oldest_up_to_a_limit(events: EventStore, agents: None,
                                                            events_tx: Tx) -> None:
    await events.append_many([raw("a1", f"e{i}", T0 + i) for i in range(6)])
    ids = [e.id for e in await events.tail("a1", 10)]
    assert await events_tx(lambda c: EventRepo.delete_before(c, ids[4], 3)) == 3
    assert [e.summary for e in await events.tail("a1", 10)] == ["e3", "e4", "e5"]
    assert await events_tx(lambda c: EventRepo.delete_before(c, ids[4], 3)) == 1
    assert await events_tx(lambda c: EventRepo.delete_before(c, ids[4], 3)) == 0
    assert [e.summary for e in await events.tail("a1", 10)] == ["e4", "e5"]


async def test_delete_beyond_keeps_an_agents_newest(events: EventStore, agents: None,
                                                    events_tx: Tx) -> None:
    await events.append_many([raw("a1", f"a{i}", T0) for i in range(5)]
                             + [raw("b1", f"b{i}", T0) for i in range(5)])
    assert await events_tx(lambda c: EventRepo.delete_beyond(c, "a1", 2, 2)) == 2
    assert await events_tx(lambda c: EventRepo.delete_beyond(c, "a1", 2, 100)) == 1
    assert await events_tx(lambda c: EventRepo.delete_beyond(c, "a1", 2, 100)) == 0
    assert [e.summary for e in await events.tail("a1", 10)] == ["a3", "a4"]
    assert await events.count("b1") == 5  # another agent's rows untouched


async def test_agents_over_names_those_past_the_limit(events: EventStore, agents: None,
                                                      events_tx: Tx) -> None:
    assert await events_tx(lambda c: EventRepo.agents_over(c, 0)) == []
    await events.append_many([raw("a1", "x", T0)] * 3 + [raw("b1", "y", T0)])
    assert sorted(await events_tx(lambda c: EventRepo.agents_over(c, 0))) == ["a1", "b1"]
    assert await events_tx(lambda c: EventRepo.agents_over(c, 1)) == ["a1"]
    assert await events_tx(lambda c: EventRepo.agents_over(c, 3)) == []


async def test_tool_calls_are_read_back_from_recorded_assistant_messages(
        events: EventStore, agents: None, clock: FakeNow) -> None:
    """What `/policy test` replays: each tool_use block of each recorded assistant message
    (recorded as the ingest records it), with its agent's name and cwd, oldest first."""
    from claude_agent_sdk.types import AssistantMessage, TextBlock, ToolUseBlock

    from supervisor.agents.records import record_of

    def said(*blocks: object) -> str:
        return record_of(AssistantMessage(content=list(blocks), model="m")).data  # type: ignore[arg-type]

    await events.append("a1", None, "assistant", "old", said(
        ToolUseBlock("t0", "Bash", {"command": "ls"})))
    clock.advance(100)
    await events.append("a1", None, "assistant", "two", said(
        TextBlock("let me look"), ToolUseBlock("t1", "Bash", {"command": "make test"}),
        ToolUseBlock("t2", "Read", {"file_path": "/w/a.py"})))
    await events.append("b1", None, "text", "not a call", {"name": "Bash", "input": {},
                                                            "id": "x"})
    await events.append("b1", None, "assistant", "text only", said(TextBlock("hi")))
    await events.append("b1", None, "assistant", "one", said(
        ToolUseBlock("t3", "Write", {"file_path": "/w/b", "content": "x"})))
    calls = await events.tool_calls(since=T0 + 50)
    assert [(c.agent, c.cwd, c.tool, c.input, c.at) for c in calls] == [
        ("alpha", "/w", "Bash", {"command": "make test"}, T0 + 100),
        ("alpha", "/w", "Read", {"file_path": "/w/a.py"}, T0 + 100),
        ("bravo", "/w", "Write", {"file_path": "/w/b", "content": "x"}, T0 + 100)]
    assert len(await events.tool_calls(since=T0)) == 4
    assert [c.tool for c in await events.tool_calls(since=T0, limit=1)] == ["Write"]
