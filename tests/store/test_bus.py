"""Conformance of the bus's store: messages, one delivery per recipient with its sequence,
leases fenced by their token, release and dead letters, reclaim after a restart, topics. The
writes run on the bus's writer, one transaction each (`bus_tx`); the reads are BusStore's."""

from __future__ import annotations

from typing import Any

import pytest

from store import Store
from store.bus import (
    CONSUMED,
    DEAD,
    EXPIRED,
    LEASED,
    QUEUED,
    RESTART_REASON,
    BusRepo,
    Lease,
    NewMessage,
)
from store.protocols import BusStore
from tests.store.conftest import T0, Tx


@pytest.fixture
def bus(store: Store) -> BusStore:
    return store.bus


def msg(body: str, *to: str, sender: str = "a1", **kw: Any) -> NewMessage:
    return NewMessage(sender=sender, sender_name=sender, recipient=",".join(to), type="info",
                      body=body, recipients=to, created_at=kw.pop("created_at", T0), **kw)


async def send(store: Store, bus_tx: Tx, *msgs: NewMessage) -> list[tuple[int, bool]]:
    return list(await bus_tx(lambda c: store.bus.insert_many(c, list(msgs))))


async def lease(store: Store, bus_tx: Tx, recipient: str, token: str, *, now: float = T0,
                until: float = T0 + 60, limit: int = 10, holder: str = "sup-1:") -> Any:
    return await bus_tx(lambda c: store.bus.lease(c, recipient, holder=holder, token=token,
                                                  until=until, now=now, limit=limit))


async def test_insert_stores_the_message_and_one_delivery_per_recipient(
        store: Store, bus: BusStore, bus_tx: Tx) -> None:
    (mid, dup), = await send(store, bus_tx, msg("hello", "b1", "c1", reply_to=None))
    assert not dup and mid > 0
    m = await bus.message(mid)
    assert m is not None
    assert (m.id, m.sender, m.recipient, m.type, m.body, m.reply_to, m.dedup_key, m.expires_at,
            m.created_at) == (mid, "a1", "b1,c1", "info", "hello", None, None, None, T0)
    deliveries = await bus.deliveries(mid)
    assert [(d.recipient_id, d.seq, d.lane, d.state, d.attempts) for d in deliveries] == [
        ("b1", 1, 1, QUEUED, 0), ("c1", 1, 1, QUEUED, 0)]
    assert await bus.message(mid + 100) is None
    assert await bus.deliveries(mid + 100) == []


async def test_sequences_count_per_recipient(store: Store, bus: BusStore, bus_tx: Tx) -> None:
    ids = [i for i, _ in await send(store, bus_tx, msg("1", "b1"), msg("2", "b1", "c1"))]
    (third, _), = await bus_tx(lambda c: [store.bus.insert(c, msg("3", "c1"))])
    assert third > ids[1] > ids[0]
    assert [(d.recipient_id, d.seq) for d in await bus.deliveries(ids[1])] == [
        ("b1", 2), ("c1", 1)]
    assert [(d.recipient_id, d.seq) for d in await bus.deliveries(third)] == [("c1", 2)]


async def test_a_dedup_key_stores_a_message_once(store: Store, bus: BusStore,
                                                 bus_tx: Tx) -> None:
    first, again, other_sender = await send(
        store, bus_tx, msg("x", "b1", dedup_key="k"), msg("y", "b1", dedup_key="k"),
        msg("z", "b1", sender="a2", dedup_key="k"))
    assert (first[1], again, other_sender[1]) == (False, (first[0], True), False)
    later = await send(store, bus_tx, msg("w", "b1", dedup_key="k"))
    assert later == [(first[0], True)]
    assert await bus.open_counts() == {"b1": 2}


async def test_a_lease_takes_interrupts_first_then_in_order(store: Store, bus: BusStore,
                                                            bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("1", "b1"), msg("2", "b1"), msg("urgent", "b1", lane=0),
               msg("3", "b1"))
    taken = await lease(store, bus_tx, "b1", "t1", limit=3)
    assert [t.message.body for t in taken] == ["urgent", "1", "2"]
    d = taken[0].delivery
    assert (d.state, d.attempts, d.lease_holder, d.lease_token, d.lease_expires_at,
            d.delivered_at) == (LEASED, 1, "sup-1:", "t1", T0 + 60, T0)
    # held: not taken again while the lease lasts
    assert [t.message.body for t in await lease(store, bus_tx, "b1", "t2")] == ["3"]
    assert await lease(store, bus_tx, "b1", "t3") == []
    assert await bus.state_counts() == {LEASED: 4}


