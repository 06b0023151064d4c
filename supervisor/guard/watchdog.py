"""The background guard: session TTLs, stalled turns, memory warnings (each tick), and budgets
(after every turn). It acts and tells the operator; nobody has to look for it to happen."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.events import AgentState
from supervisor.guard.escalations import Decision, Kind, Timeouts
from supervisor.guard.guardrails import MemoryProbe, day_start

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.fleet import FleetReader
    from supervisor.config import Settings
    from supervisor.guard.escalations import Escalations

logger = logging.getLogger(__name__)


def usd(amount: float) -> str:
    """Dollars with as many digits as the amount has, up to four: a budget of 0.015 reads
    $0.015, not $0.01 (which would make "$0.0195 of $0.01" look like a miscount)."""
    text = f"{amount:.4f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"

NO_TIMEOUT = Timeouts(reminder_s=float("inf"), timeout_s=float("inf"))
RAISE_STEPS_USD = (5.0, 20.0)


class Watchdog:
    def __init__(self, settings: Settings, fleet: FleetReader, escalations: Escalations,
                 store: Store, memory: MemoryProbe, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.fleet = fleet
        self.escalations = escalations
        self.store = store
        self.memory = memory
        self.clock = clock
        self._memory_warned_at = 0.0
        self._tasks: set[asyncio.Task[None]] = set()

    # -- periodic checks ------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self.clock.sleep(self.settings.watchdog_interval_s)
            try:
                await self.tick(self.clock.now())
            except Exception:  # noqa: BLE001 - the guard keeps guarding
                logger.exception("watchdog tick failed")

    async def tick(self, now: float) -> None:
        """Run once: every periodic check, as of `now` (wall-clock seconds)."""
        s = self.settings
        notify = self.escalations.notify
        for r in self.fleet.live():
            # A standing agent has no TTL: its idle CLI is parked instead, and the next message
            # or schedule firing resumes its session (docs/standing-agents.md).
            if getattr(r, "standing", False):
                idle_for = s.standing_idle_stop_s
                if idle_for and now - r.last_activity_at >= idle_for and await r.park(idle_for):
                    logger.info("standing agent parked agent=%s name=%s", r.id, r.name)
            elif await self._ttl(r, now):
                continue
            idle = now - r.last_activity_at
            if r.state == AgentState.WORKING and idle >= s.stall_s and await r.mark_stalled(idle):
                await notify(r.id, f"{r.name} is stalled: no output for {idle:.0f}s",
                             f"Current tool: {r.current_tool or 'none'}. Send /stop {r.name} to "
                             f"interrupt it, /kill {r.name} to end it, or wait.")
        reading = await asyncio.to_thread(self.memory.read)
        if reading.pct >= s.memory_warn_pct and now - self._memory_warned_at > 600:
            self._memory_warned_at = now
            await notify(None, f"Memory at {reading.pct:.0f}%",
                         f"{reading.used_bytes / 2**30:.1f} of {reading.limit_bytes / 2**30:.1f}"
                         f" GiB ({reading.source}). New agents are refused above "
                         f"{s.memory_refuse_pct:g}%.")

    async def _ttl(self, r: Any, now: float) -> bool:
        """The session TTL of one agent: warned, then stopped. True when it was stopped."""
        s = self.settings
        # The TTL bounds one CLI session: a stopped agent asked again starts a new one.
        age = now - r.session_started_at if r.process is not None and \
            r.session_started_at else 0.0
        if s.session_ttl_s and age >= s.session_ttl_s and r.state.live:
            await self._end_ttl(r)
            return True
        if (s.session_ttl_s and not r.ttl_warned and r.state.live
                and age >= s.session_ttl_s - s.ttl_warn_s):
            r.warned_of_ttl()
            left = max(0.0, s.session_ttl_s - age)
            await self.escalations.notify(
                r.id, f"{r.name} reaches its session TTL in {left / 60:.1f} min",
                f"It will be stopped then (session_ttl_s={s.session_ttl_s:g}). "
                f"Its session is kept: /ask {r.name} resumes it afterwards.")
        return False

    async def _end_ttl(self, runner: Any) -> None:
        with contextlib.suppress(Exception):
            await runner.stop()
        await self.escalations.notify(
            runner.id, f"{runner.name} stopped: session TTL reached",
            f"It ran for {self.settings.session_ttl_s / 3600:.1f} h. /ask {runner.name} <text> "
            "resumes its session.")

    # -- budgets --------------------------------------------------------------------------------

    def _background(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def budget_for(self, agent_id: str) -> float | None:
        base = self.settings.agent_budget_usd
        if base is None:
            return None
        day = int(day_start(self.clock.now()))
        raised = await self.store.kv.get(f"budget:{agent_id}:{day}") or 0.0
        return base + float(raised)

    async def over_budget(self, runner: Any) -> str | None:
        """Checked by a runner after every turn, before it takes the next message: a reason
        to stop it, or None. The operator's escalation is opened in the background."""
        if self.settings.agent_budget_usd is None and self.settings.global_budget_usd is None:
            return None
        turns = self.store.turns
        since = day_start(self.clock.now())
        budget = await self.budget_for(runner.id)
        if budget is not None:
            spent = await turns.spent_since(since, runner.id)
            if spent > budget:
                self._background(self._offer_raise(runner, spent, budget),
                                 f"budget:{runner.name}")
                return f"daily budget crossed: {usd(spent)} of {usd(budget)}"
        gbudget = self.settings.global_budget_usd
        if gbudget is not None:
            spent = await turns.spent_since(since, None)
            if spent > gbudget:
                self._background(self._stop_all_for_budget(runner, spent, gbudget), "budget:all")
                return f"global daily budget crossed: {usd(spent)} of {usd(gbudget)}"
        return None

    async def _stop_all_for_budget(self, first: Any, spent: float, gbudget: float) -> None:
        others = [r for r in self.fleet.live() if r is not first]
        for r in others:
            with contextlib.suppress(Exception):
                await r.stop()
        names = ", ".join(r.name for r in [first, *others])
        await self.escalations.notify(
            None, f"Global daily budget crossed: {usd(spent)} of {usd(gbudget)}",
            f"Stopped: {names}. Raise global_budget_usd in the configuration to continue today.")

    async def _offer_raise(self, runner: Any, spent: float, budget: float) -> None:
        esc = self.escalations
        options = tuple(f"Raise by ${n:g}" for n in RAISE_STEPS_USD) + ("Stop",)
        row = await esc.open(
            agent_id=runner.id, kind=Kind.QUESTION,
            title=f"{runner.name} crossed its daily budget: {usd(spent)} of {usd(budget)}",
            body="It was stopped after its turn. Raise today's budget to let it continue "
                 f"(then /ask {runner.name} <text>), or leave it stopped.",
            options=options, timeouts=NO_TIMEOUT,
        )
        answer = await esc.wait(row)
        if answer.decision != Decision.ANSWER or not answer.text.startswith("Raise by $"):
            return
        step = float(answer.text.removeprefix("Raise by $"))
        key = f"budget:{runner.id}:{int(day_start(self.clock.now()))}"
        raised = float(await self.store.kv.get(key) or 0.0) + step
        await self.store.kv.set(key, raised)
        runner.lift_budget_block()
        await esc.notify(runner.id, f"{runner.name}: budget raised by ${step:g}",
                         f"Today's budget is now {usd(budget + step)}. /ask {runner.name} <text> "
                         "to continue.")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
