"""The bus over a real SQLite store with a fake fleet and an injected clock: ordering, one turn
for everything pending, leases (extension, fencing, crash redelivery), dedup, expiry, dead
letters, routing, batching, and the storm guards. The conformance suite a second backend must
pass unchanged."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from store import Store, open_store
from store.bus import Lease
from supervisor.bus.core import OPERATOR_SENDER, Bus, Sender
from supervisor.clock import FakeClock
from supervisor.config import Settings
from supervisor.errors import InvalidRequest, LimitExceeded, ShuttingDown
from tests.conftest import wait_for


class FakeMembers:
    def __init__(self, *names: str) -> None:
        self.agents = {f"id-{n}": n for n in names}
        self.busy: set[str] = set()
        self.interrupted: list[str] = []

    def live(self) -> list[tuple[str, str]]:
        return list(self.agents.items())

    def everyone(self) -> list[tuple[str, str]]:
        return list(self.agents.items())

    def count(self) -> int:
        return len(self.agents)

    def is_live(self, agent_id: str) -> bool:
        return agent_id in self.agents

    def state_of(self, agent_id: str) -> str:
        return "busy" if agent_id in self.busy else "idle"

    async def interrupt(self, agent_id: str) -> None:
        self.interrupted.append(agent_id)


class World:
    def __init__(self, store: Store, settings: Settings, members: FakeMembers,
                 clock: FakeClock) -> None:
        self.store, self.settings, self.members, self.clock = store, settings, members, clock
        self.notices: list[tuple[str, str]] = []
        self.bus = self.new_bus()

    def new_bus(self) -> Bus:
        async def notify(_agent: str | None, title: str, body: str) -> None:
            self.notices.append((title, body))
        return Bus(self.store, self.settings, self.members, notify=notify, clock=self.clock)


@pytest.fixture
async def world(tmp_path: Path, migrated_db: Path) -> AsyncIterator[World]:
    db = tmp_path / "sb.db"
    shutil.copyfile(migrated_db, db)
    store = await open_store(db)
    settings = Settings(home=tmp_path, bus_lease_s=1.0)
    w = World(store, settings, FakeMembers("a", "b", "c"), FakeClock())
    await w.bus.start()
    try:
        yield w
        # Every test here checks the open-deliveries invariant on its way out: a delivery is
        # open (queued or leased) exactly while it has no end stamp (the index is keyed on it).
        wrong = await store.db.fetchall(
            "SELECT seq, state, ended_at FROM bus_deliveries "
            "WHERE (ended_at IS NULL) != (state IN ('queued', 'leased'))")
        assert [tuple(r) for r in wrong] == []
    finally:
        await w.bus.close()
        await store.db.close()


@contextlib.contextmanager
def raw(world: World) -> Iterator[sqlite3.Connection]:
    """A second process's connection, as another bus backend instance would have."""
    conn = sqlite3.connect(world.store.db.path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


A = Sender("id-a", "a")
B = Sender("id-b", "b")


def ids_in(text: str) -> list[int]:
    return [int(x) for x in re.findall(r'<message n="\d+" of="\d+" id="(\d+)"', text)]


async def test_idle_recipient_gets_one_turn_and_ack_consumes(world: World) -> None:
    sent = await world.bus.send(A, "b", "task", "do it")
    assert sent.message_id and sent.queued == ("b (idle, 1 queued)",)
    box = world.bus.inbox("id-b")
    taken = await box.take(1)
    assert taken is not None and 'from="a" type="task"' in taken.text and "do it" in taken.text
    _, rows = await world.bus.status(sent.message_id)
    assert [(r.recipient, r.state) for r in rows] == [("b", "leased")]
    await box.ack(taken)
    _, rows = await world.bus.status(sent.message_id)
    assert rows[0].state == "consumed" and rows[0].consumed_at is not None


async def test_everything_pending_is_one_turn_in_order_with_times(world: World) -> None:
    ids = [(await world.bus.send(A, "b", "info", f"note {i}")).message_id for i in range(3)]
    taken = await world.bus.inbox("id-b").take(1)
    assert taken is not None and taken.count == 3
    assert ids_in(taken.text) == ids
    assert taken.text.count("written=") == 3
    assert 'more_after="2"' in taken.text and 'more_after="0"' in taken.text


async def test_operator_task_alone_is_its_own_text(world: World) -> None:
    await world.bus.inbox("id-a").put("SLEEP 1")
    taken = await world.bus.inbox("id-a").take(1)
    assert taken is not None and taken.text == "SLEEP 1"


async def test_interrupt_jumps_the_queue_and_interrupts_a_busy_turn(world: World) -> None:
    world.members.busy.add("id-b")
    first = (await world.bus.send(A, "b", "info", "first")).message_id
    urgent = (await world.bus.send(OPERATOR_SENDER, "b", "interrupt", "stop that")).message_id
    await asyncio.sleep(0)
    assert world.members.interrupted == ["id-b"]
    taken = await world.bus.inbox("id-b").take(1)
    assert taken is not None and ids_in(taken.text) == [urgent, first]


async def test_crash_redelivers_and_ack_with_a_stale_token_does_nothing(world: World) -> None:
    sent = await world.bus.send(A, "b", "task", "survive")
    old = await world.bus.inbox("id-b").take(1)
    assert old is not None
    await world.bus.close()  # the supervisor dies holding the lease
    world.bus = world.new_bus()
    await world.bus.start()
    assert world.bus.reclaimed == 1
    box = world.bus.inbox("id-b")
    again = await box.take(1)
    assert again is not None and "survive" in again.text and 'attempt="2"' in again.text
    await world.bus.ack(box, old, True)  # the dead turn's token: fenced off
    assert sent.message_id is not None
    _, rows = await world.bus.status(sent.message_id)
    assert rows[0].state == "leased"
    await box.ack(again)
    _, rows = await world.bus.status(sent.message_id)
    assert rows[0].state == "consumed"


async def test_lease_extended_while_the_turn_runs_is_never_taken_twice(world: World) -> None:
    await world.bus.send(A, "b", "task", "slow")
    box = world.bus.inbox("id-b")
    taken = await box.take(1)
    assert taken is not None
    await world.clock.wait_sleep_calls(2)  # the keeper and the expiry sweep are asleep
    for _ in range(10):  # ten lease lengths go by; the keeper extends each time
        calls = world.clock.sleep_calls
        world.clock.advance(0.4)
        # Back asleep: its extension is written (however slow the writer thread is today).
        await world.clock.wait_sleep_calls(calls + 1)
    with raw(world) as conn:
        stolen = world.store.bus.lease(conn, "id-b", holder="other", token="t2",
                                       until=world.clock.now() + 1, now=world.clock.now(),
                                       limit=10)
    assert stolen == []


async def test_an_expired_lease_is_leased_again_and_fenced(world: World) -> None:
    """Without extension (a holder that died), the lease runs out and another takes it."""
    await world.bus.send(A, "b", "task", "x")
    now = world.clock.now()
    with raw(world) as conn:
        first = world.store.bus.lease(conn, "id-b", holder="h1", token="t1", until=now + 1,
                                      now=now, limit=10)
        second = world.store.bus.lease(conn, "id-b", holder="h2", token="t2", until=now + 3,
                                       now=now + 2, limit=10)
        seqs = tuple(x.delivery.seq for x in first)
        assert world.store.bus.ack(conn, Lease("t1", "id-b", seqs), now + 2) == 0
        assert world.store.bus.ack(conn, Lease("t2", "id-b", seqs), now + 2) == 1
    assert len(first) == len(second) == 1


async def test_a_lease_by_range_skips_a_live_lease_between_its_rows(world: World) -> None:
    """A lease of one lane's rows updates the range from its first to its last sequence: a
    row in that range held by another turn's live lease is not taken (regression guard for
    the range, which has to repeat the query's own test)."""
    for i in range(3):
        await world.bus.send(A, "b", "info", f"m{i}")
    now = world.clock.now()
    with raw(world) as conn:
        bus = world.store.bus
        first = bus.lease(conn, "id-b", holder="h1", token="t1", until=now + 1, now=now,
                          limit=1)
        second = bus.lease(conn, "id-b", holder="h2", token="t2", until=now + 100, now=now,
                           limit=1)
        third = bus.lease(conn, "id-b", holder="h3", token="t3", until=now + 100,
                          now=now + 10, limit=5)  # t1 has run out, t2 has not
        held = dict(conn.execute("SELECT seq, lease_token FROM bus_deliveries "
                                 "WHERE recipient_id = 'id-b'").fetchall())
    assert [x.delivery.seq for x in first] == [1] and [x.delivery.seq for x in second] == [2]
    assert [x.delivery.seq for x in third] == [1, 3]
    assert held == {1: "t3", 2: "t2", 3: "t3"}


def test_the_open_deliveries_index_serves_the_lease_and_is_keyed_on_the_end(
        migrated_db: Path) -> None:
    """The lease's query uses the partial index, whose WHERE names ended_at, not the state:
    a lease (queued -> leased) then leaves the index entry alone."""
    conn = sqlite3.connect(migrated_db)
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master "
                              "WHERE name = 'bus_deliveries_open'").fetchone()
        plan = " ".join(str(r[-1]) for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT message_id, seq FROM bus_deliveries WHERE "
            "recipient_id = 'x' AND ended_at IS NULL AND (state = 'queued' OR "
            "lease_expires_at <= 0) ORDER BY lane, seq LIMIT 5"))
    finally:
        conn.close()
    assert "WHERE ended_at IS NULL" in sql and "state" not in sql
    assert "bus_deliveries_open" in plan and "TEMP B-TREE" not in plan