async def test_a_lease_that_ran_out_is_taken_again(store: Store, bus: BusStore,
                                                   bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("1", "b1"))
    await lease(store, bus_tx, "b1", "t1", until=T0 + 10)
    [again] = await lease(store, bus_tx, "b1", "t2", now=T0 + 10, until=T0 + 70)
    d = again.delivery
    assert (d.lease_token, d.attempts, d.delivered_at) == ("t2", 2, T0)  # first delivery kept
    stale = Lease("t1", "b1", (d.seq,))
    assert await bus_tx(lambda c: store.bus.ack(c, stale, T0 + 11)) == 0  # fenced


async def test_ack_consumes_only_under_the_lease_token(store: Store, bus: BusStore,
                                                       bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("1", "b1"), msg("2", "b1"))
    taken = await lease(store, bus_tx, "b1", "t1")
    held = Lease("t1", "b1", tuple(t.delivery.seq for t in taken))
    assert await bus_tx(lambda c: store.bus.ack(c, Lease("wrong", "b1", held.seqs), T0)) == 0
    assert await bus_tx(lambda c: store.bus.ack(c, held, T0 + 5)) == 2
    assert await bus_tx(lambda c: store.bus.ack(c, held, T0 + 6)) == 0  # once
    [d] = await bus.deliveries(taken[0].message.id)
    assert (d.state, d.consumed_at, d.lease_expires_at) == (CONSUMED, T0 + 5, None)
    assert await bus.open_counts() == {}


async def test_ack_many_counts_every_delivery(store: Store, bus: BusStore,
                                              bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("1", "b1"), msg("2", "c1"))
    lb = await lease(store, bus_tx, "b1", "tb")
    lc = await lease(store, bus_tx, "c1", "tc")
    acks = [(Lease("tb", "b1", (lb[0].delivery.seq,)), T0),
            (Lease("tc", "c1", (lc[0].delivery.seq,)), T0)]
    assert await bus_tx(lambda c: store.bus.ack_many(c, acks)) == 2
    assert await bus.state_counts() == {CONSUMED: 2}


async def test_extend_moves_a_held_lease(store: Store, bus: BusStore, bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("1", "b1"))
    [t] = await lease(store, bus_tx, "b1", "t1")
    held = Lease("t1", "b1", (t.delivery.seq,))
    assert await bus_tx(lambda c: store.bus.extend(c, held, T0 + 500)) == 1
    assert await bus_tx(lambda c: store.bus.extend(c, Lease("x", "b1", held.seqs), T0)) == 0
    [d] = await bus.deliveries(t.message.id)
    assert d.lease_expires_at == T0 + 500
    assert await lease(store, bus_tx, "b1", "t2", now=T0 + 100) == []


async def test_release_requeues_then_dead_letters(store: Store, bus: BusStore,
                                                  bus_tx: Tx) -> None:
    (mid, _), = await send(store, bus_tx, msg("1", "b1"))
    for attempt, token in enumerate(("t1", "t2"), start=1):
        [t] = await lease(store, bus_tx, "b1", token)
        dead, dropped = await bus_tx(lambda c, t=t, token=token: store.bus.release(
            c, Lease(token, "b1", (t.delivery.seq,)), max_attempts=2, reason="turn failed",
            now=T0))
        [d] = await bus.deliveries(mid)
        if attempt == 1:
            assert (dead, dropped) == ([], 0)
            assert (d.state, d.attempts, d.lease_token, d.reason) == (
                QUEUED, 1, None, "turn failed")
        else:
            assert [m.id for m in dead] == [mid] and dropped == 0
            assert (d.state, d.reason) == (DEAD, "turn failed (2 attempts)")
    assert await lease(store, bus_tx, "b1", "t3") == []


async def test_release_consumes_the_operators_messages(store: Store, bus: BusStore,
                                                       bus_tx: Tx) -> None:
    (mid, _), = await send(store, bus_tx, msg("do it", "b1", sender="operator"))
    [t] = await lease(store, bus_tx, "b1", "t1")
    dead, dropped = await bus_tx(lambda c: store.bus.release(
        c, Lease("t1", "b1", (t.delivery.seq,)), max_attempts=5, reason="turn failed",
        now=T0 + 1))
    assert (dead, dropped) == ([], 1)
    [d] = await bus.deliveries(mid)
    assert (d.state, d.consumed_at, d.reason) == (
        CONSUMED, T0 + 1, "turn failed: reported to the operator")


