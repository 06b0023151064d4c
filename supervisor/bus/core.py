"""The bus: durable messages between agents and the operator, pushed into agents' turns.

Every message is a row, with one delivery row per recipient (store/bus.py). An agent's inbox is
a `BusInbox`: a take leases everything pending of that agent as one turn (interrupts first,
then in order), the lease is extended while the turn runs and acknowledged with its token when
it ends; a failed turn puts it back (dead letter after `bus_max_attempts`); a supervisor crash
leaves leases that the next start reclaims, so they are delivered again (at least once).

All writes go through one writer task (supervisor/bus/writer.py) that puts whatever is waiting
(sends, leases, acks) into one transaction, so a storm of sends costs one commit per batch, not
per row.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any, TypeVar

from store import Store
from store.bus import DEAD, Lease, MessageRow, NewMessage, Taking
from store.errors import StoreError
from store.writer import SyncConn
from supervisor.bus.guards import GuardLimits, Guards
from supervisor.bus.inbox import Origin, Taken
from supervisor.bus.message import (
    CHARTER_SENDER,
    OPERATOR,
    OPERATOR_SENDER,
    SYSTEM,
    SYSTEM_SENDER,
    TYPES,
    AskOperator,
    DeliveryStatus,
    Members,
    Notify,
    Sender,
    Sent,
    origin_of,
    render,
)
from supervisor.bus.writer import BatchWriter
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.errors import InvalidRequest, LimitExceeded, ShuttingDown

logger = logging.getLogger(__name__)

_TYPE_SET = frozenset(TYPES)
_PREFIXES = ("role:", "topic:", "#")
EXPIRY_SWEEP_S = 60.0  # how often expired messages are looked for, read or not
T = TypeVar("T")



class BusState(StrEnum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


def bus_limits(settings: Settings) -> GuardLimits:
    return GuardLimits(pair_limit=settings.bus_pair_limit,
                       pair_window_s=settings.bus_pair_window_s,
                       pair_cooldown_s=settings.bus_pair_cooldown_s,
                       round_limit=settings.bus_round_limit,
                       rate_alarm_per_min=settings.bus_rate_alarm_per_min)


# A named tuple made from a tuple without its generated __new__ (a Python frame per call): for
# the message and the reply each send makes. The same object NewMessage(...) would make.
_row: Any = tuple.__new__


class Bus:
    def __init__(self, store: Store, settings: Settings, members: Members, *,
                 notify: Notify, halted: Callable[[], bool] = lambda: False,
                 clock: Clock = SYSTEM_CLOCK, ask_operator: AskOperator | None = None) -> None:
        self.store = store
        self.settings = settings
        self.members = members
        self.notify = notify
        self.ask_operator = ask_operator
        self.halted = halted
        self.clock = clock
        self.run_id = secrets.token_hex(6)  # lease holders of this supervisor start with it
        # Lease tokens: this run's random id and a count, so no two leases ever share one (the
        # fencing needs no more), without a call to the OS's random source per turn.
        self._tokens = itertools.count(1)
        self.state = BusState.NEW
        self.guards = Guards(bus_limits(settings))
        self.writer = BatchWriter(store)
        self.writer.on_stored = self._stored
        self._inboxes: dict[str, BusInbox] = {}
        self._names: dict[str, str] = {}  # agent id -> name, of every agent there has been
        self._by_name: dict[str, list[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._active: dict[str, Lease] = {}  # lease token -> the deliveries it holds
        self._writer_task: asyncio.Task[None] | None = None
        self.reclaimed = 0
        # A shared database: the worker running an agent another worker runs (None: ours),
        # and how to wake it for a stored message (else its next renewal finds it).
        self.owner_of: Callable[[str], str | None] = lambda _agent_id: None
        self.wake_worker: Callable[[str], Awaitable[None]] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Leases of a previous supervisor go back to the queue; counts are loaded."""
        if self.state != BusState.NEW:
            return
        await self.writer.conn.open()
        [(ok, value)] = await self.writer.conn.batch(
            [lambda conn: self.store.bus.reclaim(conn, self.run_id, self.clock.now())])
        if not ok:
            await self.writer.conn.close()
            raise value
        self.reclaimed = value
        if self.reclaimed:
            logger.warning("bus: redelivering after a restart count=%d", self.reclaimed)
        for agent_id, n in (await self.store.bus.open_counts()).items():
            self.inbox(agent_id).queued = n
        self._writer_task = asyncio.create_task(self.writer.run(), name="bus-writer")
        self._spawn("bus-leases", self._keep_leases())
        self._spawn("bus-expiry", self._sweep_expired())
        self.state = BusState.RUNNING

    async def reclaim_for(self, agent_id: str) -> None:  # `start`'s, for one agent adopted
        self.reclaimed += int(await self._write(lambda c: self.store.bus.reclaim(
            c, self.run_id, self.clock.now(), recipient_id=agent_id)))

    async def close(self) -> None:
        if self.state == BusState.CLOSED:
            return
        self.state = BusState.CLOSED
        tasks = list(self._tasks)
        if self._writer_task is not None:
            tasks.append(self._writer_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.writer.fail_waiting()
        await self.writer.conn.close()

    def spawn_task(self, name: str, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """A task the bus owns (cancelled when it closes): a question's answer, a notice."""
        return self._spawn(name, coro)

    def _spawn(self, name: str, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _write(self, fn: Callable[[SyncConn], T]) -> asyncio.Future[T]:
        """Queue a write for the writer's next batch; await the future for its value. Not a
        coroutine (two turns' worth of frames for every lease and acknowledgement)."""
        if self.state is not BusState.RUNNING:
            raise ShuttingDown()
        return self.writer.submit(fn)

    def inbox(self, agent_id: str, name: str = "") -> BusInbox:
        box = self._inboxes.get(agent_id)
        if box is None:
            box = self._inboxes[agent_id] = BusInbox(self, agent_id, name)
        elif name:
            box.name = name
        return box

    # -- sending ----------------------------------------------------------------------------------

    def _directory(self) -> dict[str, list[str]]:
        """name (and id) -> agent ids, rebuilt only when an agent was added; liveness is
        asked per message (agents come and go, names are reused)."""
        if len(self._names) != self.members.count():
            everyone = self.members.everyone()
            self._names = dict(everyone)
            self._by_name = {}
            for agent_id, name in everyone:
                self._by_name.setdefault(name, []).append(agent_id)
                self._by_name.setdefault(agent_id, []).append(agent_id)
        return self._by_name

    def _resolve_name(self, to: str) -> tuple[str, list[str]] | None:
        """`resolve` for the common case, a live agent's name, without a coroutine; None for
        anything else (the operator, everyone, a role or topic, nobody)."""
        to = to.strip()
        if to == OPERATOR or to == "*" or to.startswith(_PREFIXES):
            return None
        members = self.members
        by_name = self._by_name if len(self._names) == members.count() else self._directory()
        for agent_id in by_name.get(to, ()):
            if members.is_live(agent_id):
                return self._names[agent_id], [agent_id]
        return None

    async def resolve(self, to: str, sender_id: str) -> tuple[str, list[str]]:
        """The address as stored and the agent ids it reaches (OPERATOR: none)."""
        to = to.strip()
        is_live = self.members.is_live
        if to == OPERATOR:
            return OPERATOR, []
        directory = self._directory()
        if to == "*":
            return "*", [i for i in self._names if i != sender_id and is_live(i)]
        if to.startswith(_PREFIXES):  # one test for the common case, a name
            prefix = next(p for p in _PREFIXES if to.startswith(p))
            topic = ("role:" if prefix == "role:" else "topic:") + to[len(prefix):].strip()
            subs = await self.store.bus.subscribers(topic)
            return topic, [i for i in subs if i != sender_id and is_live(i)]
        for agent_id in directory.get(to, ()):
            if is_live(agent_id):
                return self._names[agent_id], [agent_id]
        subs = [i for i in await self.store.bus.subscribers(f"role:{to}") if is_live(i)]
        if subs:
            return f"role:{to}", [i for i in subs if i != sender_id]
        raise InvalidRequest(f"no live agent, role or topic {to!r}: send to an agent's name, "
                             "role:<role>, topic:<topic>, * (everyone) or operator")

    def _check_form(self, kind: str, body: str, sender: Sender) -> None:
        if kind not in _TYPE_SET:
            raise InvalidRequest(f"unknown message type {kind!r}; use one of {', '.join(TYPES)}")
        if not body or body.isspace():  # not strip(): that copies every body
            raise InvalidRequest("the message is empty")
        limit = (self.settings.max_prompt_chars if sender.id == OPERATOR
                 else self.settings.bus_max_body_chars)
        if len(body) > limit:
            raise InvalidRequest(f"the message is {len(body):,} characters; the limit is "
                                 f"{limit:,}. Put the long part in a file and send its path, or "
                                 "split it")

    async def send(self, sender: Sender, to: str, kind: str, body: str, *,
                   reply_to: int | None = None, dedup_key: str | None = None,
                   agent_id: str | None = None, origin: Origin | None = None) -> Sent:
        """Store a message for everyone `to` reaches, past the guards (each refusal is
        explained); an idle recipient gets a turn at once, a busy one when its turn ends.
        `agent_id`: exactly that agent, live or not (an operator's /ask restarts a stopped one).
        `origin`: recorded where the sender does not say it (a schedule's first prompt)."""
        self._check_form(kind, body, sender)
        if agent_id is not None:
            address, targets = to, [agent_id]
        else:
            address, targets = self._resolve_name(to) or await self.resolve(to, sender.id)
        if address != OPERATOR and not targets:
            raise InvalidRequest(f"{to!r} reaches no live agent right now")
        if dedup_key is not None:
            dedup_key = dedup_key.strip()[:200] or None
        guarded = sender.id not in (OPERATOR, SYSTEM)
        if guarded and reply_to is not None and \
                (why := self.guards.check_round(reply_to)) is not None:
            raise LimitExceeded(why.reason, "Stop replying, or ask the operator.")
        mono = self.clock.monotonic()
        admitted, refused, cut_off = self._admit(sender, targets, kind, body, guarded, mono)
        for name in cut_off:
            await self._tell_cut_off(sender, name)
        if targets and not admitted:
            return Sent(None, False, (), tuple(refused))
        now = self.clock.now()
        msg: NewMessage = _row(NewMessage, (
            sender.id, sender.name, address, kind, body, tuple(admitted), now, reply_to,
            dedup_key, now + self.settings.bus_message_ttl_s, 0 if kind == "interrupt" else 1,
            None if origin is None else str(origin)))
        if self.state is not BusState.RUNNING:
            raise ShuttingDown()
        message_id, duplicate = await self.writer.insert(msg)
        if not duplicate:
            self.guards.stored(message_id, reply_to)
            if address == OPERATOR:
                await self._to_operator(sender, kind, body, message_id)
            if guarded and (rate := self.guards.fleet_rate(mono, len(admitted) or 1)):
                await self._rate_alarm(rate)
        state_of, names, boxes = self.members.state_of, self._names, self._inboxes
        if len(admitted) == 1:  # the common case, without a comprehension's frame
            i = admitted[0]
            targets_of: tuple[tuple[str, str, int], ...] = (
                (names.get(i, i), state_of(i), boxes[i].queued),)
        else:
            targets_of = tuple([(names.get(i, i), state_of(i), boxes[i].queued)
                                for i in admitted])
        sent: Sent = _row(Sent, (message_id, duplicate, targets_of, tuple(refused),
                                 address == OPERATOR))
        return sent

    async def _to_operator(self, sender: Sender, kind: str, body: str, message_id: int) -> None:
        """A question from an agent is an escalation, its answer a `result` back; anything
        else is a notice."""
        agent = sender.id if sender.id not in (OPERATOR, SYSTEM) else None
        if kind != "question" or agent is None or self.ask_operator is None:
            await self.notify(agent, f"{sender.name} → operator ({kind})", body)
            return
        ask = self.ask_operator

        async def answer_back() -> None:
            text, by_charter = await ask(agent, f"{sender.name} asks (message #{message_id})",
                                         body)
            with contextlib.suppress(InvalidRequest, LimitExceeded, ShuttingDown, StoreError):
                await self.send(CHARTER_SENDER if by_charter else OPERATOR_SENDER, sender.name,
                                "result", text, reply_to=message_id, agent_id=agent)

        self._spawn(f"bus-question:{message_id}", answer_back())

    def _admit(self, sender: Sender, targets: list[str], kind: str, body: str,
               guarded: bool, mono: float) -> tuple[list[str], list[str], list[str]]:
        """(admitted, refused: one explanation each, names whose pair this cut off). Not a
        coroutine: it runs for every message, and only a cut-off needs to await (a notice)."""
        if not guarded:
            for rid in targets:
                self.inbox(rid)  # counted from now on
            return targets, [], []
        admitted: list[str] = []
        refused: list[str] = []
        cut_off: list[str] = []
        cap, names, boxes = self.settings.bus_inbox_cap, self._names, self._inboxes
        for rid in targets:
            name = names.get(rid, rid)
            box = boxes.get(rid)
            if box is None:  # not `or`: an empty inbox is falsy (its __len__)
                box = self.inbox(rid)
            if box.queued >= cap:
                refused.append(f"refused for {name}: its inbox is full "
                               f"({box.queued} queued); wait, or batch the rest into one message")
                continue
            why = self.guards.check_pair(sender.id, rid, kind, body, mono, name)
            if why is not None:
                refused.append(why.reason)
                if why.cut_off:
                    cut_off.append(name)
                continue
            admitted.append(rid)
        return admitted, refused, cut_off

    async def _tell_cut_off(self, sender: Sender, name: str) -> None:
        lim = self.guards.limits
        await self.notify(None, f"Bus: {sender.name} ↔ {name} cut off",
                          f"{sender.name} sent {name} {lim.pair_limit} messages in "
                          f"{lim.pair_window_s:.0f}s; further ones are refused for "
                          f"{lim.pair_cooldown_s:.0f}s. The rest of the fleet is not affected.")

    async def _rate_alarm(self, rate: int) -> None:
        await self.notify(None, "Bus: message rate alarm",
                          f"{rate} messages in the last minute (alarm above "
                          f"{self.guards.limits.rate_alarm_per_min}). /bus shows the "
                          "traffic; /messages who sends it.")

    def _stored(self, msgs: list[NewMessage]) -> None:
        """A batch's messages are stored: each recipient's inbox counts them (once per batch,
        not per message), and an interrupt interrupts a busy recipient's turn."""
        arrived: dict[str, int] = {}
        get = arrived.get
        for msg in msgs:
            recipients = msg.recipients
            if len(recipients) == 1:
                rid = recipients[0]
                arrived[rid] = get(rid, 0) + 1
            else:
                for rid in recipients:
                    arrived[rid] = get(rid, 0) + 1
            if msg.type == "interrupt":
                for rid in recipients:
                    if self.members.state_of(rid) == "busy":
                        self._spawn(f"bus-interrupt:{rid}", self.members.interrupt(rid))
        boxes = self._inboxes
        for rid, n in arrived.items():
            box = boxes.get(rid)
            (self.inbox(rid) if box is None else box).arrived(n)
        if self.wake_worker is not None:  # one wake-up per worker and batch
            for worker in {w for rid in arrived if (w := self.owner_of(rid)) is not None}:
                self._spawn(f"bus-wake:{worker}", self.wake_worker(worker))

    def _name(self, agent_id: str) -> str:
        return self._names.get(agent_id, agent_id)

    async def _tell_sender(self, msg: MessageRow, what: str) -> None:
        """A message that could not be delivered: its sender hears why (an agent as a bus
        message, the operator as a notice), and a dead letter reaches the operator too."""
        text = f"Your message #{msg.id} ({msg.type} to {msg.recipient}) {what}."
        if msg.sender not in (OPERATOR, SYSTEM) and msg.sender in dict(self.members.live()):
            with contextlib.suppress(InvalidRequest, LimitExceeded, ShuttingDown, StoreError):
                await self.send(SYSTEM_SENDER, msg.sender, "status", text)
        if msg.sender == OPERATOR or "dead letter" in what:
            await self.notify(None, f"Bus: message #{msg.id} not delivered", text)

    # -- delivery (called by BusInbox) ------------------------------------------------------------

    async def lease(self, box: BusInbox) -> Taken | None:
        now = self.clock.now()
        token = f"{self.run_id}.{next(self._tokens):x}"
        holder = f"{self.run_id}:{box.agent_id}"
        until = now + self.settings.bus_lease_s

        def op(conn: SyncConn) -> tuple[list[MessageRow], list[Taking]]:
            return self.store.bus.take(conn, box.agent_id, holder=holder, token=token,
                                             until=until, now=now,
                                             limit=self.settings.bus_turn_max_messages)

        expired, items = await self._write(op)
        box.queued = max(0, box.queued - len(expired) - len(items))
        if not items:
            box.queued = 0
        for msg in expired:
            await self._tell_sender(msg, "expired before it was read")
        if not items:
            return None
        self._active[token] = Lease(token, box.agent_id, tuple([i.seq for i in items]))
        return Taken(render(items, box.queued), token, len(items),
                     tuple([origin_of(i.message) for i in items]),
                     tuple([i.message.id for i in items]))

    async def _keep_leases(self) -> None:
        """Extend every lease held by a running turn, so that a turn longer than the lease is
        never delivered a second time: one task and one write for all of them."""
        every = max(0.05, self.settings.bus_lease_s / 3)
        while True:
            await self.clock.sleep(every)
            leases = list(self._active.values())
            if not leases:
                continue
            until = self.clock.now() + self.settings.bus_lease_s
            try:
                await self._write(self._extension(leases, until))
            except (StoreError, ShuttingDown):
                logger.warning("bus: lease extension failed count=%d", len(leases),
                               exc_info=True)

    async def _sweep_expired(self) -> None:
        """Expired messages end as expired, and their senders are told, even when nobody
        reads the recipient's inbox (a lease finds them too, on its way)."""
        while True:
            await self.clock.sleep(EXPIRY_SWEEP_S)
            try:
                ended = await self._write(self._expiry(self.clock.now()))
            except (StoreError, ShuttingDown):
                logger.warning("bus: expiry sweep failed", exc_info=True)
                continue
            told: set[int] = set()
            for msg, rid in ended:
                box = self._inboxes.get(rid)
                if box is not None:
                    box.queued = max(0, box.queued - 1)
                if msg.id not in told:
                    told.add(msg.id)
                    await self._tell_sender(msg, "expired before it was read")

    def _expiry(self, now: float) -> Callable[[SyncConn],
                                              list[tuple[MessageRow, str]]]:
        return lambda conn: self.store.bus.expire_queued(conn, now)

    def _extension(self, leases: list[Lease],
                   until: float) -> Callable[[SyncConn], int]:
        return lambda conn: sum(self.store.bus.extend(conn, x, until) for x in leases)

    async def ack(self, box: BusInbox, taken: Taken, consumed: bool) -> None:
        lease = self._active.pop(taken.token or "", None)
        if lease is None:
            return
        if self.state != BusState.RUNNING:
            return  # shutting down: the lease stays, and the next start delivers it again
        now = self.clock.now()
        try:
            if consumed:
                await self.writer.ack(lease, now)  # with the batch's others, one statement
                return
            dead, dropped = await self._write(lambda c: self.store.bus.release(
                c, lease, max_attempts=self.settings.bus_max_attempts,
                reason="the recipient's turn failed", now=now))
        except (StoreError, ShuttingDown):
            # Unacknowledged, the lease runs out (or the next start reclaims it): delivered
            # again, never lost.
            logger.warning("bus: ack failed agent=%s", box.agent_id, exc_info=True)
            return
        # Back in the queue, but held: a failed agent restarts on its next message, as it
        # always has, not on the one that may have made it fail (that comes along with it).
        box.queued += max(0, taken.count - len(dead) - dropped)
        box.held = True
        for msg in dead:
            await self._tell_sender(msg, f"went to the dead letters: {box.agent_id}'s turns "
                                         f"failed {self.settings.bus_max_attempts} times")

    async def dead_letter(self, agent_id: str, reason: str) -> int:
        """Everything open for `agent_id` ends as a dead letter (killed, over budget)."""
        if self.state != BusState.RUNNING:
            return 0
        now = self.clock.now()
        dead = await self._write(
            lambda c: self.store.bus.dead_letter_open(c, agent_id, reason, now))
        self.inbox(agent_id).queued = 0
        for msg in dead:
            if msg.sender != OPERATOR:
                await self._tell_sender(msg, f"went to the dead letters: {reason}")
        return len(dead)

    # -- reading ----------------------------------------------------------------------------------

    async def status(self, message_id: int) -> tuple[MessageRow, tuple[DeliveryStatus, ...]]:
        msg = await self.store.bus.message(message_id)
        if msg is None:
            raise InvalidRequest(f"there is no message #{message_id}")
        names = dict(self.members.live())
        rows = await self.store.bus.deliveries(message_id)
        return msg, tuple(DeliveryStatus(names.get(d.recipient_id, d.recipient_id), d.state,
                                         d.attempts, d.delivered_at, d.consumed_at, d.reason)
                          for d in rows)

    async def subscribe(self, agent_id: str, topic: str) -> None:
        now = self.clock.now()
        await self._write(lambda c: self.store.bus.subscribe(c, topic, agent_id, now))

    async def unsubscribe(self, agent_id: str, topic: str) -> None:
        await self._write(lambda c: self.store.bus.unsubscribe(c, topic, agent_id))

    def depths(self) -> dict[str, int]:
        return {i: b.queued for i, b in self._inboxes.items() if b.queued}


class BusInbox:
    """One agent's inbox on the bus (the `Inbox` protocol of supervisor/bus/inbox.py)."""

    def __init__(self, bus: Bus, agent_id: str, name: str = "") -> None:
        self.bus = bus
        self.agent_id = agent_id
        self.name = name or agent_id
        self.queued = 0  # queued deliveries (leased ones are the running turn's)
        self._ready = asyncio.Event()
        self._woken = False
        self.held = False  # after a failed turn: nothing is delivered until a new message

    def arrived(self, n: int) -> None:
        self.queued += n
        if n:
            self.held = False
            self._ready.set()

    def recount(self, open_count: int) -> None:
        """The queue as stored: an agent another worker runs consumes its messages there."""
        self.queued = open_count

    async def put(self, text: str, origin: Origin = Origin.OPERATOR) -> None:
        await self.bus.send(OPERATOR_SENDER, self.name, "task", text, agent_id=self.agent_id,
                            origin=None if origin == Origin.OPERATOR else origin)

    async def take(self, timeout_s: float) -> Taken | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self._woken:
                self._woken = False
                return None
            if self.queued > 0 and not self.held and not self.bus.halted():
                try:
                    taken = await self.bus.lease(self)
                except StoreError:
                    logger.warning("bus: lease failed agent=%s", self.agent_id, exc_info=True)
                    await asyncio.sleep(min(1.0, max(0.0, deadline - loop.time())))
                    return None
                if taken is not None:
                    return taken
                continue
            self._ready.clear()
            left = deadline - loop.time()
            if left <= 0:
                return None
            try:
                async with asyncio.timeout(left):
                    await self._ready.wait()
            except TimeoutError:
                return None

    async def ack(self, taken: Taken, *, consumed: bool = True) -> None:
        await self.bus.ack(self, taken, consumed)

    async def drop_all(self, reason: str) -> int:
        return await self.bus.dead_letter(self.agent_id, reason)

    def wake(self) -> None:
        self._woken = True
        self._ready.set()

    def __len__(self) -> int:
        return self.queued


__all__ = ["Bus", "BusInbox", "BatchWriter", "Members", "Sender", "Sent", "DeliveryStatus",
           "OPERATOR", "OPERATOR_SENDER", "CHARTER_SENDER", "SYSTEM", "SYSTEM_SENDER", "TYPES",
           "origin_of", "render", "DEAD"]