async def test_the_bus_writer_checkpoints_rarely(world: World) -> None:
    from store.bus import WAL_CHECKPOINT_PAGES

    [pages] = await world.bus.writer.conn.transaction(
        [lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]])
    assert pages == WAL_CHECKPOINT_PAGES > 1000


async def test_acknowledgements_in_one_batch_each_consume_their_own_lease(world: World):
    """A batch's acknowledgements are one statement; each still consumes only what its own
    lease holds, and a stale token among them consumes nothing."""
    one = await world.bus.send(A, "b", "task", "for b")
    two = await world.bus.send(A, "c", "task", "for c")
    taken_b, taken_c = await world.bus.inbox("id-b").take(1), await world.bus.inbox("id-c").take(1)
    assert taken_b is not None and taken_c is not None
    lease_b = world.bus._active.pop(taken_b.token or "")
    lease_c = world.bus._active.pop(taken_c.token or "")
    now, before = world.clock.now(), world.bus.writer.batches
    acks = [world.bus.writer.ack(lease_b, now),  # queued together: one batch
            world.bus.writer.ack(Lease("stale", "id-c", (1,)), now),
            world.bus.writer.ack(lease_c, now)]
    await asyncio.gather(*acks)
    assert world.bus.writer.batches - before == 1
    for sent in (one, two):
        assert sent.message_id is not None
        _, rows = await world.bus.status(sent.message_id)
        assert rows[0].state == "consumed"
    with raw(world) as conn:
        assert world.store.bus.ack(conn, lease_b, world.clock.now()) == 0  # already consumed