async def test_reclaim_requeues_another_supervisors_leases(store: Store, bus: BusStore,
                                                           bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("old", "b1"), msg("mine", "c1"))
    await lease(store, bus_tx, "b1", "t1", holder="sup-0:")
    await lease(store, bus_tx, "c1", "t2", holder="sup-1:")
    assert await bus_tx(lambda c: store.bus.reclaim(c, "sup-1:", T0)) == 1
    [b] = await bus.of_recipient("b1")
    assert (b.delivery.state, b.delivery.lease_token, b.delivery.reason) == (
        QUEUED, None, "redelivered after a restart")
    [c] = await bus.of_recipient("c1")
    assert c.delivery.state == LEASED


async def test_an_owned_agents_leases_are_reclaimed_by_its_owner_alone_when_shared(
        store: Store, bus: BusStore, bus_tx: Tx, backend: str) -> None:
    """Several workers on one database (PostgreSQL): a starting worker's reclaim leaves the
    leases of agents another worker owns (its running turn may hold them); the owner takes
    back its agent's, one agent at a time. SQLite has one worker: it takes back every one."""
    await send(store, bus_tx, msg("theirs", "b1"), msg("nobody's", "c1"))
    await store.leases.claim("b1", "worker-2", 60.0)
    await lease(store, bus_tx, "b1", "t1", holder="sup-0:")
    await lease(store, bus_tx, "c1", "t2", holder="sup-0:")
    shared = backend != "sqlite"
    assert await bus_tx(lambda c: store.bus.reclaim(c, "sup-1:", T0)) == (1 if shared else 2)
    [b] = await bus.of_recipient("b1")
    assert b.delivery.state == (LEASED if shared else QUEUED)
    assert await bus_tx(lambda c: store.bus.reclaim(c, "sup-2:", T0, recipient_id="b1")) == (
        1 if shared else 0)
    [b] = await bus.of_recipient("b1")
    assert b.delivery.state == QUEUED


async def test_reclaim_consumes_an_operators_message_whose_turn_began(
        store: Store, bus: BusStore, bus_tx: Tx, make_agent: Any) -> None:
    await make_agent("b1", "bravo")
    (mid, _), = await send(store, bus_tx, msg("do it", "b1", sender="operator"))
    await lease(store, bus_tx, "b1", "t1", holder="sup-0:")
    await store.turns.start("b1", "do it")  # at T0, not before the delivery
    await bus_tx(lambda c: store.bus.reclaim(c, "sup-1:", T0 + 1))
    [d] = await bus.deliveries(mid)
    assert (d.state, d.reason, d.consumed_at) == (CONSUMED, RESTART_REASON, T0 + 1)


async def test_queued_messages_expire_unread(store: Store, bus: BusStore, bus_tx: Tx) -> None:
    (gone, _), (kept, _) = await send(store, bus_tx, msg("stale", "b1", expires_at=T0 + 5),
                                      msg("fresh", "b1", expires_at=T0 + 500))
    (also, _), = await send(store, bus_tx, msg("stale too", "c1", expires_at=T0 + 5))
    expired, live = await bus_tx(lambda c: store.bus.take(
        c, "b1", holder="h", token="t", until=T0 + 60, now=T0 + 10, limit=10))
    assert [m.id for m in expired] == [gone]
    assert [(t.message.id, t.attempts) for t in live] == [(kept, 1)]
    [d] = await bus.deliveries(gone)
    assert (d.state, d.reason) == (EXPIRED, "expired unread")
    ended = await bus_tx(lambda c: store.bus.expire_queued(c, T0 + 10))
    assert [(m.id, rid) for m, rid in ended] == [(also, "c1")]
    assert await bus_tx(lambda c: store.bus.expire_queued(c, T0 + 10)) == []
    assert await bus.state_counts() == {EXPIRED: 2, LEASED: 1}


async def test_dead_letter_open_ends_every_open_delivery(store: Store, bus: BusStore,
                                                         bus_tx: Tx) -> None:
    ids = [i for i, _ in await send(store, bus_tx, msg("1", "b1"), msg("2", "b1"),
                                    msg("3", "c1"))]
    await lease(store, bus_tx, "b1", "t1", limit=1)
    dead = await bus_tx(lambda c: store.bus.dead_letter_open(c, "b1", "killed", T0))
    assert sorted(m.id for m in dead) == ids[:2]
    assert [d.reason for d in (await bus.deliveries(ids[0]))] == ["killed"]
    assert await bus.open_counts() == {"c1": 1}
    assert await bus_tx(lambda c: store.bus.dead_letter_open(c, "b1", "again", T0)) == []


