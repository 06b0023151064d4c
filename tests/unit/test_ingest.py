"""The event ingest (batched, off the event loop, flushed before what is reported), records
without asdict, the aggregates kept with each turn, the outbox's delivery cursor, retention."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from store import Store, open_store
from store.errors import StoreError
from store.migrations import MIGRATIONS
from supervisor.agents.ingest import EventIngest
from supervisor.agents.records import data_json, record_of
from supervisor.agents.retention import DAY_S, Retention, database_bytes
from supervisor.clock import FakeClock
from supervisor.events import AgentOutput, EventHub, TurnFinished
from tests.conftest import run, wait_for

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def store(tmp_path: Path, migrated_db: Path) -> AsyncIterator[Store]:
    path = tmp_path / "switchboard.db"
    path.write_bytes(migrated_db.read_bytes())
    s = await open_store(path)
    for a in ("a1", "a2"):
        await s.agents.create(id=a, name=a, parent_id=None, model=None, cwd="/w", prompt="p",
                              permission_mode="default", state="idle")
    try:
        yield s
    finally:
        await s.db.close()


@pytest.fixture
async def ingest(store: Store) -> AsyncIterator[EventIngest]:
    i = EventIngest(store, window_s=0.01, clock=FakeClock())
    await i.start()
    try:
        yield i
    finally:
        await i.close()


def count(store: Store, where: str = "1") -> int:
    """Read with a connection of its own: what a restarted supervisor would find."""
    conn = sqlite3.connect(store.db.path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM agent_events WHERE {where}").fetchone()[0])
    finally:
        conn.close()


# -- the ingest ----------------------------------------------------------------------------------


async def test_events_queue_without_io_and_go_in_one_transaction_per_batch(store, ingest):
    for i in range(500):
        ingest.add("a1" if i % 2 else "a2", None, "assistant", f"e{i}", {"i": i})
    assert count(store) == 0 and ingest.pending == 500  # add() did no I/O
    await ingest.flush()
    assert count(store) == 500 and ingest.batches == 1 and ingest.pending == 0
    tail = await store.events.tail("a1", 2)
    assert [e.data for e in tail] == [{"i": 497}, {"i": 499}]


async def test_a_full_batch_is_written_without_waiting_for_the_window(store):
    ingest = EventIngest(store, window_s=60, max_batch=100)
    await ingest.start()
    try:
        for i in range(250):
            ingest.add("a1", None, "k", "", {"i": i})
        # The batches counted, not the rows: the reader sees a commit before the loop resumes
        # the writer task that counts it.
        await wait_for(lambda: ingest.batches >= 2, 5, "two full batches")
        assert count(store) == 200 and ingest.batches == 2 and ingest.pending == 50  # they wait
        await ingest.flush()
        assert count(store) == 250
    finally:
        await ingest.close()


async def test_a_writer_behind_the_fleet_holds_the_record_path_back(store):
    """At most the batch being written and one gathering are uncommitted: past that, the
    record path waits for room (what a crash can lose stays bounded, not a backlog)."""
    ingest = EventIngest(store, window_s=60, max_batch=5)
    await ingest.start()
    gate = threading.Event()
    busy = asyncio.ensure_future(ingest.writer.call(gate.wait))  # the writer thread held
    await asyncio.sleep(0)  # (submitted before any batch)
    try:
        for i in range(5):
            ingest.add("a1", None, "k", f"first{i}", {})
        await wait_for(lambda: ingest.pending == 0, 5, "the first batch taken")
        for i in range(5):
            ingest.add("a1", None, "k", f"second{i}", {})
        room = asyncio.ensure_future(ingest.room())
        for _ in range(20):
            await asyncio.sleep(0)
        assert ingest.behind and not room.done()
        gate.set()
        await asyncio.wait_for(room, 5)
        assert not ingest.behind
        await ingest.flush()
        assert count(store) == 10
    finally:
        gate.set()
        await busy
        await ingest.close()


async def test_an_agents_next_message_waits_while_a_whole_batch_waits_for_the_writer(
        fake_settings):
    from bot.app import Switchboard
    from supervisor.agents.runner import AgentRunner

    settings = fake_settings.with_(ingest_max_batch=5, ingest_window_s=60.0)
    async with Switchboard(settings) as app:
        assert app.pool is not None and app.store is not None
        row = await app.store.agents.create(id="w1", name="w1", parent_id=None, model=None,
                                            cwd="/w", prompt="p", permission_mode="default",
                                            state="working")
        runner = AgentRunner(row, app.pool._deps)
        turn = await app.store.turns.start("w1", "p")
        ingest, gate = app.pool.ingest, threading.Event()
        busy = asyncio.ensure_future(ingest.writer.call(gate.wait))  # the writer thread held
        await asyncio.sleep(0)
        msg = AssistantMessage(content=[TextBlock("x")], model="m")
        try:
            for _ in range(5):
                await runner._record(msg, turn)
            await wait_for(lambda: ingest.pending == 0, 5, "the first batch taken")
            for _ in range(4):
                await runner._record(msg, turn)
            fifth = asyncio.ensure_future(runner._record(msg, turn))
            for _ in range(20):
                await asyncio.sleep(0)
            assert not fifth.done() and ingest.pending == 5
            gate.set()
            await asyncio.wait_for(fifth, 5)
        finally:
            gate.set()
            await busy


async def test_a_flush_covers_the_batch_in_flight_and_what_came_after(store, ingest):
    ingest.add("a1", None, "k", "first", {})
    first = asyncio.ensure_future(ingest.flush())
    await asyncio.sleep(0)
    ingest.add("a1", None, "k", "second", {})
    await asyncio.gather(first, ingest.flush())
    assert count(store) == 2
    await ingest.flush()  # nothing waiting: returns at once
    assert ingest.batches <= 2


async def test_close_writes_what_is_still_waiting(store):
    ingest = EventIngest(store, window_s=60)
    await ingest.start()
    ingest.add("a1", None, "k", "late", {})
    await ingest.close()
    assert count(store) == 1


async def test_a_failed_batch_is_reported_and_the_ingest_goes_on(store, ingest):
    reasons: list[str] = []
    store.db.write_error_listeners.append(reasons.append)
    conn = ingest.writer._conn
    assert conn is not None
    await ingest.writer.call(lambda: conn.execute("PRAGMA query_only=1"))
    ingest.add("a1", None, "k", "lost", {})
    with pytest.raises(StoreError):
        await ingest.flush()
    assert ingest.lost == 1 and reasons and "readonly" in reasons[0]
    await ingest.writer.call(lambda: conn.execute("PRAGMA query_only=0"))
    ingest.add("a1", None, "k", "kept", {})
    await ingest.flush()
    assert [e.summary for e in await store.events.tail("a1", 5)] == ["kept"]


async def test_a_lone_surrogate_costs_its_text_not_the_batch(store, ingest):
    ingest.add("a1", None, "k", "fine", {"n": 2 ** 70, 3: Path("/p")})  # what orjson refuses
    ingest.add("a1", None, "k", "bad \udc80 text", {"x": "\udc80"})
    await ingest.flush()
    tail = await store.events.tail("a1", 5)
    assert [e.summary for e in tail] == ["fine", "bad ? text"]
    assert tail[0].data == {"n": 2 ** 70, "3": "/p"} and tail[1].data == {"x": "\udc80"}


async def test_a_turn_end_is_reported_only_once_its_events_are_committed(fake_settings):
    """With a window far longer than the test, only the flush before the turn's end can have
    written the streamed events when TurnFinished is published."""
    from bot.app import Switchboard

    settings = fake_settings.with_(ingest_window_s=300.0)
    async with Switchboard(settings) as app:
        seen: list[int] = []
        finished = asyncio.Event()

        async def watch() -> None:
            async for e in app.hub.stream():
                if isinstance(e, TurnFinished):
                    conn = sqlite3.connect(settings.db_path)
                    try:  # at the moment it is reported, from another connection
                        seen.append(conn.execute(
                            "SELECT COUNT(*) FROM agent_events WHERE turn_id=? AND kind IN"
                            " ('assistant', 'result')", (e.turn_id,)).fetchone()[0])
                    finally:
                        conn.close()
                    finished.set()

        task = asyncio.create_task(watch())
        try:
            await asyncio.sleep(0)
            assert (await run(app, "/spawn s STREAM 150")).ok
            await asyncio.wait_for(finished.wait(), 20)
        finally:
            task.cancel()
        assert seen == [150 + 1 + 1]  # the chunks, the reply, the result


# -- records -------------------------------------------------------------------------------------

MESSAGES = [
    SystemMessage(subtype="init", data={"session_id": "abc", "tools": ["a", "b"]}),
    AssistantMessage(content=[TextBlock("hi"), ToolUseBlock("t1", "Bash", {"command": "ls"}),
                              ThinkingBlock("hm", "sig")], model="m", usage={"x": 1}),
    UserMessage(content=[ToolResultBlock("t1", [{"type": "text", "text": "out"}], False)]),
    UserMessage(content="plain"),
    ResultMessage(subtype="success", duration_ms=1, duration_api_ms=1, is_error=False,
                  num_turns=1, session_id="s", total_cost_usd=0.1, usage={"input_tokens": 1},
                  result="ok", model_usage={"m": {"costUSD": 0.1}}),
]


def _no_none(value: object) -> object:
    if isinstance(value, dict):
        return {k: _no_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_none(v) for v in value]
    return value


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_records_are_what_asdict_gave_less_nones_without_calling_it(msg, monkeypatch):
    # (the messages' own dicts here hold no None, so dropping them everywhere is the same)
    expected = json.dumps(_no_none(dataclasses.asdict(msg)), default=str)

    def no_asdict(*_a: object, **_k: object) -> None:
        raise AssertionError("asdict on the record path")

    monkeypatch.setattr(dataclasses, "asdict", no_asdict)
    assert json.loads(data_json(msg)) == json.loads(expected)
    assert record_of(msg).data == data_json(msg)
    assert json.loads(data_json(object())).keys() == {"repr"}


def test_a_record_orjson_refuses_is_written_by_the_standard_encoder():
    msg = AssistantMessage(content=[TextBlock("bad \udc80 text")], model="m",
                           usage={"n": 2 ** 70})
    assert json.loads(data_json(msg)) == {"content": [{"text": "bad \udc80 text"}],
                                          "model": "m", "usage": {"n": 2 ** 70}}


def test_a_lagging_subscriber_loses_its_oldest_events_and_the_publisher_never_waits():
    hub = EventHub(maxsize=2)
    with hub.subscription() as slow, hub.subscription() as fast:
        for i in range(3):
            hub.publish(AgentOutput("a1", "w", "text", f"t{i}"))
            if i == 0:
                fast.get_nowait()
        assert [slow.get_nowait().text for _ in range(2)] == ["t1", "t2"]  # type: ignore[union-attr]
        assert [fast.get_nowait().text for _ in range(2)] == ["t1", "t2"]  # type: ignore[union-attr]


def test_an_agents_output_reaches_only_the_subscriptions_that_read_it():
    hub = EventHub()
    done = TurnFinished("a1", "w", 1, True, "ok", 0.1)
    with hub.subscription() as every, hub.subscription(TurnFinished) as turns:
        hub.publish(AgentOutput("a1", "w", "text", "t"))
        hub.publish(done)
        assert turns.qsize() == 1 and turns.get_nowait() is done
        assert every.qsize() == 2
    hub.publish(done)  # after the subscriptions ended: nobody holds a queue
    assert turns.empty() and every.qsize() == 2


# -- aggregates ----------------------------------------------------------------------------------


async def grouped(store: Store) -> tuple[dict[str, tuple[float, int, int, int]],
                                         dict[str, tuple[float, int, int, int]]]:
    by_agent = {r["agent_id"]: (round(r["c"], 9), r["i"], r["o"], r["n"])
                for r in await store.db.fetchall(
                    "SELECT agent_id, SUM(cost_usd) c, SUM(input_tokens) i,"
                    " SUM(output_tokens) o, COUNT(*) n FROM turns GROUP BY agent_id")}
    by_model = {r["model"]: (round(r["c"], 9), r["i"], r["o"], r["n"])
                for r in await store.db.fetchall(
                    "SELECT model, SUM(cost_usd) c, SUM(input_tokens) i, SUM(output_tokens) o,"
                    " COUNT(DISTINCT turn_id) n FROM costs GROUP BY model")}
    return by_agent, by_model


async def totals(store: Store) -> tuple[dict[str, tuple[float, int, int, int]],
                                        dict[str, tuple[float, int, int, int]]]:
    return ({c.key: (round(c.cost_usd, 9), c.input_tokens, c.output_tokens, c.turns)
             for c in await store.turns.totals_by_agent()},
            {c.key: (round(c.cost_usd, 9), c.input_tokens, c.output_tokens, c.turns)
             for c in await store.turns.totals_by_model()})


async def test_status_cost_and_budget_read_aggregates_equal_to_the_rows(store):
    t1 = await store.turns.start("a1", "x")
    t2 = await store.turns.start("a2", "y")
    await store.turns.finish(t1, status="ok", cost_usd=0.25, input_tokens=3, output_tokens=4,
                             model_costs={"opus": (0.2, 2, 3), "haiku": (0.05, 1, 1)})
    t3 = await store.turns.start("a1", "z")  # one running turn per agent: after t1 ended
    await store.turns.finish(t2, status="ok", cost_usd=0.5, input_tokens=1, output_tokens=1,
                             model_costs={"opus": (0.5, 1, 1)})
    await store.turns.finish(t2, status="failed", cost_usd=0.5, input_tokens=1,
                             output_tokens=1)  # finished twice: its cost counted once
    await store.turns.close_running(None, "restart")  # t3: a turn, no cost
    assert await totals(store) == await grouped(store)
    assert (await totals(store))[0]["a1"] == (0.25, 3, 4, 2)
    day = 86400.0 * (int(time.time() // 86400))
    assert await store.turns.spent_since(day, "a1") == pytest.approx(0.25)
    assert await store.turns.spent_since(day, None) == pytest.approx(0.75)
    assert await store.turns.spent_since(day + DAY_S, None) == 0.0
    assert await store.turns.spent_since(time.time() + 60, None) == 0.0  # not a day: turns
    assert await store.turns.spent_since(day + 1, "a2") == pytest.approx(0.5)
    assert t3
    for sql, params in (("SELECT * FROM agent_totals ORDER BY agent_id", ()),
                        ("SELECT SUM(cost_usd) FROM spend_days WHERE day >= ?", (1,))):
        plan = " ".join(str(r["detail"]) for r in await store.db.fetchall(
            "EXPLAIN QUERY PLAN " + sql, params))
        assert "turns" not in plan and "costs" not in plan


# The schema version just before the migration that adds the roll-ups and cursors.
BEFORE_ROLLUPS = next(i for i, m in enumerate(MIGRATIONS) if "CREATE TABLE agent_totals" in m)


def _at_version(path: Path, version: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:version]:
        conn.executescript(f"BEGIN;\n{script}\nCOMMIT;")
    conn.execute(f"PRAGMA user_version={version}")
    return conn


async def test_the_migration_fills_aggregates_and_cursors_from_the_rows_there(tmp_path):
    path = tmp_path / "old.db"
    conn = _at_version(path, BEFORE_ROLLUPS)
    conn.execute("INSERT INTO agents (id, name, cwd, prompt, state, created_at, updated_at)"
                 " VALUES ('a1', 'a', '/w', 'p', 'idle', 0, 0)")
    conn.execute("INSERT INTO turns (agent_id, prompt, status, cost_usd, input_tokens,"
                 " output_tokens, started_at) VALUES ('a1', 'p', 'ok', 0.5, 1, 2, 86400.5)")
    conn.execute("INSERT INTO costs (agent_id, turn_id, model, cost_usd, at)"
                 " VALUES ('a1', 1, 'opus', 0.5, 1)")
    for i in range(1, 6):
        conn.execute("INSERT INTO escalations (id, kind, title, status, created_at)"
                     " VALUES (?, 'notice', 't', 'info', 0)", (f"n{i}",))
    for i in (1, 2, 4):  # n3 not yet delivered to the console
        conn.execute("INSERT INTO deliveries VALUES (?, 'console', 0)", (f"n{i}",))
    conn.close()
    store = await open_store(path)
    try:
        assert [(c.key, c.cost_usd, c.turns) for c in await store.turns.totals_by_agent()] == \
            [("a1", 0.5, 1)]
        assert [(c.key, c.turns) for c in await store.turns.totals_by_model()] == [("opus", 1)]
        assert await store.turns.spent_since(86400.0, "a1") == 0.5
        assert await store.escalations.cursor("console") == 2
        assert [r.id for r in await store.escalations.undelivered("console")] == ["n3", "n5"]
    finally:
        await store.db.close()


# -- the outbox cursor ---------------------------------------------------------------------------


async def notices(store: Store, n: int, start: int = 0) -> list[str]:
    ids = [f"n{i}" for i in range(start, start + n)]
    for esc_id in ids:
        await store.escalations.create(id=esc_id, agent_id=None, kind="notice", title="t",
                                       body="", status="info")
    return ids


async def test_the_outbox_reads_from_the_cursor_never_the_history(store):
    ids = await notices(store, 5)
    seqs = {r.id: r.seq for r in await store.escalations.undelivered("fe")}
    await store.escalations.ack(ids[0], "fe")
    await store.escalations.ack(ids[2], "fe")  # out of order: the cursor stops at the gap
    assert await store.escalations.cursor("fe") == seqs["n0"]
    assert [r.id for r in await store.escalations.undelivered("fe")] == ["n1", "n3", "n4"]
    await store.escalations.ack(ids[1], "fe")
    assert await store.escalations.cursor("fe") == seqs["n2"]
    for esc_id in ids[3:]:
        await store.escalations.ack(esc_id, "fe")
    assert await store.escalations.cursor("fe") == seqs["n4"]
    assert await store.escalations.undelivered("fe") == []
    assert [r.id for r in await store.escalations.undelivered("other")] == ids  # its own cursor
    plan = " ".join(str(r["detail"]) for r in await store.db.fetchall(
        "EXPLAIN QUERY PLAN SELECT e.* FROM escalations e LEFT JOIN deliveries d"
        " ON d.escalation_id = e.id AND d.frontend = ? WHERE d.escalation_id IS NULL AND"
        " e.seq > MAX(?, COALESCE((SELECT seq FROM outbox_cursors WHERE frontend = ?), 0))"
        " ORDER BY e.seq LIMIT ?", ("fe", 0, "fe", 10)))
    assert "SEARCH e USING INTEGER PRIMARY KEY (rowid>?)" in plan, plan


async def test_a_new_front_end_starts_before_the_first_open_row(store):
    await notices(store, 3)
    await store.escalations.create(id="q1", agent_id="a1", kind="question", title="?", body="")
    await notices(store, 2, start=3)
    await store.escalations.mark_all_delivered("fe", before=float("inf"))
    assert [r.id for r in await store.escalations.undelivered("fe")] == ["q1"]
    rows = {r.id: r.seq for r in await store.escalations.open_rows()}
    assert await store.escalations.cursor("fe") == rows["q1"] - 1
    delivered = await store.db.fetchone("SELECT COUNT(*) AS n FROM deliveries")
    assert delivered is not None and delivered["n"] == 2  # only the rows after the cursor


# -- retention -----------------------------------------------------------------------------------


async def test_old_events_and_those_beyond_the_per_agent_count_are_pruned(store):
    clock = FakeClock()
    ingest = EventIngest(store, window_s=0.01, clock=clock)
    await ingest.start()
    try:
        turn = await store.turns.start("a1", "p")
        await store.turns.finish(turn, status="ok", cost_usd=0.1,
                                 model_costs={"opus": (0.1, 1, 1)})
        await store.audit.record(platform="console", user_id="u", user_name="", action="/x",
                                 args="", ok=True, result="")
        await notices(store, 2)
        for i in range(40):
            ingest.add("a1", turn, "old", f"o{i}", {})
        await ingest.flush()
        clock.advance(8 * DAY_S)
        for i in range(50):
            ingest.add("a1" if i < 45 else "a2", turn, "new", f"n{i}", {})
        await ingest.flush()
        keep = Retention(ingest, max_age_days=7, per_agent=30, interval_s=60, clock=clock,
                         chunk=7)
        pruned = await keep.prune()
        assert (pruned.by_age, pruned.by_count) == (40, 15)
        assert count(store, "agent_id='a1'") == 30 and count(store, "agent_id='a2'") == 5
        assert [e.summary for e in await store.events.tail("a1", 1)] == ["n44"]
        for table, n in (("turns", 1), ("costs", 1), ("audit", 1), ("escalations", 2),
                         ("agent_totals", 1)):
            row = await store.db.fetchone(f"SELECT COUNT(*) AS n FROM {table}")
            assert row is not None and row["n"] == n, table
        assert (await store.turns.totals_by_agent())[0].cost_usd == pytest.approx(0.1)
        assert await keep.prune() == type(pruned)(0, 0)
    finally:
        await ingest.close()


async def test_the_database_stops_growing_once_retention_holds(store):
    ingest = EventIngest(store, window_s=0.01)
    await ingest.start()
    keep = Retention(ingest, max_age_days=0, per_agent=300, interval_s=60)
    sizes = []
    try:
        for _ in range(8):  # a long day, in rounds: 8 x 600 events of 1 kB, 600 kept
            for i in range(600):
                ingest.add("a1" if i % 2 else "a2", None, "assistant", "x", {"t": "y" * 1000})
            await ingest.flush()
            await keep.prune()
            sizes.append(database_bytes(store.db.path))
    finally:
        await ingest.close()
    assert count(store) == 600
    assert sizes[-1] <= sizes[2] * 1.2, sizes  # freed pages are used again


async def test_a_read_only_look_at_an_older_database_still_totals_from_the_rows(tmp_path):
    """`switchboard status` after an upgrade, before the new version's first run: read-only,
    so not migrated, and the roll-ups do not exist yet."""
    path = tmp_path / "old.db"
    conn = _at_version(path, BEFORE_ROLLUPS)
    conn.execute("INSERT INTO agents (id, name, cwd, prompt, state, created_at, updated_at)"
                 " VALUES ('a1', 'a', '/w', 'p', 'idle', 0, 0)")
    conn.execute("INSERT INTO turns (agent_id, prompt, status, cost_usd, started_at)"
                 " VALUES ('a1', 'p', 'ok', 0.5, 1)")
    conn.close()
    store = await open_store(path, read_only=True)
    try:
        assert [(c.key, c.cost_usd, c.turns) for c in await store.turns.totals_by_agent()] == \
            [("a1", 0.5, 1)]
    finally:
        await store.db.close()


async def test_retention_runs_at_start_and_then_every_interval(store):
    clock = FakeClock()
    ingest = EventIngest(store, window_s=0.01, clock=clock)
    await ingest.start()
    keep = Retention(ingest, max_age_days=1, per_agent=0, interval_s=600, clock=clock)
    task = asyncio.create_task(keep.run())
    try:
        await wait_for(lambda: keep.runs == 1 and clock.sleepers == 1, 5, "the first pass")
        for i in range(5):
            ingest.add("a1", None, "k", f"e{i}", {})
        await ingest.flush()
        clock.advance(DAY_S + 1)  # a day later: older than a day, and the interval is up
        await wait_for(lambda: keep.runs == 2 and clock.sleepers == 1, 5, "the second pass")
        assert keep.total == 5 and count(store) == 0
        clock.advance(599)
        for _ in range(10):  # yields only: nothing is due, so nothing may run
            await asyncio.sleep(0)
        assert keep.runs == 2 and clock.sleepers == 1  # not before the interval
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await ingest.close()
