"""The web console's live event stream: server-sent events of HTML fragments. On connect a full
snapshot of the topics a page shows; then, as the supervisor's events arrive, each changed
topic rendered once (per role) and sent to every page that shows it, numbered, so a reconnect
resumes where it left off or takes a fresh snapshot; a heartbeat when nothing happens."""

# A topic is one region of a page: "header", "needs", "fleet", "agent:<id>". A page subscribes
# to a few; a change marks topics dirty, and the flusher renders each dirty topic once per role
# among the pages that show it, however many pages are open, at most every `flush_s` (a fleet
# streaming output changes the same topics many times a second; the page needs only the last).
#
# Ids are "<epoch>.<seq>": the epoch is this process's (a restarted server has another), seq
# counts frames. A page coming back with the id of the last frame it got is sent again only
# the topics that changed since; a page without an id (htmx's SSE extension reconnects without
# one after an error), or with another epoch, gets the whole snapshot. No delta is replayed:
# a topic is always sent whole.

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field

from aiohttp import web

from commands.base import Role
from supervisor.api import (
    AgentOutput,
    EscalationEvent,
    Event,
    StateChanged,
    SupervisorAPI,
    SupervisorError,
    TurnFinished,
)

logger = logging.getLogger(__name__)

HEADER, NEEDS, FLEET = "header", "needs", "fleet"
AGENT = "agent:"
# A page further behind than this many frames is cut off; its browser reconnects and takes a
# snapshot, which is cheaper than the frames it missed.
CLIENT_QUEUE = 256
GONE_CHECK_S = 1.0  # how often a quiet stream checks that its page is still there
ANSWERED_KEPT = 20  # recently answered requests the Needs you page still shows, with who
ANSWERED_SHOWN_S = 600.0



@dataclass(frozen=True, slots=True)
class Rows:
    """A region made of rows, each with an HTML id (the fleet: a row an agent). While the same
    rows are shown in the same order, a change sends only the rows that changed, and the page
    swaps each in by its id (htmx's out-of-band swap)."""

    head: str
    rows: tuple[tuple[str, str], ...]  # (row id, its HTML: one element with that id)
    tail: str

    def whole(self) -> str:
        return self.head + "".join(html for _, html in self.rows) + self.tail

    def same_shape(self, other: Rows) -> bool:
        return (self.head, self.tail) == (other.head, other.tail) and \
            [i for i, _ in self.rows] == [i for i, _ in other.rows]


# How a topic becomes HTML for a role: the page's region, rendered on the server.
Render = Callable[[str, Role], Awaitable["str | Rows"]]
ROWS_EVENT = "-rows"  # a region's changed rows go as "<topic>-rows"


def html_of(region: str | Rows) -> str:
    return region.whole() if isinstance(region, Rows) else region


def out_of_band(row: str) -> str:
    """A row's element marked to be swapped in by its id wherever it is on the page."""
    tag_end = row.index(" ")
    return row[:tag_end] + ' hx-swap-oob="true"' + row[tag_end:]


def agent_topic(agent_id: str) -> str:
    return AGENT + agent_id


def topics_of(event: Event | EscalationEvent) -> tuple[str, ...]:
    """The regions an event changes."""
    if isinstance(event, AgentOutput):
        # The fleet row shows the current tool; the agent page the transcript.
        return FLEET, agent_topic(event.agent_id)
    if isinstance(event, StateChanged | TurnFinished):
        return HEADER, FLEET, agent_topic(event.agent_id)
    if isinstance(event, EscalationEvent):
        row = event.escalation
        agent = (agent_topic(row.agent_id),) if row.agent_id else ()
        return HEADER, NEEDS, FLEET, *agent
    return ()


def frame(event_id: str, name: str, html: str, since: float | None = None) -> bytes:
    """One server-sent event: every line of the data as a `data:` line (the browser joins
    them with newlines). `since`: when the oldest change it shows happened, as a comment line
    (which browsers ignore): how far a page is behind can be read off the stream itself."""
    lines = [] if since is None else [f": since {since:.6f}"]
    lines += [f"id: {event_id}", f"event: {name}"]
    lines += [f"data: {line}" for line in html.splitlines() or [""]]
    return ("\n".join(lines) + "\n\n").encode()


