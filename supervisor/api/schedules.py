"""The scheduler's part of the supervisor API (`SupervisorAPI.schedules`): drafts confirmed as
one sentence, schedules made, listed, paused, resumed, deleted and run now, their next times and
history, reminders, and the agents' own `schedule_wakeup` (capped, shown to the operator).

It owns the Scheduler and its loop (started by the composition root as a service)."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from store.errors import StoreError
from store.schedules import RunRow, ScheduleRow
from supervisor.api.views import Actor
from supervisor.errors import BadSchedule, Halted, InvalidRequest, StoreFailed, SupervisorError
from supervisor.events import AgentState
from supervisor.sanitize import clean_text
from supervisor.schedule.cron import (
    EVERY,
    ONCE,
    Spec,
    describe,
    local_text,
    next_fires,
    parse_when,
    zone,
)
from supervisor.schedule.cron import warnings as cron_warnings
from supervisor.schedule.scheduler import (
    CATCH_UP_ONCE,
    MESSAGE,
    NOTICE,
    SKIP,
    SPAWN,
    PoolTargets,
    Scheduler,
)

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool
    from supervisor.schedule.standing import StandingAgents

logger = logging.getLogger(__name__)

ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
NOTIFY = ("failure", "always", "never")
NEW = "new"  # the target word for "spawn a fresh agent each run" (new, or new:<name>)
MAX_DRAFTS = 50


@dataclass(frozen=True, slots=True)
class RunView:
    id: int
    slot_at: float
    slot_text: str  # local time of the slot, "Mon 7 Dec 09:00"
    status: str  # running | ran | failed | timed_out | skipped | interrupted
    reason: str
    catch_up: bool
    manual: bool
    agent_id: str | None
    agent_name: str | None
    cost_usd: float
    outcome: str
    ended_at: float | None


@dataclass(frozen=True, slots=True)
class ScheduleView:
    id: str
    sentence: str  # "Every weekday at 09:00 Europe/Berlin"
    spec: str
    tz: str
    target_kind: str  # spawn | message | notice
    target_name: str
    prompt: str
    enabled: bool
    paused_why: str
    missed: str
    notify: str
    timeout_s: float
    budget_usd: float | None
    created_by: str
    owner_agent: str | None
    expires_at: float | None
    next_text: str | None  # "Mon 7 Dec 09:00", None: never again
    last: RunView | None
    consecutive_failures: int


@dataclass(frozen=True, slots=True)
class Draft:
    """A schedule shown for confirmation, not made yet."""

    id: str
    sentence: str
    next_text: str | None
    warnings: tuple[str, ...]
    spec: str
    tz: str
    target_kind: str
    target: str  # an agent's id (message), a name stem (spawn), "" (notice)
    target_name: str
    prompt: str
    model: str | None
    missed: str
    notify: str
    timeout_s: float
    budget_usd: float | None
    by: str
    drafted_at: float  # the schedule counts its slots from here: one due before the confirm runs

    def summary(self) -> str:
        """"Every weekday at 09:00 Europe/Berlin, next Mon 7 Dec 09:00"."""
        nxt = f", next {self.next_text}" if self.next_text else ", never (it is in the past)"
        return self.sentence + nxt


P = ParamSpec("P")
R = TypeVar("R")


def _store_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """A store failure underneath becomes StoreFailed, as everywhere in the API."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except StoreError as exc:
            raise StoreFailed(exc) from exc

    return wrapper


def _new_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(5))