async def test_dedup_key_stores_once(world: World) -> None:
    one = await world.bus.send(A, "b", "task", "x", dedup_key="k1")
    two = await world.bus.send(A, "b", "task", "x again", dedup_key="k1")
    assert one.message_id == two.message_id and two.duplicate
    taken = await world.bus.inbox("id-b").take(1)
    assert taken is not None and taken.count == 1


async def test_expired_messages_are_not_delivered_and_the_sender_is_told(world: World) -> None:
    await world.bus.send(A, "b", "task", "too late")
    world.clock.advance(world.settings.bus_message_ttl_s + 1)
    assert await world.bus.inbox("id-b").take(0.05) is None
    told = await world.bus.inbox("id-a").take(1)
    assert told is not None and "expired before it was read" in told.text


async def test_failed_turns_redeliver_then_dead_letter_with_notices(world: World) -> None:
    await world.bus.send(A, "b", "task", "poison")
    box = world.bus.inbox("id-b")
    for attempt in range(world.settings.bus_max_attempts):
        if attempt:  # held after a failure until the next message arrives
            assert await box.take(0.05) is None
            await box.put(f"next {attempt}")
        taken = await box.take(1)
        assert taken is not None and "poison" in taken.text
        await box.ack(taken, consumed=False)
    taken = await box.put("after") or await box.take(1)
    assert taken is not None and "poison" not in taken.text
    assert any("not delivered" in t for t, _ in world.notices)
    told = await world.bus.inbox("id-a").take(1)
    assert told is not None and "dead letters" in told.text


