"""The scheduler: each tick, every schedule's due slots are claimed (one row per slot, so never
twice), run, skipped with a reason, or caught up once; running runs are finished, timed out, and
three failures in a row pause the schedule and tell the operator.

`tick()` takes the injected clock's time and is the whole loop body (the run-once mode); `run()`
only repeats it. What a run does is a `Targets` (spawn an agent, message one through the bus):
`PoolTargets` over the pool in production.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from store import Store
from store.errors import StoreError
from store.schedules import (
    FAILED,
    INTERRUPTED,
    RAN,
    RUNNING,
    SKIPPED,
    TIMED_OUT,
    NewRun,
    RunRow,
    ScheduleRow,
)
from supervisor.bus.core import SYSTEM, Sender
from supervisor.bus.inbox import NOTIFY_MARK, QUIET_NOTE, Origin
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.errors import SupervisorError
from supervisor.events import AgentState
from supervisor.schedule.cron import Fire, Spec, fires_between, local_text, next_fires, zone

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool
    from supervisor.schedule.standing import StandingAgents

logger = logging.getLogger(__name__)

SPAWN, MESSAGE, NOTICE = "spawn", "message", "notice"
# Who a scheduled message is from: Switchboard itself, named the scheduler (what the standing
# agents' wake path sends as). Its deliveries are never redelivered after a crash or a failed
# turn (store/bus.py): the run is recorded interrupted or failed, not replayed.
SCHEDULER_SENDER = Sender(SYSTEM, "scheduler")
SKIP, CATCH_UP_ONCE = "skip", "catch_up_once"
LOOKBACK_S = 7 * 86400  # a catch-up is for a slot at most this old; older ones are skipped
MAX_SKIPS = 200  # slots of one long outage recorded at most (the newest)
PAUSE_AFTER = 3  # consecutive failures that pause a schedule
Notify = Callable[[str | None, str, str], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Started:
    agent_id: str | None = None
    message_id: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # ran | failed | interrupted
    cost_usd: float
    text: str


class Targets(Protocol):
    """What a run does, and how it ended."""

    async def start(self, schedule: ScheduleRow, run_id: int, prompt: str) -> Started:
        """Start the run (raises SupervisorError if it is refused: limits, no such agent)."""

    async def outcome(self, schedule: ScheduleRow, run: RunRow) -> Outcome | None:
        """None while it runs."""

    async def cancel(self, schedule: ScheduleRow, run: RunRow) -> None:
        """A run past its timeout: stop what it started."""


@dataclass
class Tally:
    """Runs by outcome since start: what /metrics reads (api.report_schedule_runs)."""

    counts: dict[str, int]

    def hit(self, status: str) -> None:
        key = {RAN: "ok", FAILED: "failed", TIMED_OUT: "failed", SKIPPED: "skipped"}.get(
            status, status)
        self.counts[key] = self.counts.get(key, 0) + 1


class Scheduler:
    def __init__(self, store: Store, targets: Targets, *, notify: Notify,
                 halted: Callable[[], bool] = lambda: False, clock: Clock = SYSTEM_CLOCK,
                 tick_s: float = 15.0, grace_s: float = 300.0) -> None:
        self.store = store
        self.targets = targets
        self.notify = notify
        self.halted = halted
        self.clock = clock
        self.tick_s = tick_s
        self.grace_s = grace_s
        self.holder = secrets.token_hex(6)
        self.tally = Tally({})

    def runs_by_outcome(self) -> Mapping[str, int]:
        return dict(self.tally.counts)

    # -- the loop ---------------------------------------------------------------------------------

    async def recover(self) -> list[RunRow]:
        """At start: runs a dead supervisor left running are interrupted, never replayed."""
        rows = await self.store.schedules.interrupt_running(self.clock.now())
        for row in rows:
            self.tally.hit(INTERRUPTED)
            logger.warning("schedule run interrupted by a restart schedule=%s slot=%s",
                           row.schedule_id, row.slot_key)
        return rows

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except StoreError:
                logger.warning("scheduler tick failed", exc_info=True)
            except Exception:  # noqa: BLE001 - the loop outlives any one tick's bug
                logger.exception("scheduler tick crashed")
            await self.clock.sleep(self.tick_s)

    async def tick(self) -> None:
        """One pass over every schedule at the clock's time."""
        now = self.clock.now()
        schedules = await self.store.schedules.all()
        for schedule in schedules:
            try:
                await self._finish_runs(schedule, now)
                await self._due(schedule, now)
            except SupervisorError:
                logger.warning("schedule tick failed schedule=%s", schedule.id, exc_info=True)
        # Runs of schedules deleted (or expired) while they ran still end, and are recorded.
        known = {s.id for s in schedules}
        for sid in {r.schedule_id for r in await self.store.schedules.running()} - known:
            gone = await self.store.schedules.get(sid, deleted=True)
            if gone is not None:
                with contextlib.suppress(SupervisorError):
                    await self._finish_runs(gone, now)

    # -- due slots --------------------------------------------------------------------------------

    async def _due(self, s: ScheduleRow, now: float) -> None:
        if s.expires_at is not None and now >= s.expires_at:
            await self.store.schedules.delete(s.id, now)
            await self.notify(None, f"Schedule {s.id} expired",
                              f"{s.prompt[:200]!r}, made by {s.created_by}, has expired.")
            return
        last = await self.store.schedules.last_slot(s.id)
        cursor = max(last.slot_at if last else s.created_at, now - LOOKBACK_S)
        fires = fires_between(Spec.parse_stored(s.spec), s.tz, cursor, now, MAX_SKIPS)
        if not fires:
            await self._after_halt(s, last, now)
            return
        late = [f for f in fires if now - f.at > self.grace_s]
        on_time = [f for f in fires if now - f.at <= self.grace_s]
        skips: list[tuple[Fire, str]] = []
        run: Fire | None = None
        catch_up = False
        if self.halted():
            skips = [(f, "halted") for f in fires]
        elif not s.enabled:
            skips = [(f, "paused") for f in fires]
        else:
            skips = [(f, "down") for f in late]
            if on_time:
                skips += [(f, "overlap") for f in on_time[:-1]]
                run = on_time[-1]
            elif s.missed == CATCH_UP_ONCE and late:
                run, catch_up = late[-1], True
                skips = skips[:-1]
            if run is not None and s.overlap == SKIP and \
                    await self.store.schedules.running(s.id):
                skips.append((run, "overlap"))
                run = None
        await self._claim(s, now, skips, run, catch_up)

    async def _claim(self, s: ScheduleRow, now: float, skips: list[tuple[Fire, str]],
                     run: Fire | None, catch_up: bool) -> None:
        rows = [NewRun(s.id, f.key, f.at, SKIPPED, now, reason=why, claimed_by=self.holder)
                for f, why in skips]
        if run is not None:
            rows.append(NewRun(s.id, run.key, run.at, RUNNING, now, catch_up=catch_up,
                               claimed_by=self.holder))
        ids = await self.store.schedules.claim_many(rows)
        for row, run_id in zip(rows, ids, strict=True):
            if run_id is not None and row.status == SKIPPED:
                self.tally.hit(SKIPPED)
                logger.info("schedule slot skipped schedule=%s slot=%s reason=%s", s.id,
                            row.slot_key, row.reason)
        if run is not None and ids[-1] is not None:
            await self._start(s, ids[-1], run.at, catch_up, "it was missed while Switchboard "
                              "was not running")

    async def _after_halt(self, s: ScheduleRow, last: RunRow | None, now: float) -> None:
        """Once the kill switch is off: the newest slot it skipped runs once, as a catch-up,
        for a catch_up_once schedule; nothing older is backfilled."""
        if (self.halted() or not s.enabled or s.missed != CATCH_UP_ONCE or last is None
                or last.status != SKIPPED or last.reason != "halted"
                or now - last.slot_at > LOOKBACK_S):
            return
        if await self.store.schedules.running(s.id):
            return
        if await self.store.schedules.claim_catch_up(last.id, self.holder, now):
            await self._start(s, last.id, last.slot_at, True,
                              "it was skipped while the kill switch was on")

    # -- running ----------------------------------------------------------------------------------

    def _prompt(self, s: ScheduleRow, slot_at: float, catch_up: bool, why: str) -> str:
        prompt = s.prompt
        if catch_up:
            when = local_text(datetime.fromtimestamp(slot_at, zone(s.tz)))
            prompt = (f"[Switchboard] Catch-up run of schedule {s.id}: it was due at {when} "
                      f"{s.tz}, and {why}. Do what that run would have done, as of now.\n\n"
                      + prompt)
        return prompt + (QUIET_NOTE if s.notify == "failure" else "")

    async def _start(self, s: ScheduleRow, run_id: int, slot_at: float, catch_up: bool,
                     why: str = "") -> None:
        if s.target_kind == NOTICE:
            await self.notify(None, f"⏰ Reminder ({s.id})", s.prompt)
            await self._finished(s, run_id, Outcome(RAN, 0.0, "reminder sent"))
            return
        try:
            started = await self.targets.start(s, run_id, self._prompt(s, slot_at, catch_up, why))
        except SupervisorError as exc:
            await self._finished(s, run_id, Outcome(FAILED, 0.0, f"not started: {exc.what}"))
            return
        await self.store.schedules.started(run_id, agent_id=started.agent_id,
                                           message_id=started.message_id)
        logger.info("schedule run started schedule=%s run=%d agent=%s catch_up=%s", s.id,
                    run_id, started.agent_id, catch_up)

    async def run_now(self, s: ScheduleRow) -> int:
        """A test run outside the schedule (its own row, not a slot)."""
        now = self.clock.now()
        key = f"manual:{now:.3f}:{secrets.token_hex(3)}"
        run_id = await self.store.schedules.claim(
            NewRun(s.id, key, now, RUNNING, now, manual=True, claimed_by=self.holder))
        assert run_id is not None
        await self._start(s, run_id, now, False)
        return run_id

    async def _finish_runs(self, s: ScheduleRow, now: float) -> None:
        for run in await self.store.schedules.running(s.id):
            outcome = await self.targets.outcome(s, run)
            if outcome is None:
                if now - run.started_at < s.timeout_s:
                    continue
                with contextlib.suppress(SupervisorError):
                    await self.targets.cancel(s, run)
                outcome = Outcome(TIMED_OUT, 0.0, f"no result within {s.timeout_s / 60:g} min")
            elif outcome.status == RAN and s.budget_usd is not None and \
                    outcome.cost_usd > s.budget_usd:
                outcome = Outcome(FAILED, outcome.cost_usd,
                                  f"cost ${outcome.cost_usd:.4f}, over the run's budget of "
                                  f"${s.budget_usd:.4f}: {outcome.text}")
            await self._finished(s, run.id, outcome)

    async def _finished(self, s: ScheduleRow, run_id: int, outcome: Outcome) -> None:
        if not await self.store.schedules.finish(run_id, outcome.status, now=self.clock.now(),
                                                 cost_usd=outcome.cost_usd,
                                                 outcome=outcome.text):
            return  # another scheduler ended it first
        self.tally.hit(outcome.status)
        logger.info("schedule run ended schedule=%s run=%d status=%s cost=%.4f", s.id, run_id,
                    outcome.status, outcome.cost_usd)
        failed = outcome.status in (FAILED, TIMED_OUT)
        said = next((line.split(NOTIFY_MARK, 1)[1].strip()
                     for line in outcome.text.splitlines() if NOTIFY_MARK in line), None)
        if s.notify == "always" or (s.notify == "failure" and (failed or said)):
            title = f"Schedule {s.id} {'failed' if failed else 'ran'}"
            await self.notify(None, title, said or outcome.text[:2000])
        if failed:
            await self._maybe_pause(s)

    async def _maybe_pause(self, s: ScheduleRow) -> None:
        streak = await self.store.schedules.consecutive_failures(s.id)
        if streak < PAUSE_AFTER:
            return
        why = f"paused after {streak} failures in a row"
        if await self.store.schedules.set_enabled(s.id, False, why):
            await self.notify(None, f"Schedule {s.id} paused",
                              f"{s.prompt[:200]!r} failed {streak} times in a row, so it is "
                              f"paused. /cron history {s.id} shows why; /cron resume {s.id} "
                              "turns it back on.")

    # -- reading ----------------------------------------------------------------------------------

    def upcoming(self, s: ScheduleRow, n: int) -> list[Fire]:
        return next_fires(Spec.parse_stored(s.spec), s.tz, self.clock.now(), n)


