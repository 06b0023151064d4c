"""Conformance of TurnStore: turns, their costs, the roll-ups and the tally /metrics reads."""

from __future__ import annotations

import pytest

from store import Store
from store.escalations import EscalationDraft
from store.protocols import TurnStore
from store.turns import DAY_S
from tests.store.conftest import T0, FakeNow, MakeAgent


@pytest.fixture
async def turns(store: Store, make_agent: MakeAgent) -> TurnStore:
    await make_agent("a1", "alpha")
    await make_agent("b1", "beta")
    return store.turns


async def test_start_opens_a_running_turn_stamped_by_the_clock(turns: TurnStore,
                                                               clock: FakeNow) -> None:
    first = await turns.start("a1", "one")
    clock.advance(1)
    second = await turns.start("b1", "two")
    assert second > first > 0
    row = await turns.get(first)
    assert row is not None
    assert (row.agent_id, row.prompt, row.status, row.result_text, row.error, row.session_id,
            row.cost_usd, row.input_tokens, row.output_tokens, row.started_at, row.ended_at) == (
        "a1", "one", "running", None, None, None, 0.0, 0, 0, T0, None)
    assert [t.id for t in await turns.running()] == [first, second]
    assert await turns.get(second + 100) is None


async def test_finish_records_the_outcome_at_the_clock_time(turns: TurnStore,
                                                            clock: FakeNow) -> None:
    t = await turns.start("a1", "p")
    end = clock.advance(42)
    await turns.finish(t, status="ok", result_text="r", session_id="s-1", cost_usd=0.5,
                       input_tokens=7, output_tokens=9)
    row = await turns.get(t)
    assert row is not None
    assert (row.status, row.result_text, row.error, row.session_id, row.cost_usd,
            row.input_tokens, row.output_tokens, row.started_at, row.ended_at) == (
        "ok", "r", None, "s-1", 0.5, 7, 9, T0, end)
    assert await turns.running() == []


async def test_turns_costs_and_totals(turns: TurnStore) -> None:
    t1 = await turns.start("a1", "one")
    await turns.finish(t1, status="ok", result_text="r1", session_id="s", cost_usd=0.001,
                       input_tokens=10, output_tokens=12,
                       model_costs={"sonnet": (0.001, 10, 12)})
    t2 = await turns.start("a1", "two")
    await turns.finish(t2, status="ok", cost_usd=0.006, input_tokens=5, output_tokens=6,
                       model_costs={"sonnet": (0.001, 2, 3), "haiku": (0.005, 3, 3)})
    t3 = await turns.start("b1", "three")
    recent = await turns.recent("a1")
    assert [(t.id, t.status, t.cost_usd) for t in recent] == [(t2, "ok", 0.006), (t1, "ok", 0.001)]
    assert recent[1].ended_at is not None and recent[1].ended_at >= recent[1].started_at

    by_agent = {c.key: c for c in await turns.totals_by_agent()}
    assert by_agent["a1"].cost_usd == pytest.approx(0.007)
    assert (by_agent["a1"].input_tokens, by_agent["a1"].output_tokens, by_agent["a1"].turns) == (
        15, 18, 2)
    assert by_agent["b1"].cost_usd == 0.0 and by_agent["b1"].turns == 1
    by_model = await turns.totals_by_model("a1")
    assert [(c.key, c.turns) for c in by_model] == [("haiku", 1), ("sonnet", 2)]  # by cost
    assert by_model[1].cost_usd == pytest.approx(0.002)
    assert await turns.totals_by_model("b1") == []

    assert await turns.close_running("a1", "nope") == 0
    assert await turns.close_running(None, "the supervisor restarted") == 1
    [interrupted] = await turns.recent("b1")
    assert (interrupted.id, interrupted.status, interrupted.error) == (
        t3, "interrupted", "the supervisor restarted")


async def test_a_turn_finished_twice_is_counted_once(turns: TurnStore) -> None:
    t = await turns.start("a1", "p")
    await turns.finish(t, status="ok", cost_usd=1.0, input_tokens=10, output_tokens=20)
    await turns.finish(t, status="error", error="late", cost_usd=1.5, input_tokens=10,
                       output_tokens=20)
    [line] = await turns.totals_by_agent("a1")
    assert (line.key, line.cost_usd, line.input_tokens, line.output_tokens, line.turns) == (
        "a1", 1.5, 10, 20, 1)
    assert await turns.spent_since(T0 - T0 % DAY_S, "a1") == 1.5
    assert (await turns.tally()).outcomes == (("error", 1),)