async def test_routing_role_topic_broadcast_and_operator(world: World) -> None:
    await world.bus.subscribe("id-b", "role:reviewer")
    await world.bus.subscribe("id-c", "topic:news")
    assert (await world.bus.send(A, "role:reviewer", "question", "q")).queued[0].startswith("b")
    assert (await world.bus.send(A, "reviewer", "question", "q2")).queued[0].startswith("b")
    news = await world.bus.send(A, "topic:news", "info", "n")
    assert [q.split()[0] for q in news.queued] == ["c"]
    everyone = await world.bus.send(A, "*", "info", "all")
    assert sorted(q.split()[0] for q in everyone.queued) == ["b", "c"]
    await world.bus.send(A, "operator", "question", "help?")
    assert world.notices[-1] == ("a → operator (question)", "help?")
    with pytest.raises(InvalidRequest, match="no live agent, role or topic"):
        await world.bus.send(A, "nobody", "info", "x")
    with pytest.raises(InvalidRequest, match="unknown message type"):
        await world.bus.send(A, "b", "gossip", "x")


async def test_sends_are_batched_into_few_transactions(world: World) -> None:
    before = world.bus.writer.batches
    await asyncio.gather(*(world.bus.send(OPERATOR_SENDER, "b", "info", f"m{i}")
                           for i in range(200)))
    assert world.bus.writer.batches - before < 20
    assert len(world.bus.inbox("id-b")) == 200


async def test_pair_window_cuts_off_and_tells_the_operator_once(world: World) -> None:
    limit = world.settings.bus_pair_limit
    for i in range(limit):
        assert (await world.bus.send(A, "b", "info", f"ping {i}")).queued
    refused = [await world.bus.send(A, "b", "info", f"ping more {i}") for i in range(5)]
    assert all(r.message_id is None and "batch the rest" in r.refused[0] for r in refused)
    assert sum("cut off" in t for t, _ in world.notices) == 1
    assert (await world.bus.send(A, "c", "info", "others still work")).queued
    assert (await world.bus.send(B, "a", "info", "and the other way")).queued


async def test_identical_repeat_dropped_inbox_cap_size_cap_and_rounds(world: World) -> None:
    await world.bus.send(A, "b", "info", "same")
    again = await world.bus.send(A, "b", "info", "same")
    assert again.message_id is None and again.refused[0].startswith("dropped")
    with pytest.raises(InvalidRequest, match="characters; the limit"):
        await world.bus.send(A, "b", "info", "x" * (world.settings.bus_max_body_chars + 1))
    world.bus.inbox("id-c").queued = world.settings.bus_inbox_cap
    full = await world.bus.send(A, "c", "info", "one more")
    assert "inbox is full" in full.refused[0]
    last = (await world.bus.send(A, "b", "question", "r0")).message_id
    for i in range(world.settings.bus_round_limit):
        sender = B if i % 2 == 0 else A
        last = (await world.bus.send(sender, "a" if sender is B else "b", "result",
                                     f"r{i + 1}", reply_to=last)).message_id
    with pytest.raises(LimitExceeded, match="rounds"):
        await world.bus.send(A, "b", "result", "one too many", reply_to=last)


