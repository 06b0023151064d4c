"""Turns and today's spend, as the web console shows them: an agent's recent turns with their
origin, outcome, cost and times, and what the fleet spent since the budgets' day began."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.api.errors import store_errors
from supervisor.guard.guardrails import day_start

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.pool import AgentPool
    from supervisor.config import Settings


@dataclass(frozen=True, slots=True)
class TurnView:
    """One turn of an agent: what it was asked, by whom (origin), what it cost and how long."""

    id: int
    prompt: str
    status: str
    result_text: str | None
    error: str | None
    cost_usd: float
    started_at: float
    ended_at: float | None
    origin: str | None


@dataclass(frozen=True, slots=True)
class TodaySpend:
    """Spend since this UTC day began (the daily budgets' day), in all and per agent id, with
    the daily caps (None: no cap)."""

    total_usd: float
    by_agent: Mapping[str, float]
    global_cap_usd: float | None
    agent_cap_usd: float | None


class TurnsAPI:
    def __init__(self, pool: AgentPool, settings: Settings, store: Store) -> None:
        self._pool = pool
        self._settings = settings
        self._store = store

    @store_errors
    async def spent_today(self) -> TodaySpend:
        """One read for the whole fleet (the per-day roll-up), cheap enough for every page."""
        by_agent = await self._store.turns.spent_by_agent_since(
            day_start(self._pool.clock.now()))
        return TodaySpend(sum(by_agent.values()), by_agent, self._settings.global_budget_usd,
                          self._settings.agent_budget_usd)

    @store_errors
    async def recent(self, ref: str, n: int = 20) -> tuple[TurnView, ...]:
        """An agent's last `n` turns (at most 200), newest first."""
        r = await self._pool.fleet.get(ref)
        return tuple(TurnView(t.id, t.prompt, t.status, t.result_text, t.error, t.cost_usd,
                              t.started_at, t.ended_at, t.origin)
                     for t in await self._store.turns.recent(r.id, max(1, min(n, 200))))


__all__ = ["TodaySpend", "TurnView", "TurnsAPI"]