async def test_totals_by_agent_are_by_agent_id(turns: TurnStore) -> None:
    assert await turns.totals_by_agent() == []
    for agent in ("b1", "a1"):
        await turns.finish(await turns.start(agent, "p"), status="ok", cost_usd=1.0)
    assert [c.key for c in await turns.totals_by_agent()] == ["a1", "b1"]
    assert [c.key for c in await turns.totals_by_agent("b1")] == ["b1"]
    assert await turns.totals_by_agent("nobody") == []


async def test_totals_by_model_across_agents_largest_first(turns: TurnStore) -> None:
    await turns.finish(await turns.start("a1", "p"), status="ok",
                       model_costs={"haiku": (0.25, 1, 2), "opus": (2.0, 3, 4)})
    await turns.finish(await turns.start("b1", "p"), status="ok",
                       model_costs={"haiku": (0.5, 10, 20)})
    lines = await turns.totals_by_model()
    assert [(c.key, c.cost_usd, c.input_tokens, c.output_tokens, c.turns) for c in lines] == [
        ("opus", 2.0, 3, 4, 1), ("haiku", 0.75, 11, 22, 2)]


async def test_interrupt_is_refused_unless_the_turn_runs(store: Store, turns: TurnStore,
                                                         clock: FakeNow) -> None:
    t = await turns.start("a1", "p")
    at = clock.advance(5)
    report = EscalationDraft(id="r1", agent_id="a1", kind="notice", title="alpha cut",
                             status="info")
    assert await turns.interrupt(t, "cut by a restart", report=report)
    row = await turns.get(t)
    assert row is not None
    assert (row.status, row.error, row.ended_at) == ("interrupted", "cut by a restart", at)
    esc = await store.escalations.get("r1")
    assert esc is not None and (esc.title, esc.created_at) == ("alpha cut", at)
    again = EscalationDraft(id="r2", agent_id="a1", kind="notice", title="twice", status="info")
    assert not await turns.interrupt(t, "again", report=again)  # no longer running
    assert await store.escalations.get("r2") is None  # and its report is not written
    assert not await turns.interrupt(t + 100, "unknown")


async def test_close_running_is_per_agent_or_all(turns: TurnStore, clock: FakeNow) -> None:
    done = await turns.start("a1", "p")
    await turns.finish(done, status="ok")
    a = await turns.start("a1", "p")
    b = await turns.start("b1", "p")
    at = clock.advance(3)
    assert await turns.close_running("a1", "agent killed") == 1
    assert [t.id for t in await turns.running()] == [b]
    row = await turns.get(a)
    assert row is not None and (row.status, row.error, row.ended_at) == (
        "interrupted", "agent killed", at)
    finished = await turns.get(done)
    assert finished is not None and finished.status == "ok"
    assert await turns.close_running(None, "restart") == 1
    assert await turns.close_running(None, "restart") == 0
    assert await turns.running() == []


async def test_recent_is_newest_first_and_limited(turns: TurnStore) -> None:
    ids = []
    for i in range(7):  # one running turn per agent: each ends before the next
        ids.append(await turns.start("a1", f"p{i}"))
        await turns.finish(ids[-1], status="ok")
    await turns.start("b1", "other")
    assert [t.id for t in await turns.recent("a1")] == ids[::-1][:5]
    assert [t.id for t in await turns.recent("a1", 2)] == ids[::-1][:2]
    assert await turns.recent("nobody") == []


async def test_spent_since_a_days_start_and_an_arbitrary_time(turns: TurnStore,
                                                              clock: FakeNow) -> None:
    day = T0 - T0 % DAY_S
    clock.t = day - 100  # yesterday
    await turns.finish(await turns.start("a1", "p"), status="ok", cost_usd=1.0)
    clock.t = day + 100
    await turns.finish(await turns.start("a1", "p"), status="ok", cost_usd=2.0)
    clock.t = day + 200
    await turns.finish(await turns.start("b1", "p"), status="ok", cost_usd=4.0)
    assert await turns.spent_since(day, None) == 6.0  # the day roll-up
    assert await turns.spent_since(day, "a1") == 2.0
    assert await turns.spent_since(day - DAY_S, "a1") == 3.0
    assert await turns.spent_since(day + 150, None) == 4.0  # from the turns themselves
    assert await turns.spent_since(day - 150, "a1") == 3.0
    assert await turns.spent_since(day + DAY_S, None) == 0.0
    assert await turns.spent_since(day, "nobody") == 0.0


