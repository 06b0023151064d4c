"""The supervisor API's part for standing agents: wake one, read its charter and send-backs.

Exposed as `SupervisorAPI.standing`. The scheduler (or anything in supervisor/) may call the
core's `StandingAgents.wake` directly; this is the same path for callers above supervisor/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.errors import StoreError
from supervisor.bus.core import Sent
from supervisor.errors import StoreFailed

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.fleet import FleetReader
    from supervisor.guard.killswitch import KillSwitch
    from supervisor.schedule.standing import StandingAgents


@dataclass(frozen=True, slots=True)
class SendBackView:
    question: str
    lines: tuple[str, ...]
    at: float


class StandingAPI:
    def __init__(self, standing: StandingAgents, fleet: FleetReader, killswitch: KillSwitch,
                 store: Store) -> None:
        self._standing = standing
        self._fleet = fleet
        self._killswitch = killswitch
        self._store = store

    async def wake(self, ref: str, text: str, *, by: str = "scheduler",
                   dedup_key: str | None = None) -> Sent:
        """Wake an agent with a message (see StandingAgents.wake): never consent."""
        self._killswitch.check()
        try:
            return await self._standing.wake(ref, text, by=by, dedup_key=dedup_key)
        except StoreError as exc:
            raise StoreFailed(exc) from exc

    async def send_backs(self, ref: str) -> tuple[SendBackView, ...]:
        """The questions this agent's charter sent back to it, oldest first."""
        r = await self._fleet.get(ref)
        try:
            rows = await self._store.charters.sendbacks(r.id)
        except StoreError as exc:
            raise StoreFailed(exc) from exc
        return tuple(SendBackView(s.question, s.lines, s.at) for s in rows)