async def test_killed_recipient_dead_letters_and_wake_returns_none(world: World) -> None:
    await world.bus.send(A, "b", "task", "never read")
    assert await world.bus.dead_letter("id-b", "b was killed") == 1
    box = world.bus.inbox("id-b")
    box.wake()
    assert await box.take(5) is None
    told: Any = await world.bus.inbox("id-a").take(1)
    assert "b was killed" in told.text


async def test_one_batch_stores_a_dedup_key_once_and_sequences_stay_per_recipient(world: World):
    sends = [world.bus.send(A, "b", "task", f"x{i}", dedup_key="same") for i in range(5)]
    sends += [world.bus.send(A, "c", "info", f"y{i}") for i in range(3)]
    results = await asyncio.gather(*sends)
    assert len({r.message_id for r in results[:5]}) == 1
    assert [r.duplicate for r in results[:5]] == [False, True, True, True, True]
    rows = await world.store.db.fetchall(
        "SELECT recipient_id, seq FROM bus_deliveries ORDER BY recipient_id, seq")
    assert [tuple(r) for r in rows] == [("id-b", 1), ("id-c", 1), ("id-c", 2), ("id-c", 3)]


async def test_closing_mid_batch_fails_its_writes_instead_of_leaving_them_waiting(world: World):
    """Regression: a batch in the writer thread when the bus closed left its callers (a
    runner's last ack) waiting forever, and shutdown waited 10 s for the agent loop."""
    gate = __import__("threading").Event()
    slow = world.bus.writer.submit(lambda conn: gate.wait(5))
    task = asyncio.ensure_future(slow)
    await asyncio.sleep(0.05)  # the batch is in the thread
    closing = asyncio.ensure_future(world.bus.close())
    await asyncio.sleep(0.05)
    gate.set()
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(task, 2)
    await closing


async def test_a_message_for_an_agent_another_worker_runs_wakes_that_worker(
        world: World) -> None:
    """On a shared database (supervisor/agents/handover.py wires it): the worker that runs the
    recipient is woken once per stored batch, not left to find it at its next renewal; a
    message for one of this worker's agents wakes nobody."""
    woken: list[str] = []

    async def wake(worker_id: str) -> None:
        woken.append(worker_id)

    world.bus.owner_of = lambda agent_id: "worker-2" if agent_id == "id-b" else None
    world.bus.wake_worker = wake
    await world.bus.send(A, "c", "task", "ours")
    assert woken == []
    await world.bus.send(A, "b", "task", "theirs")
    await wait_for(lambda: woken == ["worker-2"], 10, "worker-2 woken")
    assert (await world.bus.inbox("id-b").take(1)) is not None  # stored as for any recipient


async def test_an_inbox_recounted_from_the_store_lets_sends_through_again(world: World) -> None:
    """An agent another worker runs consumes its messages there: this worker's count of its
    queue only grows, so the handover recounts it from the store at each renewal; without that,
    the inbox cap would refuse every message after the first `bus_inbox_cap` ever sent."""
    box = world.bus.inbox("id-b")
    box.arrived(world.settings.bus_inbox_cap)
    refused = await world.bus.send(A, "b", "task", "one too many")
    assert refused.message_id is None and "inbox is full" in " ".join(refused.refused)
    box.recount(0)  # what the store says is open: all consumed on the other worker
    sent = await world.bus.send(A, "b", "task", "room again")
    assert sent.message_id is not None
