"""Escalations: questions and permission requests to the operator, kept as outbox rows.

An escalation is a row first and a future second: the row survives a restart, the future only
lets a waiting agent continue the moment the first answer lands. Front ends read the outbox with
`follow(frontend)` and acknowledge what they delivered; ids make redelivery harmless.

Reminders and timeouts are part of the row, not of a sleeping coroutine. `open` stamps
`remind_at` and `expires_at` (wall-clock seconds from the injected clock, None for never) and
the timeout action (`deny` or `pause`). `fire_due(now)` is the run-once step that a timer
service (supervisor/guard/timers.py) calls whenever the earliest stored time comes due: it sends the
reminder notice, or applies the timeout (deny closes the row as expired and hands the waiter a
deny; pause calls the waiter's `on_pause` and leaves the question open, and the answer that
arrives later calls `on_resume`). Each firing is claimed by a conditional update in the same
transaction as the notice it writes, so it happens once however many ticks, services or
restarts see it due. A timeout that is due skips a reminder that is due with it: after a long
outage the operator gets "denied", not "reminder" followed at once by "denied".

What a restart does to an open row depends on who is waiting for its answer:

- Most rows are answered to a call waiting in the process that opened them: a permission
  request, AskUserQuestion or ExitPlanMode is the CLI's `can_use_tool` control request, and
  that CLI is swept with the old supervisor; a watchdog budget offer is an in-process
  coroutine. After a restart nothing can receive their answer, and the turn that asked was
  interrupted, so `expire_orphans` (run by the pool at start, before the timer service starts)
  closes them as interrupted (status `interrupted`) with a notice, and
  the pool tells a resumed agent its request went unanswered. Their stored timers die with
  them: the timer service only fires open rows.
- A row opened with `survives_restart=True` is answered from the row itself (whoever acts on
  it reads the answer from the store or the `answered` event, not from a future), so a restart
  leaves it open, front ends still show it, `answer` still works, and its reminder and timeout
  fire at their stored times; a time that passed while the supervisor was down fires on the
  first tick after start. Such a row has no waiter to pause, so `on_timeout="pause"` is
  applied to it as a deny.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from store import Store
from store.errors import StoreError
from store.escalations import EscalationDraft, EscalationRow, Notice
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.errors import AlreadyAnswered, SupervisorError, UnknownEscalation

if TYPE_CHECKING:
    from supervisor.guard.reviews import ReviewDesk

logger = logging.getLogger(__name__)

ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
FOLLOW_PAGE = 200  # rows read at a time from a front end's backlog
HELD_NOTICES = 200  # notices held in memory while the store takes no writes
# How often a call waiting here looks for an answer another worker recorded (its chat answered
# it: docs/postgresql.md); only while something waits. On a shared database, as often: the
# rows other workers wrote, published here (an agent's request reaches the coordinator's chat).
ANSWER_POLL_S = 0.5
# How long the timers wait when every overdue request is another worker's to fire.
OTHERS_DUE_RECHECK_S = 1.0
MINE_KEPT = 1000  # ids of the rows published here, remembered so they are not published twice


class Kind(StrEnum):
    PERMISSION = "permission"
    QUESTION = "question"
    PLAN = "plan"
    NOTICE = "notice"


class Decision(StrEnum):
    ALLOW = "allow"
    ALLOW_SESSION = "allow_session"
    DENY = "deny"
    ANSWER = "answer"


@dataclass(frozen=True, slots=True)
class Answer:
    decision: Decision
    text: str = ""
    by: str = ""
    via: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"decision": str(self.decision), "text": self.text}

    def to_agent(self) -> str:
        """A question's answer as the asking agent reads it (the ask_operator tool's result,
        or the `result` message a bus question gets back)."""
        who = self.by.capitalize() if self.via == "reviewer" else "The operator"
        if self.decision == Decision.DENY:
            return f"{who} did not answer: {self.text or 'no reason given'}"
        return f"{who} answered: {self.text}"


@dataclass(frozen=True, slots=True)
class EscalationEvent:
    """Published on the hub: an escalation or notice was created, reminded or answered."""

    what: str  # created | answered | reminder
    escalation: EscalationRow
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Timeouts:
    reminder_s: float = 300.0
    timeout_s: float = 900.0
    on_timeout: str = "deny"  # deny | pause

    def schedule(self, opened_at: float) -> tuple[float | None, float | None]:
        """(remind_at, expires_at) for a row opened at `opened_at`; None where infinite."""
        def at(after_s: float) -> float | None:
            return opened_at + after_s if math.isfinite(after_s) else None
        return at(self.reminder_s), at(self.timeout_s)


Hook = Callable[[], Awaitable[None]]
AnswerHook = Callable[[EscalationRow, "Answer"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Fired:
    """What one tick did: `what` is reminder | expired | paused."""

    esc_id: str
    what: str


@dataclass(slots=True)
class _Waiting:
    """A call in this process waiting for an answer, with what its timeout may do to it."""

    future: asyncio.Future[Answer]
    on_pause: Hook | None = None
    on_resume: Hook | None = None
    pausing: asyncio.Event | None = None  # a pause timeout is being applied; set when done
    paused: bool = False  # the pause timeout was applied, so the answer resumes


class Escalations:
    def __init__(self, store: Store, hub: Any, timeouts: Timeouts,
                 clock: Clock | None = None) -> None:
        self.store = store
        self.hub = hub
        self.timeouts = timeouts
        self.clock: Clock = clock or SYSTEM_CLOCK
        # What this supervisor says at start (isolation, recovery) is new to a front end seen
        # for the first time; what came before it is history.
        self.started_at = self.clock.now()
        self._waiting: dict[str, _Waiting] = {}
        self._answer_hooks: dict[str, AnswerHook] = {}
        # Reviewer agents (supervisor/guard/reviews.py): set when the API is built.
        self.desk: ReviewDesk | None = None
        # The live agents other workers run (on PostgreSQL; set by the core): their requests'
        # reminders and timeouts are their own worker's to fire, where the call waits.
        self.elsewhere: Callable[[], Mapping[str, object]] = dict
        # Notices the store refused (disk full, read-only): held here and delivered to every
        # front end from memory, so the operator hears about the trouble that stops the store.
        self._held: list[EscalationRow] = []
        self._held_acked: dict[str, set[str]] = {}
        # On a shared database (PostgreSQL, several workers): the last row seen, and the rows
        # published here, so each row another worker writes is published here once.
        self.shared = store.db.dialect != "sqlite"
        self._seen_seq: int | None = None
        self._mine: dict[str, None] = {}

    def on_answer(self, tool_name: str, hook: AnswerHook) -> None:
        """Call `hook` with each row of `tool_name` that an operator answers: how a row that
        survives restarts (answered from the store, no call waiting) is acted on."""
        self._answer_hooks[tool_name] = hook

    async def draft_notice(self, agent_id: str | None, title: str, body: str = "",
                           ref_id: str | None = None,
                           tool_name: str | None = None) -> EscalationDraft:
        """A notice to be written inside another write's transaction; `published` after."""
        return EscalationDraft(id=await self._new_id(), agent_id=agent_id, kind=Kind.NOTICE,
                               title=title, body=body, ref_id=ref_id, status="info",
                               tool_name=tool_name)

    async def draft_question(self, agent_id: str | None, title: str, body: str, *,
                             options: tuple[str, ...], tool_name: str,
                             tool_input: dict[str, Any], detail: str | None = None,
                             detail_name: str | None = None,
                             timeouts: Timeouts | None = None) -> EscalationDraft:
        """A question that survives restarts, answered through `on_answer(tool_name)`."""
        remind_at, expires_at = (timeouts or self.timeouts).schedule(self.clock.now())
        return EscalationDraft(
            id=await self._new_id(), agent_id=agent_id, kind=Kind.QUESTION, title=title,
            body=body, tool_name=tool_name, tool_input=tool_input, options=options,
            detail=detail, detail_name=detail_name, remind_at=remind_at,
            expires_at=expires_at, survives_restart=True)

    async def published(self, esc_id: str) -> None:
        """Tell the front ends about a row written with another write (a draft)."""
        row = await self.store.escalations.get(esc_id)
        if row is not None:
            self._publish("created", row)

    async def _new_id(self) -> str:
        for length in (4, 4, 4, 5, 6, 8):
            esc_id = "".join(secrets.choice(ID_ALPHABET) for _ in range(length))
            if not await self.store.escalations.id_taken(esc_id):
                return esc_id
        raise SupervisorError("could not allocate an escalation id")

    async def open(
        self, *, agent_id: str | None, kind: Kind, title: str, body: str,
        tool_name: str | None = None, tool_input: dict[str, Any] | None = None,
        options: tuple[str, ...] = (), free_text: bool = False, detail: str | None = None,
        detail_name: str | None = None, timeouts: Timeouts | None = None,
        survives_restart: bool = False,
    ) -> EscalationRow:
        """`body` is short (what kind of call, why asked); `detail` is the complete thing
        being asked about, which every front end must be able to show whole. `timeouts`
        overrides the default reminder and timeout for this row; `survives_restart` marks a
        row answered from the store rather than by a waiting call (see the module docstring)."""
        t = timeouts or self.timeouts
        now = self.clock.now()
        remind_at, expires_at = t.schedule(now)
        row = await self.store.escalations.create(
            id=await self._new_id(), agent_id=agent_id, kind=kind, title=title, body=body,
            tool_name=tool_name, tool_input=tool_input, options=options, free_text=free_text,
            detail=detail, detail_name=detail_name, remind_at=remind_at, expires_at=expires_at,
            on_timeout=t.on_timeout, survives_restart=survives_restart, now=now,
        )
        self._waiting[row.id] = _Waiting(asyncio.get_running_loop().create_future())
        self._publish("created", row)
        logger.info("escalation opened id=%s agent=%s kind=%s", row.id, agent_id, kind)
        return row

    async def notify(self, agent_id: str | None, title: str, body: str = "",
                     ref_id: str | None = None, *, detail: str | None = None,
                     detail_name: str | None = None,
                     tool_name: str | None = None) -> EscalationRow:
        """A notice: pushed to the operator like an escalation, needs no answer. If the store
        cannot take it, it is held in memory and delivered from there (never dropped)."""
        try:
            row = await self.store.escalations.create(
                id=await self._new_id(), agent_id=agent_id, kind=Kind.NOTICE, title=title,
                body=body, ref_id=ref_id, status="info", detail=detail,
                detail_name=detail_name, tool_name=tool_name, now=self.clock.now(),
            )
        except StoreError as exc:
            logger.warning("notice held in memory: the store refused it title=%r: %s", title,
                           exc)
            row = self._hold(agent_id, title, body, ref_id, detail, detail_name, tool_name)
        self._publish("created", row)
        return row

    def _hold(self, agent_id: str | None, title: str, body: str, ref_id: str | None,
              detail: str | None, detail_name: str | None,
              tool_name: str | None = None) -> EscalationRow:
        row = EscalationRow(
            seq=0, id="m" + "".join(secrets.choice(ID_ALPHABET) for _ in range(7)),
            agent_id=agent_id, kind=Kind.NOTICE, title=title, body=body, tool_name=tool_name,
            tool_input=None, options=(), free_text=False, ref_id=ref_id, status="info",
            answer=None, answered_by=None, answered_via=None, answered_at=None,
            created_at=self.clock.now(), detail=detail, detail_name=detail_name)
        self._held = [*self._held[-(HELD_NOTICES - 1):], row]
        return row

    def held(self, frontend: str) -> list[EscalationRow]:
        """Notices held in memory that `frontend` has not acknowledged, oldest first."""
        acked = self._held_acked.get(frontend, set())
        return [r for r in self._held if r.id not in acked]

    def _publish(self, what: str, row: EscalationRow) -> None:
        if what == "created":
            self._mine[row.id] = None
            if len(self._mine) > MINE_KEPT:
                del self._mine[next(iter(self._mine))]
        self.hub.publish(EscalationEvent(what, row, self.clock.now()))

    async def _notice(self, agent_id: str | None, title: str, body: str,
                      ref_id: str) -> Notice:
        return Notice(await self._new_id(), agent_id, title, body, ref_id)

    async def _published_notice(self, notice: Notice) -> None:
        row = await self.store.escalations.get(notice.id)
        if row is not None:
            self._publish("created", row)

    async def wait(self, row: EscalationRow, *, on_pause: Hook | None = None,
                   on_resume: Hook | None = None) -> Answer:
        """Wait for the first answer. The reminder and the timeout come from the row's stored
        times, fired by the timer service; a pause timeout calls `on_pause`, and the answer
        that ends the pause calls `on_resume` before it is returned."""
        waiting = self._waiting.get(row.id)
        if waiting is None:
            raise UnknownEscalation(row.id)
        waiting.on_pause, waiting.on_resume = on_pause, on_resume
        try:
            answer = await asyncio.shield(waiting.future)
            if waiting.pausing is not None:
                await waiting.pausing.wait()  # a pause still in progress finishes first
            if waiting.paused and on_resume is not None:
                await on_resume()
            return answer
        finally:
            self._waiting.pop(row.id, None)

    # -- timers (the run-once step the timer service calls) -----------------------------------

    async def next_due(self) -> float | None:
        """The earliest stored time a reminder or timeout is due, or None."""
        due = await self.store.escalations.next_due()
        elsewhere = self.elsewhere()
        now = self.clock.now()
        if due is None or due > now or not elsewhere:
            return due
        # Overdue still after a pass: other workers' requests, theirs to fire (a dead worker's
        # until its agents are taken over): looked at again in a while, not at once.
        if all(r.agent_id in elsewhere for r in await self.store.escalations.due(now)):
            return now + OTHERS_DUE_RECHECK_S
        return due

    async def fire_due(self, now: float | None = None) -> list[Fired]:
        """Send every reminder and apply every timeout due at `now` (the clock's time if not
        given). Safe to call at any time and from several places: each fires once."""
        now = self.clock.now() if now is None else now
        fired: list[Fired] = []
        elsewhere = self.elsewhere()
        for row in await self.store.escalations.due(now):
            if row.agent_id is not None and row.agent_id in elsewhere:
                continue
            expires_at = row.timeout_due_at
            if expires_at is not None and expires_at <= now:
                what = await self._time_out(row, now)
            else:
                what = await self._remind(row, now)
            if what is not None:
                fired.append(Fired(row.id, what))
                logger.info("escalation timer fired id=%s what=%s", row.id, what)
        return fired

    async def watch_answers(self, every_s: float = ANSWER_POLL_S) -> None:
        """Forever: hand each call waiting here the answer another worker recorded for it (the
        coordinator's chat answered a request of an agent this worker runs). The answer is in
        the row; nothing depends on a notification arriving."""
        while True:
            await asyncio.sleep(every_s)
            try:
                if self._waiting:
                    await self.collect_answers()
                if self.shared:
                    await self.collect_arrivals()
            except StoreError as exc:  # the store's trouble is reported where it happens
                logger.warning("escalations: the store not read: %s", exc)

    async def collect_arrivals(self) -> list[str]:
        """One pass of the watch on a shared database: publish each row another worker wrote
        since the last pass, as if written here, so this worker's front ends deliver it (the
        request of an agent another worker runs reaches the chat the coordinator serves). The
        first pass only notes where to start: what came before is each front end's backlog.
        The ids of the rows it published."""
        if self._seen_seq is None:
            last = await self.store.escalations.after(None)
            self._seen_seq = last[0].seq if last else 0
            return []
        arrived = []
        while True:
            page = await self.store.escalations.after(self._seen_seq, FOLLOW_PAGE)
            for row in page:
                self._seen_seq = row.seq
                if row.id not in self._mine:
                    self._publish("created", row)
                    arrived.append(row.id)
                    logger.info("escalation written by another worker id=%s agent=%s",
                                row.id, row.agent_id)
            if len(page) < FOLLOW_PAGE:
                return arrived

    async def collect_answers(self) -> list[str]:
        """One pass of `watch_answers`: the ids of the waiting calls it answered."""
        handed = []
        for esc_id, waiting in list(self._waiting.items()):
            if waiting.future.done():
                continue
            row = await self.store.escalations.get(esc_id)
            if row is None or row.status == "open" or waiting.future.done():
                continue
            stored = row.answer or {}
            try:
                decision = Decision(str(stored.get("decision", Decision.DENY)))
            except ValueError:
                decision = Decision.DENY
            waiting.future.set_result(Answer(decision, str(stored.get("text", "")),
                                             row.answered_by or "", row.answered_via or ""))
            handed.append(esc_id)
            logger.info("escalation answered on another worker id=%s status=%s by=%s",
                        esc_id, row.status, row.answered_by)
        return handed

    async def _remind(self, row: EscalationRow, now: float) -> str | None:
        notice = await self._notice(row.agent_id, f"Reminder: {row.title}",
                                    f"Still waiting for an answer to {row.id}.", row.id)
        if not await self.store.escalations.mark_reminded(row.id, now=now, notice=notice):
            return None
        await self._published_notice(notice)
        return "reminder"

    async def _time_out(self, row: EscalationRow, now: float) -> str | None:
        waiting = self._waiting.get(row.id)
        if row.on_timeout == "pause" and waiting is not None and waiting.on_pause is not None:
            # Marked before the claim, so an answer landing meanwhile waits for the pause
            # to finish and then resumes, instead of leaving the agent paused.
            waiting.pausing = pausing = asyncio.Event()
            try:
                if not await self.store.escalations.mark_timed_out(row.id, now=now):
                    return None
                waiting.paused = True
                await waiting.on_pause()
            finally:
                pausing.set()
            await self.notify(row.agent_id, f"No answer to {row.id}: agent paused",
                              "The question stays open; answering it resumes the agent.",
                              ref_id=row.id)
            return "paused"
        answer = Answer(Decision.DENY, "no answer from the operator in time", "timeout",
                        "switchboard")
        notice = await self._notice(row.agent_id, f"No answer to {row.id}: denied", row.title,
                                    row.id)
        if await self._close(row.id, "expired", answer, notice=notice, timed_out=True) is None:
            return None  # an answer won the race with the timeout
        return "expired"

    async def _close(self, esc_id: str, status: str, answer: Answer, *,
                     notice: Notice | None = None, timed_out: bool = False
                     ) -> EscalationRow | None:
        """Close an open row, hand the answer to whoever waits, tell the front ends. Returns
        the closed row, or None if it was no longer open (an earlier answer won)."""
        if not await self.store.escalations.close(esc_id, status=status,
                                                  answer=answer.as_json(), by=answer.by,
                                                  via=answer.via, now=self.clock.now(),
                                                  notice=notice, timed_out=timed_out):
            return None
        waiting = self._waiting.get(esc_id)
        if waiting is not None and not waiting.future.done():
            waiting.future.set_result(answer)
        closed = await self.store.escalations.get(esc_id)
        if closed is not None:
            self._publish("answered", closed)
        if notice is not None:
            await self._published_notice(notice)
        hook = self._answer_hooks.get(closed.tool_name or "") if closed is not None else None
        if hook is not None and closed is not None and status == "answered":
            try:
                await hook(closed, answer)
            except Exception:  # noqa: BLE001 - the answer is recorded; acting on it may fail
                logger.exception("acting on an answer failed id=%s", esc_id)
        return closed

    async def answer(self, esc_id: str, answer: Answer) -> EscalationRow:
        """Record the first answer; later ones raise AlreadyAnswered naming the winner."""
        row = await self.store.escalations.get(esc_id)
        if row is None:
            raise UnknownEscalation(esc_id)
        if row.kind == Kind.NOTICE:
            raise SupervisorError(f"{esc_id} is a notice; it needs no answer")
        closed = await self._close(esc_id, "answered", answer)
        if closed is None:
            latest = await self.store.escalations.get(esc_id)
            assert latest is not None
            raise AlreadyAnswered(latest)
        return closed

    async def cancel_one(self, esc_id: str, reason: str) -> bool:
        """Close one open escalation as cancelled, denying whoever waits on it."""
        answer = Answer(Decision.DENY, reason, "switchboard", "switchboard")
        return await self._close(esc_id, "cancelled", answer) is not None

    async def cancel_all(self, reason: str) -> int:
        rows = await self.store.escalations.open_rows()
        return sum([await self.cancel_one(row.id, reason) for row in rows])

    async def cancel_for_agent(self, agent_id: str, reason: str) -> int:
        """Close an agent's open escalations (it was stopped or killed): deny what waits."""
        rows = await self.store.escalations.open_rows(agent_id)
        return sum([await self.cancel_one(row.id, reason) for row in rows])

    async def expire_orphans(self, reason: str, *,
                             agent_ids: set[str] | None = None) -> list[EscalationRow]:
        """After a restart: open rows answered to a waiting call that died with the old
        process are closed as expired. Rows that survive restarts stay open with their timers.
        `agent_ids`: only these agents' rows (this worker's)."""
        expired = []
        for row in await self.store.escalations.open_rows():
            if row.id in self._waiting or row.survives_restart or (
                    agent_ids is not None and row.agent_id not in agent_ids):
                continue
            answer = Answer(Decision.DENY, reason, "switchboard", "restart")
            notice = await self._notice(row.agent_id, f"Interrupted: {row.title}",
                                        f"{row.id} was not answered before {reason}: the turn "
                                        "that asked was interrupted.", row.id)
            if await self._close(row.id, "interrupted", answer, notice=notice) is not None:
                expired.append(row)
        return expired

    async def pending(self, agent_id: str | None = None) -> list[EscalationRow]:
        return await self.store.escalations.open_rows(agent_id)

    async def get(self, esc_id: str) -> EscalationRow | None:
        return await self.store.escalations.get(esc_id)

    async def follow(self, frontend: str) -> AsyncIterator[EscalationRow]:
        """Every escalation and notice this front end has not acknowledged, oldest first, then
        new ones as they arrive. Call `ack` after delivering; unacknowledged rows come again
        with the next new row. A front end seen for the first time starts from now: what is
        still open and what this supervisor said since it started, not the history of notices and
        closed requests from before."""
        with self.hub.subscription(EscalationEvent) as queue:
            await self._first_sight(frontend)
            while True:
                acked = self._held_acked.get(frontend, set())
                async for row in self._backlog(frontend):
                    if row.id not in acked:  # delivered, but the store could not record it
                        yield row
                for row in self.held(frontend):
                    yield row
                while True:
                    event = await queue.get()
                    if isinstance(event, EscalationEvent) and event.what == "created":
                        break

    async def _backlog(self, frontend: str) -> AsyncIterator[EscalationRow]:
        """What `frontend` has not acknowledged, a page at a time however long it is; nothing
        more when the store cannot be read (the held notices still go out)."""
        after = 0
        while True:
            try:
                page = await self.store.escalations.undelivered(
                    frontend, limit=FOLLOW_PAGE, after_seq=after)
            except StoreError:
                logger.warning("outbox unreadable for frontend=%s", frontend, exc_info=True)
                return
            for row in page:
                yield row
            if len(page) < FOLLOW_PAGE:
                return
            after = page[-1].seq

    async def _first_sight(self, frontend: str) -> None:
        key = f"frontend_seen:{frontend}"
        try:
            if await self.store.kv.get(key) is not None:
                return
            await self.store.escalations.mark_all_delivered(frontend, before=self.started_at,
                                                            now=self.clock.now())
            await self.store.kv.set(key, self.clock.now())
        except StoreError:  # storage trouble: held notices still go out; known next time
            logger.warning("cannot record front end frontend=%s", frontend, exc_info=True)
            return
        logger.info("front end seen for the first time frontend=%s: starting from now",
                    frontend)

    async def ack(self, esc_id: str, frontend: str) -> None:
        """Record a delivery. Never raises for the store's sake: a delivery the store cannot
        record is remembered in memory (so it is not sent again in this run, and at worst
        once more after a restart), and the front end's delivery loop goes on."""
        if any(r.id == esc_id for r in self._held):
            self._held_acked.setdefault(frontend, set()).add(esc_id)
            return
        try:
            await self.store.escalations.ack(esc_id, frontend, now=self.clock.now())
        except StoreError:
            logger.warning("delivery not recorded id=%s frontend=%s", esc_id, frontend,
                           exc_info=True)
            self._held_acked.setdefault(frontend, set()).add(esc_id)
