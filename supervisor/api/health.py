"""The API's health and record (a part of SupervisorAPI): what a scrape and a readiness probe
read (counts from memory, one indexed count, a bounded write probe), and the audit of operator
actions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from store.errors import StoreError
from supervisor.api.errors import store_errors
from supervisor.api.views import Actor, AuditView, CostCell, StatsView, StoreCheck
from supervisor.events import AgentState

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.pool import AgentPool
    from supervisor.guard.killswitch import KillSwitch

logger = logging.getLogger("supervisor.api")

# Outcomes reported even before one happens, so a dashboard sees 0 rather than no series.
TURN_OUTCOMES = ("ok", "error", "interrupted", "failed")
SCHEDULE_OUTCOMES = ("ok", "failed", "skipped")
WRITE_PROBE_KEY = "health.write_probe"


class HealthAndRecord:
    if TYPE_CHECKING:  # the facade's, which this is a part of
        _store: Store
        _pool: AgentPool
        _killswitch: KillSwitch
        _bus_depth: Callable[[], int]
        _schedule_runs: Callable[[], Mapping[str, int]]

    def report_bus_depth(self, depth: Callable[[], int]) -> None:
        """The agent bus plugs in here: how many messages wait (read on every scrape)."""
        self._bus_depth = depth

    def report_schedule_runs(self, runs: Callable[[], Mapping[str, int]]) -> None:
        """The scheduler plugs in here: runs so far by outcome (counters, read on every
        scrape)."""
        self._schedule_runs = runs

    @store_errors
    async def stats(self) -> StatsView:
        """Counts from memory (agents, the turn tally) and one indexed count of open
        escalations: cheap enough for every scrape, whatever the size of the tables."""
        runners = self._pool.fleet.everyone()
        agents = {str(state): 0 for state in AgentState}
        for r in runners:
            agents[str(r.state)] += 1
        names = {r.id: r.name for r in runners}
        tally = await self._store.turns.tally()
        turns = dict.fromkeys(TURN_OUTCOMES, 0) | dict(tally.outcomes)
        count, oldest = await self._store.escalations.open_summary()
        age = max(0.0, self._pool.clock.now() - oldest) if oldest is not None else 0.0
        runs = dict.fromkeys(SCHEDULE_OUTCOMES, 0) | dict(self._schedule_runs())
        return StatsView(
            agents=tuple(agents.items()),
            turns=tuple(sorted(turns.items())),
            costs=tuple(CostCell(a, names.get(a, a), m, c) for a, m, c in tally.costs),
            open_escalations=count,
            oldest_escalation_age_s=age,
            halted=self._killswitch.halted,
            bus_depth=int(self._bus_depth()),
            schedule_runs=tuple(sorted(runs.items())),
            gateway=self._pool.gateway.view() if self._pool.gateway is not None else None,
        )

    async def check_store(self, timeout_s: float = 5.0) -> StoreCheck:
        """Whether the database takes a write now (one small row, bounded in time)."""
        try:
            await asyncio.wait_for(self._store.kv.touch(WRITE_PROBE_KEY), timeout_s)
        except TimeoutError:
            return StoreCheck(False, f"a write did not finish within {timeout_s:g}s")
        except StoreError as exc:
            # The reason only: the body is served to whoever can reach the port.
            return StoreCheck(False, f"the database takes no writes: {getattr(exc, 'reason', exc)}")
        return StoreCheck(True, "writable")

    # -- audit ------------------------------------------------------------------------------------

    async def audit(self, by: Actor, action: str, args: str, *, ok: bool, result: str) -> bool:
        """Record an operator action. A failed write is logged, never raised: the action
        it records has already happened. Returns whether it was written."""
        try:
            await self._store.audit.record(platform=by.platform, user_id=by.id,
                                           user_name=by.name, action=action, args=args, ok=ok,
                                           result=result)
        except StoreError:
            logger.warning("audit write failed action=%s", action, exc_info=True)
            return False
        return True

    async def _audit_row(self, by: Actor, action: str, args: str, ok: bool,
                         result: str) -> bool:
        return await self.audit(by, action, args, ok=ok, result=result)

    @store_errors
    async def recent_actions(self, n: int = 10) -> tuple[AuditView, ...]:
        """The newest audit rows, newest first (what a front end's home screen lists)."""
        return tuple(await self._store.audit.recent(n))