class ScheduleAPI:
    def __init__(self, pool: AgentPool, standing: StandingAgents, audit: Any = None) -> None:
        self._pool = pool
        self._store = pool.store
        self.settings = pool.settings
        self.clock = pool.clock
        self.scheduler = Scheduler(
            pool.store, PoolTargets(pool, standing),
            notify=lambda agent_id, title, body: pool.escalations.notify(agent_id, title, body),
            halted=lambda: pool.killswitch.halted, clock=pool.clock,
            tick_s=pool.settings.schedule_tick_s, grace_s=pool.settings.schedule_grace_s)
        self._audit = audit  # (actor, action, args, ok, result) -> Awaitable[bool]
        self._drafts: dict[str, Draft] = {}
        self._latest: dict[str, str] = {}  # actor id -> their latest draft's id
        self._counter = itertools.count(1)
        self._task: asyncio.Task[None] | None = None

    # -- the loop -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Runs a dead supervisor left running become interrupted; then the loop."""
        if self._task is not None:
            return
        await self.scheduler.recover()
        self._task = asyncio.create_task(self.scheduler.run(), name="scheduler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    @_store_errors
    async def tick(self) -> None:
        """One pass now (what the loop does every schedule_tick_s)."""
        await self.scheduler.tick()

    # -- reading ------------------------------------------------------------------------------

    def _name(self, agent_id: str | None) -> str | None:
        if agent_id is None:
            return None
        r = self._pool.fleet.find(agent_id)
        return r.name if r else agent_id

    def _run_view(self, row: RunRow, tz: str) -> RunView:
        return RunView(row.id, row.slot_at,
                       local_text(datetime.fromtimestamp(row.slot_at, zone(tz))), row.status,
                       row.reason, bool(row.catch_up), bool(row.manual), row.agent_id,
                       self._name(row.agent_id), row.cost_usd, row.outcome, row.ended_at)

    def _next_text(self, spec: Spec, tz: str) -> str | None:
        fires = next_fires(spec, tz, self.clock.now(), 1)
        return local_text(fires[0].local) if fires else None

    async def _view(self, s: ScheduleRow) -> ScheduleView:
        spec = Spec.parse_stored(s.spec)
        last = await self._store.schedules.history(s.id, 1)
        target = (self._name(s.target) or s.target) if s.target_kind == MESSAGE else s.target
        return ScheduleView(
            s.id, describe(spec, s.tz), s.spec, s.tz, s.target_kind, target, s.prompt,
            bool(s.enabled), s.paused_why, s.missed, s.notify, s.timeout_s, s.budget_usd,
            s.created_by, self._name(s.owner_agent), s.expires_at, self._next_text(spec, s.tz),
            self._run_view(last[0], s.tz) if last else None,
            await self._store.schedules.consecutive_failures(s.id))

    async def _row(self, schedule_id: str) -> ScheduleRow:
        row = await self._store.schedules.get(schedule_id.strip())
        if row is None:
            raise InvalidRequest(f"there is no schedule {schedule_id!r} (/cron list shows them)")
        return row

    @_store_errors
    async def list(self) -> tuple[ScheduleView, ...]:
        return tuple([await self._view(s) for s in await self._store.schedules.all()])

    @_store_errors
    async def get(self, schedule_id: str) -> ScheduleView:
        return await self._view(await self._row(schedule_id))

    @_store_errors
    async def upcoming(self, schedule_id: str, n: int = 5) -> tuple[str, ...]:
        """The next `n` local times, "Mon 7 Dec 09:00 Europe/Berlin"."""
        s = await self._row(schedule_id)
        return tuple(f"{local_text(f.local)} {s.tz}"
                     for f in next_fires(Spec.parse_stored(s.spec), s.tz, self.clock.now(), n))

    @_store_errors
    async def history(self, schedule_id: str, n: int = 20) -> tuple[RunView, ...]:
        """The newest `n` slots and runs, newest first."""
        s = await self._row(schedule_id)
        return tuple(self._run_view(r, s.tz)
                     for r in await self._store.schedules.history(s.id, n))

    # -- drafts and making schedules ----------------------------------------------------------

    async def _target(self, word: str) -> tuple[str, str, str]:
        """(kind, stored target, name shown) of `word`: new[:name] spawns, else an agent."""
        if word == NEW or word.startswith(NEW + ":"):
            stem = word.partition(":")[2] or "cron"
            return SPAWN, stem, f"a new agent {stem}-<run>"
        runner = await self._pool.fleet.get(word)
        if runner.state == AgentState.KILLED:
            raise InvalidRequest(f"{runner.name} was killed: schedule a live agent, or 'new' "
                                 "for a fresh agent each run")
        return MESSAGE, runner.id, runner.name

    def is_target(self, word: str) -> bool:
        """Whether `word` names a target (how /cron add finds where its time words end)."""
        if word == NEW or word.startswith(NEW + ":"):
            return True
        return any(r.name == word or r.id == word for r in self._pool.fleet.everyone()
                   if r.state != AgentState.KILLED)

    def parse_when(self, words: str, tz: str | None = None) -> Spec:
        return parse_when(words, tz or self.settings.timezone, self.clock.now())

    @_store_errors
    async def draft(self, when: str, target: str | None, prompt: str, *, by: Actor,
                    tz: str | None = None, model: str | None = None, catch_up: bool = False,
                    notify: str = "failure", timeout_s: float | None = None,
                    budget_usd: float | None = None) -> Draft:
        """Check everything and keep it for `confirm`; nothing is made yet."""
        tz = tz or self.settings.timezone
        zone(tz)
        spec = parse_when(when, tz, self.clock.now())
        prompt = clean_text(prompt).strip()
        if not prompt:
            raise InvalidRequest("say what the run should do (the prompt is empty)")
        if notify not in NOTIFY:
            raise InvalidRequest(f"--notify must be one of {', '.join(NOTIFY)}, got {notify!r}")
        kind, stored, shown = (NOTICE, "", "the operator") if target is None \
            else await self._target(target)
        return self._keep(spec, tz, (kind, stored, shown), prompt, by=by, model=model,
                          catch_up=catch_up, notify=notify, timeout_s=timeout_s,
                          budget_usd=budget_usd)

    def _keep(self, spec: Spec, tz: str, target: tuple[str, str, str], prompt: str, *,
              by: Actor, model: str | None, catch_up: bool, notify: str,
              timeout_s: float | None, budget_usd: float | None) -> Draft:
        kind, stored, shown = target
        draft = Draft(
            id=f"d{next(self._counter)}", sentence=describe(spec, tz),
            next_text=self._next_text(spec, tz), warnings=cron_warnings(spec), spec=spec.text(),
            tz=tz, target_kind=kind, target=stored, target_name=shown, prompt=prompt,
            model=model, missed=CATCH_UP_ONCE if catch_up else SKIP, notify=notify,
            timeout_s=timeout_s or self.settings.schedule_timeout_s, budget_usd=budget_usd,
            by=by.id, drafted_at=self.clock.now())
        if draft.next_text is None:
            raise BadSchedule(f"{draft.sentence} is in the past: it would never run",
                              "Give a time in the future.")
        self._drafts[draft.id] = draft
        self._latest[by.id] = draft.id
        while len(self._drafts) > MAX_DRAFTS:
            self._drafts.pop(next(iter(self._drafts)))
        return draft

    @_store_errors
    async def confirm(self, draft_id: str | None, *, by: Actor,
                      run_now: bool = False) -> ScheduleView:
        """Make the schedule a draft describes (the caller's latest draft if no id)."""
        wanted = draft_id or self._latest.get(by.id)
        draft = self._drafts.get(wanted or "")
        if draft is None or draft.by != by.id:
            raise SupervisorError("no draft to confirm", what="There is no schedule draft to "
                                  "confirm: it was made already, or Switchboard restarted.",
                                  fix="Send /cron add again.")
        if run_now and self._pool.killswitch.halted:
            self._pool.killswitch.check()
        del self._drafts[draft.id]
        row = await self._create(draft, created_by=by.id)
        if run_now:
            await self.scheduler.run_now(row)
        return await self._view(row)

    async def _create(self, d: Draft, *, created_by: str, owner_agent: str | None = None,
                      expires_at: float | None = None) -> ScheduleRow:
        spec = Spec.parse_stored(d.spec)
        if spec.kind == EVERY:  # an interval counts from when it is made, not drafted
            spec = Spec(EVERY, every_s=spec.every_s, anchor=self.clock.now())
        row = ScheduleRow(
            id=_new_id(), spec=spec.text(), tz=d.tz, target_kind=d.target_kind,
            target=d.target, model=d.model, prompt=d.prompt, enabled=1, paused_why="",
            missed=d.missed, overlap=SKIP, timeout_s=d.timeout_s, budget_usd=d.budget_usd,
            notify=d.notify, created_by=created_by, owner_agent=owner_agent,
            expires_at=expires_at, created_at=min(d.drafted_at, self.clock.now()),
            deleted_at=None)
        try:
            await self._store.schedules.create(row)
        except StoreError as exc:
            raise StoreFailed(exc) from exc
        logger.info("schedule created id=%s spec=%r tz=%s target=%s:%s by=%s", row.id, row.spec,
                    row.tz, row.target_kind, row.target, created_by)
        return row

    @_store_errors
    async def remind(self, when: str, text: str, *, by: Actor,
                     tz: str | None = None) -> ScheduleView:
        """A one-shot notice to the operator at `when` (made at once: no draft)."""
        draft = await self.draft(when, None, text, by=by, tz=tz, notify="never")
        if Spec.parse_stored(draft.spec).kind != ONCE:
            del self._drafts[draft.id]
            raise BadSchedule(f"{when!r} repeats: a reminder is one time",
                              "Say in 20 min, at 17:00, tomorrow at 8; for a repeating one use "
                              "/cron add.")
        return await self.confirm(draft.id, by=by)

    # -- acting on schedules ------------------------------------------------------------------

    @_store_errors
    async def pause(self, schedule_id: str, *, by: Actor) -> ScheduleView:
        s = await self._row(schedule_id)
        if not await self._store.schedules.set_enabled(s.id, False, f"paused by {by.name}"):
            raise InvalidRequest(f"schedule {s.id} is already paused")
        return await self.get(s.id)

    @_store_errors
    async def resume(self, schedule_id: str, *, by: Actor) -> ScheduleView:
        """On again; the slots it missed while paused stay skipped (no backfill)."""
        s = await self._row(schedule_id)
        if not await self._store.schedules.set_enabled(s.id, True):
            raise InvalidRequest(f"schedule {s.id} is not paused")
        return await self.get(s.id)

    @_store_errors
    async def delete(self, schedule_id: str, *, by: Actor) -> ScheduleView:
        s = await self._row(schedule_id)
        view = await self._view(s)
        await self._store.schedules.delete(s.id, self.clock.now())
        return view

    @_store_errors
    async def run_now(self, schedule_id: str, *, by: Actor) -> RunView:
        """A test run now, outside the schedule's slots (recorded as manual)."""
        if self._pool.killswitch.halted:
            raise Halted(self._pool.killswitch.halt or {})
        s = await self._row(schedule_id)
        run_id = await self.scheduler.run_now(s)
        row = await self._store.schedules.run(run_id)
        assert row is not None
        return self._run_view(row, s.tz)

    # -- agents' own wakeups ------------------------------------------------------------------

    @_store_errors
    async def wakeup(self, runner: Identity, when: str, prompt: str) -> ScheduleView:
        """An agent's schedule_wakeup: a message to itself, capped (how many, how often, how
        long), audited, and listed and removable like any schedule."""
        s = self.settings
        mine = await self._store.schedules.all(owner_agent=runner.id)
        if len(mine) >= s.schedule_agent_max:
            raise InvalidRequest(f"you have {len(mine)} wakeups; the limit is "
                                 f"{s.schedule_agent_max}. Ask the operator to remove one")
        actor = _AgentActor(f"agent:{runner.id}", runner.name, "agent")
        spec = parse_when(when, s.timezone, self.clock.now())
        if spec.kind != ONCE:
            fires = next_fires(spec, s.timezone, self.clock.now(), 2)
            gap = fires[1].at - fires[0].at if len(fires) == 2 else float("inf")
            if gap < s.schedule_agent_min_interval_s:
                raise InvalidRequest(
                    f"that repeats every {gap / 60:g} min; wakeups repeat at most every "
                    f"{s.schedule_agent_min_interval_s / 60:g} min")
        prompt = clean_text(prompt).strip()
        if not prompt:
            raise InvalidRequest("say what to wake up to (the prompt is empty)")
        draft = self._keep(spec, s.timezone, (MESSAGE, runner.id, runner.name), prompt,
                           by=actor, model=None, catch_up=False, notify="never",
                           timeout_s=None, budget_usd=None)
        self._drafts.pop(draft.id, None)
        row = await self._create(draft, created_by=actor.id, owner_agent=runner.id,
                                 expires_at=self.clock.now() + s.schedule_agent_expiry_s)
        view = await self._view(row)
        if self._audit is not None:
            await self._audit(actor, "schedule_wakeup", f"{when} {prompt}"[:500], True,
                              f"schedule {row.id}: {view.sentence}")
        return view


class Identity(Protocol):
    """The agent a wakeup is for (an AgentRunner)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class _AgentActor:
    id: str
    name: str
    platform: str