async def test_of_recipient_filters_states_and_limits(store: Store, bus: BusStore,
                                                      bus_tx: Tx) -> None:
    await send(store, bus_tx, msg("1", "b1"), msg("2", "b1"), msg("i", "b1", lane=0))
    await lease(store, bus_tx, "b1", "t1", limit=1)
    assert [x.message.body for x in await bus.of_recipient("b1")] == ["i", "1", "2"]
    assert [x.message.body for x in await bus.of_recipient("b1", states=(QUEUED,))] == [
        "1", "2"]
    assert [x.message.body for x in await bus.of_recipient("b1", limit=1)] == ["i"]
    assert await bus.of_recipient("b1", states=(DEAD,)) == []
    assert await bus.of_recipient("nobody") == []


async def test_recent_is_newest_last(store: Store, bus: BusStore, bus_tx: Tx) -> None:
    assert await bus.recent() == []
    await send(store, bus_tx, msg("1", "b1"), msg("2", "c1", sender="b1"), msg("3", "c1"))
    assert [m.body for m in await bus.recent()] == ["1", "2", "3"]
    assert [m.body for m in await bus.recent(limit=2)] == ["2", "3"]
    assert [m.body for m in await bus.recent("b1")] == ["1", "2"]  # received or sent
    assert [m.body for m in await bus.recent("c1", limit=1)] == ["3"]


async def test_subscriptions_topics_and_roles(store: Store, bus: BusStore,
                                              bus_tx: Tx) -> None:
    assert await bus.subscribers("topic:ci") == []
    await bus_tx(lambda c: store.bus.subscribe(c, "topic:ci", "b1", T0 + 2))
    await bus_tx(lambda c: store.bus.subscribe(c, "topic:ci", "a1", T0 + 1))
    await bus_tx(lambda c: store.bus.subscribe(c, "topic:ci", "b1", T0 + 9))  # idempotent
    await bus_tx(lambda c: store.bus.subscribe(c, "role:reviewer", "b1", T0 + 3))
    await bus_tx(lambda c: store.bus.subscribe(c, "role:tester", "b1", T0 + 4))
    await bus_tx(lambda c: store.bus.subscribe(c, "role:reviewer", "c1", T0 + 5))
    assert await bus.subscribers("topic:ci") == ["a1", "b1"]  # oldest first
    assert await bus.topics_of("b1") == ["role:reviewer", "role:tester", "topic:ci"]
    assert await bus.roles() == {"b1": ("reviewer", "tester"), "c1": ("reviewer",)}
    await bus_tx(lambda c: store.bus.unsubscribe(c, "topic:ci", "b1"))
    await bus_tx(lambda c: store.bus.unsubscribe(c, "topic:ci", "b1"))  # harmless
    assert await bus.subscribers("topic:ci") == ["a1"]
    assert await bus.topics_of("nobody") == []


async def test_search_reads_message_bodies_newest_first(store: Store, bus: BusStore,
                                                        bus_tx: Tx) -> None:
    (old, _), = await send(store, bus_tx, msg("The build is RED again", "b1"))
    (new, _), = await send(store, bus_tx, msg("build green, merging", "c1",
                                              created_at=T0 + 10))
    await send(store, bus_tx, msg("lunch?", "b1"))
    assert [m.id for m in await bus.search(["build"])] == [new, old]
    assert [m.id for m in await bus.search(["red", "build"])] == [old]
    assert [m.id for m in await bus.search(["build"], since=T0 + 5)] == [new]
    assert await bus.search(["b_ild"]) == []


async def test_two_workers_writing_the_bus_give_distinct_ids_and_sequences(
        store: Store, bus: BusStore, bus_tx: Tx, backend: str) -> None:
    """Two workers' buses (a repository each, with its own memory of the last id and of each
    recipient's sequence) write to one database in turn: on PostgreSQL, where several workers
    share it, every id and every recipient's sequence is distinct. SQLite has one writer,
    which is why it may keep them in memory."""
    if backend == "sqlite":
        pytest.skip("one process writes a SQLite store's bus")
    other = BusRepo(store.db)
    ours = await send(store, bus_tx, msg("one", "b1"))
    theirs = await bus_tx(lambda c: other.insert_many(c, [msg("two", "b1", sender="x1")]))
    ours += await send(store, bus_tx, msg("three", "b1"))
    ids = [i for i, _ in [*ours, *theirs]]
    assert len(set(ids)) == 3, ids
    rows = await bus.of_recipient("b1")
    assert sorted(r.delivery.seq for r in rows) == [1, 2, 3]
