"""The chat outbox: one ordered queue per chat, priorities, superseded edits merged, the
platform's retry_after honoured, outages retried with backoff; nothing dropped. A message the
platform refuses is tried again in forms it is more likely to take (plain text without markup,
then shorter, then as a file) before its future fails.

Causal order: a command's reply has its place in the chat's queue from the moment the command
starts (`reserve`), before anything the command causes (an agent's card, its notices, its final
answer) is queued, and nothing queued after that place goes before the reply, whatever its
priority or however long 429s hold the queue. Priorities reorder only what no reply's place
stands between."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from bot.kit.ports import (
    ChatAdapter,
    ChatError,
    ChatId,
    ChatRefused,
    ChatUnavailable,
    Clock,
    MessageId,
    RateLimited,
)
from commands.base import Attachment, Reply, Text
from supervisor.clock import backoff_s

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
SHORT_CHARS = 1000  # the shortened form of a refused message


def plain_form(reply: Reply) -> Reply:
    """The reply with no markup at all: every block plain text (a platform that refused the
    markup, Telegram's "can't parse entities", takes this)."""
    return Reply(blocks=tuple(Text(b.text) for b in reply.blocks), buttons=reply.buttons)


def short_form(reply: Reply, *, file_follows: bool = True) -> Reply:
    """The start of the reply, plain, with a note that it is cut (and that the whole follows
    as a file, if one does); buttons kept."""
    text = reply.plain()
    note = "✂️ The chat refused this message whole" + (
        "; all of it follows as a file." if file_follows else "; this is its start.")
    return Reply(blocks=(Text(text[:SHORT_CHARS]), Text(note)), buttons=reply.buttons)


def file_form(reply: Reply) -> Attachment:
    return Attachment("message.txt", reply.plain().encode("utf-8", "replace"))


@dataclass
class ChatStats:
    """What one front end's outbox has met, for /metrics: kept by its link, so the counters
    outlive a reconnect (a new front desk, a new outbox)."""

    delivered: int = 0
    rate_limited: int = 0  # the platform's 429s (RetryAfter), each waited out
    unavailable: int = 0  # timeouts, 5xx, refused connections, each retried
    last_ack_s: float | None = None  # how long the platform took to answer the last call


class Priority(IntEnum):
    """Lower goes first; within one priority, first in first out."""

    URGENT = 0  # escalations and their outcome: a human is waited on
    REPLY = 1  # answers to what the operator just sent
    CARD = 2  # status cards: only the newest matters


Call = Callable[[ChatAdapter], Awaitable[Any]]


async def _never(_adapter: ChatAdapter) -> None:
    raise AssertionError("a reserved place was sent before it was filled")


@dataclass(eq=False)
class _Op:
    priority: Priority
    seq: tuple[int, int]  # (place in the chat's order, part of a reply filled into a place)
    call: Call
    what: str
    edit_of: MessageId | None = None  # an edit: a later edit of the same message replaces it
    futures: list[asyncio.Future[Any]] = field(default_factory=list)
    # Other forms of the same call, tried in turn when the platform refuses one.
    fallbacks: list[Call] = field(default_factory=list)
    # A command's reply (or its reserved place, `held` until filled): nothing queued after it
    # goes before it.
    ordered: bool = False
    held: bool = False


def _consume(fut: asyncio.Future[Any]) -> None:
    """A sender that does not await its future must not leave 'exception never retrieved'."""
    if not fut.cancelled():
        fut.exception()


@dataclass(frozen=True, slots=True)
class Pace:
    """The platform's own limit, kept in code: at most `per_s` calls a second to one chat on
    average, with bursts of up to `burst` (a token bucket), so 429s are the exception."""

    per_s: float
    burst: int = 1


class _ChatQueue:
    def __init__(self) -> None:
        self.ops: list[_Op] = []
        self.ready = asyncio.Event()
        self.busy = False
        self.tokens: float | None = None  # the pace's bucket; None: full, not yet used
        self.filled_at = 0.0

    async def take(self, pace: Pace, clock: Clock) -> None:
        """Wait for the bucket to hold a call, and spend it."""
        now = clock.monotonic()
        tokens = pace.burst if self.tokens is None else min(
            pace.burst, self.tokens + (now - self.filled_at) * pace.per_s)
        if tokens < 1:
            await clock.sleep((1 - tokens) / pace.per_s)
            now, tokens = clock.monotonic(), 1.0
        self.tokens, self.filled_at = tokens - 1, now

    def done(self, clock: Clock) -> None:
        """The call has been answered: the bucket refills from now, not from when it was
        sent, so calls that reach the platform bunched up (a slow network, a busy loop) still
        keep under its limit."""
        if self.tokens is not None:
            self.filled_at = clock.monotonic()

    def push(self, *ops: _Op) -> None:
        self.ops.extend(ops)
        self.ready.set()

    def remove(self, op: _Op) -> None:
        if op in self.ops:
            self.ops.remove(op)
        self.ready.set()  # what waited behind it may go now

    def next_op(self) -> _Op | None:
        """The most urgent call among those no earlier reply (or reply's place) stands
        before; None while only a place not yet filled is at the front."""
        first = min((o.seq for o in self.ops if o.ordered), default=None)
        ready = [o for o in self.ops if not o.held and (first is None or o.seq <= first)]
        return min(ready, key=lambda o: (o.priority, o.seq), default=None)

    def pop(self) -> _Op | None:
        op = self.next_op()
        if op is not None:
            self.ops.remove(op)
        return op

    def pending_edit(self, message: MessageId) -> _Op | None:
        return next((o for o in self.ops if o.edit_of == message), None)


class Outbox:
    """Sends through one ChatAdapter. Each method returns a future of the call's result
    (a MessageId for sends); awaiting it is optional. A call the platform refuses fails its
    future and is logged; rate limits and outages only delay."""

    def __init__(self, adapter: ChatAdapter, clock: Clock, *, backoff_s: float = 1.0,
                 max_backoff_s: float = MAX_BACKOFF_S, stats: ChatStats | None = None,
                 pace: Pace | None = None) -> None:
        self.adapter = adapter
        self.clock = clock
        self.stats = stats if stats is not None else ChatStats()
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.pace = pace
        self._queues: dict[ChatId, _ChatQueue] = {}
        self._workers: dict[ChatId, asyncio.Task[None]] = {}
        self._seq = itertools.count()
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()

    # -- what callers queue ---------------------------------------------------------------------

    def send(self, chat: ChatId, reply: Reply, *, priority: Priority = Priority.REPLY,
             reply_to: MessageId | None = None, silent: bool = False,
             offer_kill: bool = False, as_file: bool = True) -> asyncio.Future[MessageId]:
        """`as_file`: a file is an acceptable last form (not for a message edited later in
        place, like a status card)."""
        call, fallbacks = self._send_calls(chat, reply, reply_to=reply_to, silent=silent,
                                           offer_kill=offer_kill, as_file=as_file)
        return self._put(chat, priority, call, "send", fallbacks=fallbacks)

    @staticmethod
    def _send_calls(chat: ChatId, reply: Reply, *, reply_to: MessageId | None = None,
                    silent: bool = False, offer_kill: bool = False,
                    as_file: bool = True) -> tuple[Call, list[Call]]:
        """The send of `reply`, and the other forms to try if the platform refuses it."""
        def form(r: Reply) -> Call:
            return lambda a: a.send(chat, r, reply_to=reply_to, silent=silent,
                                    offer_kill=offer_kill)

        async def file_send(a: ChatAdapter) -> MessageId:
            # The short form's note promised the file; a file alone says it itself.
            return await a.send_document(chat, file_form(reply),
                                         caption=reply.plain()[:200])

        fallbacks = [form(plain_form(reply)), form(short_form(reply, file_follows=as_file))]
        if as_file:
            fallbacks.append(file_send)
        return form(reply), fallbacks

    def edit(self, chat: ChatId, message: MessageId, reply: Reply, *,
             priority: Priority = Priority.REPLY) -> asyncio.Future[None]:
        queue = self._queue(chat)
        waiting = queue.pending_edit(message)
        if waiting is not None:
            # Superseded: the queued edit now carries the newest content, keeps its place
            # (or moves up, if this one is more urgent), and answers both callers.
            waiting.call = lambda a: a.edit(chat, message, reply)
            waiting.fallbacks = [lambda a: a.edit(chat, message, plain_form(reply))]
            waiting.priority = min(waiting.priority, priority)
            fut = self._future()
            waiting.futures.append(fut)
            return fut
        return self._put(chat, priority, lambda a: a.edit(chat, message, reply), "edit",
                         edit_of=message,
                         fallbacks=[lambda a: a.edit(chat, message, plain_form(reply))])

    def document(self, chat: ChatId, document: Attachment, *, caption: str = "",
                 priority: Priority = Priority.REPLY,
                 reply_to: MessageId | None = None) -> asyncio.Future[MessageId]:
        return self._put(chat, priority, self._document_call(
            chat, document, caption=caption, reply_to=reply_to), "document")

    @staticmethod
    def _document_call(chat: ChatId, document: Attachment, *, caption: str = "",
                       reply_to: MessageId | None = None) -> Call:
        return lambda a: a.send_document(chat, document, caption=caption, reply_to=reply_to)

    def reply(self, chat: ChatId, reply: Reply, *, priority: Priority = Priority.REPLY,
              reply_to: MessageId | None = None,
              silent: bool = False) -> list[asyncio.Future[Any]]:
        """A whole Reply as the platform lays it out: its messages, then its files."""
        layout = self.adapter.layout(reply)
        futures: list[asyncio.Future[Any]] = [
            self.send(chat, m, priority=priority, reply_to=reply_to, silent=silent)
            for m in layout.messages]
        futures += [self.document(chat, f, priority=priority, reply_to=reply_to)
                    for f in layout.files]
        return futures

    def reserve(self, chat: ChatId) -> Slot:
        """A place in `chat`'s order for a reply not written yet (a command's, taken before
        the command runs): what is queued from now on goes after it, whatever its priority,
        until it is filled and sent or released."""
        op = _Op(Priority.REPLY, (next(self._seq), 0), _never, "reserved", ordered=True,
                 held=True)
        if not self._closed:
            self._queue(chat).push(op)
            self._idle.clear()
        return Slot(functools.partial(self._fill, chat, op),
                    functools.partial(self._release, chat, op))

    def _fill(self, chat: ChatId, place: _Op, reply: Reply,
              reply_to: MessageId | None) -> list[asyncio.Future[Any]]:
        """`reply`, laid out, in the place `place` kept, then the place given up."""
        layout = self.adapter.layout(reply)
        parts: list[tuple[str, Call, list[Call]]] = [
            ("send", *self._send_calls(chat, m, reply_to=reply_to)) for m in layout.messages]
        parts += [("document", self._document_call(chat, f, reply_to=reply_to), [])
                  for f in layout.files]
        ops = [_Op(place.priority, (place.seq[0], i + 1), call, what, None, [self._future()],
                   fallbacks, ordered=True) for i, (what, call, fallbacks) in enumerate(parts)]
        queue = self._queues.get(chat)
        if self._closed or queue is None or place not in queue.ops:
            for op in ops:
                op.futures[0].set_exception(ChatRefused("the outbox is closed"))
            return [op.futures[0] for op in ops]
        queue.push(*ops)
        self._release(chat, place)
        self._start(chat)
        return [op.futures[0] for op in ops]

    def _release(self, chat: ChatId, place: _Op) -> None:
        queue = self._queues.get(chat)
        if queue is not None:
            queue.remove(place)
        if self.idle():
            self._idle.set()

    # -- delivery -------------------------------------------------------------------------------

    def _future(self) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_consume)
        return fut

    def _queue(self, chat: ChatId) -> _ChatQueue:
        queue = self._queues.get(chat)
        if queue is None:
            queue = self._queues[chat] = _ChatQueue()
        return queue

    def _put(self, chat: ChatId, priority: Priority, call: Call, what: str, *,
             edit_of: MessageId | None = None,
             fallbacks: list[Call] | None = None) -> asyncio.Future[Any]:
        fut = self._future()
        if self._closed:
            fut.set_exception(ChatRefused("the outbox is closed"))
            return fut
        self._queue(chat).push(_Op(priority, (next(self._seq), 0), call, what, edit_of, [fut],
                                   list(fallbacks or ())))
        self._start(chat)
        return fut

    def _start(self, chat: ChatId) -> None:
        self._idle.clear()
        if chat not in self._workers:
            self._workers[chat] = asyncio.create_task(
                self._drain(chat), name=f"outbox:{self.adapter.platform}:{chat}")

    async def _drain(self, chat: ChatId) -> None:
        queue = self._queues[chat]
        while True:
            await queue.ready.wait()
            if queue.next_op() is None:  # empty, or only a reply's place not yet filled
                queue.ready.clear()
                continue
            if self.pace is not None:
                # Before popping, so a call queued while we wait (a more urgent one, or a
                # newer edit of the same message) is the one that goes.
                queue.busy = True
                await queue.take(self.pace, self.clock)
            op = queue.pop()
            if op is None:
                queue.busy = False
                continue
            queue.busy = True
            try:
                await self._deliver(chat, op)
            except asyncio.CancelledError:
                for fut in op.futures:
                    fut.cancel()
                raise
            finally:
                queue.done(self.clock)
                queue.busy = False
                if self.idle():
                    self._idle.set()

    async def _deliver(self, chat: ChatId, op: _Op) -> None:
        failures = 0
        while True:
            started = self.clock.monotonic()
            try:
                result = await op.call(self.adapter)
            except RateLimited as exc:
                self.stats.rate_limited += 1
                logger.info("chat rate limited platform=%s chat=%s retry_after=%.1f",
                            self.adapter.platform, chat, exc.retry_after_s)
                await self.clock.sleep(exc.retry_after_s)
                continue
            except ChatUnavailable as exc:
                self.stats.unavailable += 1
                logger.warning("chat unavailable platform=%s chat=%s what=%s error=%s "
                               "retry_in=%.1fs", self.adapter.platform, chat, op.what, exc,
                               wait := backoff_s(failures, self.backoff_s, self.max_backoff_s))
                await self.clock.sleep(wait)
                failures += 1
                continue
            except ChatError as exc:
                if op.fallbacks:
                    logger.warning("chat refused platform=%s chat=%s what=%s error=%s; trying "
                                   "another form (%d left)", self.adapter.platform, chat,
                                   op.what, exc, len(op.fallbacks))
                    op.call = op.fallbacks.pop(0)
                    continue
                logger.error("chat refused platform=%s chat=%s what=%s error=%s",
                             self.adapter.platform, chat, op.what, exc)
                self._settle(op, exc=exc)
                return
            except Exception as exc:  # noqa: BLE001 - one broken call must not stop the chat
                logger.exception("chat call failed platform=%s chat=%s what=%s",
                                 self.adapter.platform, chat, op.what)
                self._settle(op, exc=exc)
                return
            self.stats.delivered += 1
            self.stats.last_ack_s = max(0.0, self.clock.monotonic() - started)
            self._settle(op, result=result)
            return

    @staticmethod
    def _settle(op: _Op, *, result: Any = None, exc: BaseException | None = None) -> None:
        for fut in op.futures:
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

    # -- lifecycle ------------------------------------------------------------------------------

    def idle(self) -> bool:
        return all(not q.ops and not q.busy for q in self._queues.values())

    def depth(self) -> int:
        """Calls queued or being sent, over every chat (a reply's place not yet filled is
        no call)."""
        return sum(sum(not o.held for o in q.ops) + q.busy for q in self._queues.values())

    async def flush(self, timeout_s: float) -> bool:
        """Wait (in real time, bounded) until every queue is empty; True if they are."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        return self.idle()

    async def aclose(self, grace_s: float = 0.0) -> None:
        """Stop taking calls, let queued ones go out for up to `grace_s`, then cancel."""
        self._closed = True
        if grace_s > 0:
            await self.flush(grace_s)
        for task in self._workers.values():
            task.cancel()
        await asyncio.gather(*self._workers.values(), return_exceptions=True)
        left = [op for q in self._queues.values() for op in q.ops if not op.held]
        if left:
            logger.warning("chat outbox closed with calls unsent platform=%s count=%d",
                           self.adapter.platform, len(left))
        for op in left:
            for fut in op.futures:
                fut.cancel()
        self._workers, self._queues = {}, {}


class Slot:
    """A reply's place in one chat's order (`Outbox.reserve`): `fill` it with the reply, or
    `release` it when there is none to send; either once. What was queued after it waits
    until it is filled and sent, or released."""

    def __init__(self, fill: Callable[[Reply, MessageId | None], list[asyncio.Future[Any]]],
                 release: Callable[[], None]) -> None:
        self._fill: Callable[[Reply, MessageId | None], list[asyncio.Future[Any]]] | None = fill
        self._release = release

    def fill(self, reply: Reply, *,
             reply_to: MessageId | None = None) -> list[asyncio.Future[Any]]:
        """The reply, as the platform lays it out, in the place kept; its futures."""
        fill, self._fill = self._fill, None
        if fill is None:
            raise RuntimeError("this reply's place was already filled or released")
        return fill(reply, reply_to)

    def release(self) -> None:
        """No reply after all: what waited behind the place goes on. Idempotent."""
        if self._fill is not None:
            self._fill = None
            self._release()