@dataclass(eq=False)
class Client:
    """One open page: the topics it shows, its role, and the frames on their way to it."""

    topics: frozenset[str]
    role: Role
    queue: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(CLIENT_QUEUE))
    cut_off: bool = False

    def send(self, data: bytes) -> None:
        if self.cut_off:
            return
        try:
            self.queue.put_nowait(data)
        except asyncio.QueueFull:
            # Too far behind: end its stream; its browser reconnects and takes a snapshot.
            self.cut_off = True
            logger.warning("event stream client lagging: cut off topics=%s", sorted(self.topics))


class Stream:
    """One per listener: follows the supervisor's events, renders what changed, fans it out."""

    def __init__(self, render: Render, *, flush_s: float = 0.1, heartbeat_s: float = 15.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.render = render
        self.flush_s = flush_s
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.epoch = secrets.token_hex(4)
        self.seq = 0
        self._changed_at: dict[str, int] = {}  # topic -> seq of the frame that last sent it
        self._last: dict[tuple[str, Role], str | Rows] = {}  # what each topic last showed
        self._clients: set[Client] = set()
        self._dirty: set[str] = set()
        self._dirty_since: dict[str, float] = {}  # topic -> when it was first marked since sent
        self._wake = asyncio.Event()
        # Held while a flush draws and queues frames, and while a page's opening is drawn.
        self._lock = asyncio.Lock()
        # Requests answered while a page may still show them: (id, when seen).
        self.answered: deque[tuple[str, float]] = deque(maxlen=ANSWERED_KEPT)
        self.last_seen: dict[str, float] = {}  # agent id -> its last event (the fleet page)
        self.frames_sent = 0

    @property
    def last_id(self) -> str:
        return f"{self.epoch}.{self.seq}"

    def clients(self) -> int:
        return len(self._clients)

    # -- what changed ---------------------------------------------------------------------------

    def note(self, event: Event | EscalationEvent) -> None:
        """A supervisor event: mark the regions it changes."""
        if isinstance(event, EscalationEvent):
            if event.what == "answered":
                self.answered.append((event.escalation.id, self.clock()))
        else:
            self.last_seen[event.agent_id] = event.at
        self.mark(topics_of(event))

    def mark(self, topics: Iterable[str]) -> None:
        now = self.clock()
        for topic in topics:
            self._dirty.add(topic)
            self._dirty_since.setdefault(topic, now)
        if self._dirty:
            self._wake.set()

    def recently_answered(self) -> tuple[str, ...]:
        """Ids of requests answered in the last ANSWERED_SHOWN_S, newest first."""
        since = self.clock() - ANSWERED_SHOWN_S
        return tuple(esc_id for esc_id, at in reversed(self.answered) if at >= since)

    # -- pages ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def connect(self, topics: Iterable[str], role: Role) -> Iterator[Client]:
        client = Client(frozenset(topics), role)
        self._clients.add(client)
        try:
            yield client
        finally:
            self._clients.discard(client)

    def stale(self, client: Client, last_event_id: str | None) -> frozenset[str]:
        """The topics a page coming back with `last_event_id` must be sent: none when it has
        seen every frame since, all of them when the id is not this process's."""
        epoch, _, seq = (last_event_id or "").partition(".")
        if epoch != self.epoch or not seq.isdigit() or int(seq) > self.seq:
            return client.topics
        return frozenset(t for t in client.topics if self._changed_at.get(t, 0) > int(seq))

    async def opening(self, client: Client, last_event_id: str | None) -> bytes:
        """What a page (connected already) is sent first: the topics it has not seen, as the
        pages of its role were last sent them. Under the flusher's lock, so that every frame
        already queued for it is in there (they are dropped) and every later one follows on
        from it. A topic other pages of its role show is sent as they have it and redrawn at
        the next flush (the rows that changed follow); one nobody else shows is drawn now."""
        async with self._lock:
            while not client.queue.empty():
                client.queue.get_nowait()
            out = []
            for topic in sorted(self.stale(client, last_event_id)):
                key = (topic, client.role)
                last = self._last.get(key)
                peers = any(c is not client and c.role == client.role and topic in c.topics
                            for c in self._clients)
                if last is None or not peers:
                    now = await self.render(topic, client.role)
                    if last is None or html_of(last) != html_of(now):
                        self.seq += 1  # a page coming back before this has not seen it
                        self._changed_at[topic] = self.seq
                    self._last[key] = last = now
                else:
                    self.mark((topic,))
                out.append(frame(self.last_id, topic, html_of(last)))
            return b"".join(out)

    # -- the loops ------------------------------------------------------------------------------

    async def follow(self, api: SupervisorAPI) -> None:
        """Mark what each supervisor event changes, for as long as it runs."""
        with api.subscription() as queue:
            self.mark((HEADER, NEEDS, FLEET))  # whatever happened before we listened
            while True:
                self.note(await queue.get())

    async def flush_forever(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.flush_s)  # let a burst of events settle into one frame
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Render each dirty topic once per role among the pages showing it, and send it."""
        async with self._lock:
            await self._flush()

    async def _flush(self) -> None:
        dirty, self._dirty = self._dirty, set()
        since = {t: self._dirty_since.pop(t) for t in dirty if t in self._dirty_since}
        for topic in sorted(dirty):
            viewers = [c for c in self._clients if topic in c.topics]
            if not viewers:
                continue
            drawn: dict[Role, str | Rows] = {}
            for role in {c.role for c in viewers}:
                try:
                    drawn[role] = await self.render(topic, role)
                except (web.HTTPException, SupervisorError):
                    continue  # starting or stopping, or the agent is gone: nothing to draw
                except Exception:  # noqa: BLE001 - one region's bug must not stop the stream
                    logger.exception("web console region failed to render topic=%s", topic)
                    continue
            sends = {r: d for r, d in ((r, self._change(topic, r, d)) for r, d in drawn.items())
                     if d is not None}
            if not sends:
                continue  # redrawn the same (a heartbeat, a burst that undid itself)
            self.seq += 1
            self._changed_at[topic] = self.seq
            frames = {r: frame(self.last_id, name, html, since.get(topic))
                      for r, (name, html) in sends.items()}
            for role, region in drawn.items():
                self._last[(topic, role)] = region
            for client in viewers:
                data = frames.get(client.role)
                if data is not None:
                    client.send(data)
                    self.frames_sent += 1

    def _change(self, topic: str, role: Role, now: str | Rows) -> tuple[str, str] | None:
        """(event name, HTML) to send for a topic drawn anew: nothing if it shows the same,
        only the changed rows if the same rows are shown, else the whole region."""
        last = self._last.get((topic, role))
        if isinstance(now, Rows) and isinstance(last, Rows) and now.same_shape(last):
            changed = [out_of_band(html) for (_, html), (_, old) in zip(now.rows, last.rows,
                                                                        strict=True)
                       if html != old]
            return (topic + ROWS_EVENT, "".join(changed)) if changed else None
        whole = html_of(now)
        return None if last is not None and html_of(last) == whole else (topic, whole)

    async def heartbeats(self) -> None:
        """The header holds what changes without an event (links, spend, the clock): redrawn
        with each heartbeat; pages also get a comment line so proxies keep the stream open."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            self.mark((HEADER,))
            for client in list(self._clients):
                client.send(b": heartbeat\n\n")


async def serve(request: web.Request, stream: Stream, client: Client) -> web.StreamResponse:
    """Answer one page's event stream until it goes away: the snapshot it needs, then every
    frame the flusher sends it."""
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-store",
        "X-Accel-Buffering": "no",  # a proxy in front must not hold frames back
    })
    await response.prepare(request)
    opening = await stream.opening(client, request.headers.get("Last-Event-ID"))
    # retry: how soon the browser's own EventSource reconnects after the stream ends.
    try:
        await response.write(b"retry: 1000\n\n" + opening)
        async for data in _frames(client, request):
            await response.write(data)
    except ConnectionError:
        pass  # the page went away (closed, navigated, reloaded), or stopped reading
    return response


async def _frames(client: Client, request: web.Request) -> AsyncIterator[bytes]:
    while not client.cut_off:  # cut off: the stream ends; the browser comes back for a snapshot
        try:
            yield await asyncio.wait_for(client.queue.get(), GONE_CHECK_S)
        except TimeoutError:
            # Nothing to send: is the page still there? (aiohttp does not cancel a handler
            # whose client left; without this a closed page would count until a heartbeat.)
            if request.transport is None or request.transport.is_closing():
                return