class PoolTargets:
    """Runs over the pool: a fresh agent per run, or a bus message to a live agent (an idle
    one gets a turn at once, a busy one gets it queued for after its turn)."""

    def __init__(self, pool: AgentPool, standing: StandingAgents) -> None:
        self.pool = pool
        self.standing = standing

    async def start(self, schedule: ScheduleRow, run_id: int, prompt: str) -> Started:
        pool = self.pool
        pool.killswitch.check()
        if schedule.target_kind == SPAWN:
            runner = await pool.spawn(f"{schedule.target}-{run_id}", prompt,
                                      model=schedule.model, by=f"schedule:{schedule.id}",
                                      origin=Origin.SCHEDULE)
            runner.keep_turns_quiet(schedule.notify != "always")
            return Started(agent_id=runner.id)
        # The one wake path (supervisor/schedule/standing.py): refused like an /ask (killed, over
        # budget, crash loop), and stored once per run whoever sends it.
        runner = await pool.fleet.get(schedule.target)
        sent = await self.standing.wake(runner.id, prompt, by=SCHEDULER_SENDER.name,
                                        dedup_key=f"schedule-run:{run_id}")
        return Started(agent_id=runner.id, message_id=sent.message_id)

    async def _turn_of(self, run: RunRow) -> Any:
        """The turn that ran it: the first turn that held its message (recorded with the
        turn), or a spawned agent's first turn."""
        assert run.agent_id is not None
        turns = self.pool.store.turns
        if run.message_id is not None:
            return await turns.holding(run.agent_id, run.message_id)
        first = await turns.recent(run.agent_id, 50)
        return min(first, key=lambda t: t.id) if first else None

    async def outcome(self, schedule: ScheduleRow, run: RunRow) -> Outcome | None:
        if run.agent_id is None:
            return None
        if run.message_id is not None:
            rows = [d for d in await self.pool.store.bus.deliveries(run.message_id)
                    if d.recipient_id == run.agent_id]
            if not rows:
                return None
            d = rows[0]
            if d.state in ("dead", "expired"):
                return Outcome(FAILED, 0.0, f"the message was not read: {d.reason or d.state}")
            if d.delivered_at is None:
                return None
        turn = await self._turn_of(run)
        if turn is None or turn.status == "running":
            runner = self.pool.fleet.find(run.agent_id)
            if runner is not None and runner.state == AgentState.KILLED:
                return Outcome(INTERRUPTED, 0.0, "its agent was killed")
            return None
        status = {"ok": RAN, "interrupted": INTERRUPTED}.get(turn.status, FAILED)
        if schedule.target_kind == SPAWN:
            await self._close(run.agent_id)
        return Outcome(status, float(turn.cost_usd or 0.0),
                       turn.result_text or turn.error or turn.status)

    async def _close(self, agent_id: str) -> None:
        """A run's own agent has done its turn: stopped (resumable, not killed), so runs do
        not pile up live agents against max_agents."""
        runner = self.pool.fleet.find(agent_id)
        if runner is None:  # placed on another worker: stopped there (its lease's column)
            with contextlib.suppress(SupervisorError, StoreError):
                await self.pool.elsewhere(agent_id, "stop", "scheduler")
            return
        # The turn's row says it ended a moment before the runner does: wait for that, or
        # the agent stays live (a run's outcome is read once).
        if runner is not None and runner.state.live and \
                await runner.turn_ended(self.pool.settings.stop_grace_s):
            with contextlib.suppress(SupervisorError, StoreError):
                await runner.stop()

    async def cancel(self, schedule: ScheduleRow, run: RunRow) -> None:
        if run.agent_id is None:
            return
        runner = await self.pool.fleet.get(run.agent_id)
        if schedule.target_kind == SPAWN:
            await runner.stop()
            return
        # Only the turn that holds this run's message is interrupted, never other work the
        # agent is busy with while the message still waits in its queue.
        turn = await self._turn_of(run) if run.message_id is not None else None
        if turn is not None and turn.status == "running":
            await runner.interrupt_turn()