async def test_the_tally_follows_every_ended_turn(turns: TurnStore) -> None:
    empty = await turns.tally()
    assert (empty.outcomes, empty.costs) == ((), ())
    t1 = await turns.start("a1", "p")
    t2 = await turns.start("b1", "p")
    await turns.finish(t1, status="ok", model_costs={"sonnet": (0.5, 1, 1)})
    await turns.start("a1", "still running")  # not counted
    await turns.finish(t2, status="error", model_costs={"sonnet": (0.25, 1, 1),
                                                        "haiku": (0.125, 1, 1)})
    tally = await turns.tally()
    assert tally.outcomes == (("error", 1), ("ok", 1))
    assert tally.costs == (("a1", "sonnet", 0.5), ("b1", "haiku", 0.125),
                           ("b1", "sonnet", 0.25))
    assert await turns.close_running(None, "restart") == 1
    assert (await turns.tally()).outcomes == (("error", 1), ("interrupted", 1), ("ok", 1))


async def test_the_tally_read_first_after_rows_exist(store: Store, turns: TurnStore) -> None:
    """A store that tallies for the first time counts what is already there."""
    await turns.finish(await turns.start("a1", "p"), status="ok",
                       model_costs={"opus": (3.0, 1, 1)})
    tally = await turns.tally()
    assert (tally.outcomes, tally.costs) == ((("ok", 1),), (("a1", "opus", 3.0),))


async def test_a_finished_turn_writes_its_notice(store: Store, turns: TurnStore,
                                                 clock: FakeNow) -> None:
    t = await turns.start("a1", "p")
    at = clock.advance(8)
    await turns.finish(t, status="ok", result_text="done",
                       notice=EscalationDraft(id="n1", agent_id="a1", kind="notice",
                                              title="alpha finished", status="info"))
    [notice] = await store.escalations.undelivered("console")
    assert (notice.id, notice.title, notice.status, notice.created_at) == (
        "n1", "alpha finished", "info", at)


async def test_a_turn_records_its_origin_and_the_messages_it_held(turns: TurnStore) -> None:
    plain = await turns.start("a1", "by hand")
    await turns.finish(plain, status="ok")  # one running turn per agent
    peer = await turns.start("a1", "rendered", origin="operator,peer", message_ids=(7, 3, 7))
    await turns.finish(peer, status="ok")
    later = await turns.start("a1", "again", origin="peer", message_ids=(3,))
    other = await turns.start("b1", "theirs", origin="schedule", message_ids=(3,))
    assert [(t.id, t.origin) for t in await turns.recent("a1", 5)] == [
        (later, "peer"), (peer, "operator,peer"), (plain, None)]
    assert await turns.message_ids(peer) == [3, 7]  # in id order, each once
    assert await turns.message_ids(plain) == []
    held = await turns.holding("a1", 3)  # the first of this agent's turns that held it
    assert held is not None and held.id == peer and held.origin == "operator,peer"
    theirs = await turns.holding("b1", 3)
    assert theirs is not None and theirs.id == other
    assert await turns.holding("a1", 99) is None
    assert await turns.holding("c1", 3) is None


async def test_search_reads_prompts_results_and_errors(turns: TurnStore, clock: FakeNow) -> None:
    one = await turns.start("a1", "Fix the flaky login test")
    await turns.finish(one, status="ok", result_text="Fixed: the TEST waited on a timer")
    clock.advance(10)
    two = await turns.start("b1", "deploy to staging")
    await turns.finish(two, status="error", error="login refused by the staging host")
    three = await turns.start("a1", "100% coverage please")
    assert [t.id for t in await turns.search(["login"])] == [two, one]
    assert [t.id for t in await turns.search(["timer", "flaky"])] == [one]
    assert [t.id for t in await turns.search(["100%"])] == [three]
    assert await turns.search(["10_%"]) == []
    assert [t.id for t in await turns.search(["login"], since=T0 + 5)] == [two]
    assert [t.id for t in await turns.search(["login"], limit=1)] == [two]


async def test_spent_by_agent_since_a_days_start(turns: TurnStore, clock: FakeNow) -> None:
    """The web console's fleet page reads every agent's spend today in one query."""
    day = T0 - T0 % DAY_S
    clock.t = day - 100  # yesterday: not counted
    await turns.finish(await turns.start("a1", "p"), status="ok", cost_usd=1.0)
    clock.t = day + 100
    await turns.finish(await turns.start("a1", "p"), status="ok", cost_usd=2.0)
    await turns.finish(await turns.start("a1", "p"), status="ok", cost_usd=0.5)
    await turns.finish(await turns.start("b1", "p"), status="ok", cost_usd=4.0)
    assert await turns.spent_by_agent_since(day) == {"a1": 2.5, "b1": 4.0}
    assert await turns.spent_by_agent_since(day - DAY_S) == {"a1": 3.5, "b1": 4.0}
    assert await turns.spent_by_agent_since(day + DAY_S) == {}
