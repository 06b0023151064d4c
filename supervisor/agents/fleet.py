"""The fleet registry: every agent this supervisor knows, looked up by id or name.

The pool adds runners to it (`Fleet.add`, the pool's alone); everyone else reads it through the
`FleetReader` protocol and never gets the pool: the bus (through `BusMembers`), the watchdog, the
kill switch, the scheduler's targets, the repositories and the API facets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from supervisor.errors import UnknownAgent

if TYPE_CHECKING:
    from store import Store
    from supervisor.agents.runner import AgentRunner


class FleetReader(Protocol):
    """The read-only face of the fleet."""

    def find(self, agent_id: str) -> AgentRunner | None:
        """The runner with this id, or None."""

    async def get(self, ref: str) -> AgentRunner:
        """By id or name (a live agent before a dead one of the same name); UnknownAgent."""

    def live(self) -> list[AgentRunner]: ...

    def everyone(self) -> list[AgentRunner]:
        """Every agent there has been since the start (killed ones too); only ever grows."""

    def is_live(self, agent_id: str) -> bool: ...

    def state_of(self, agent_id: str) -> str:
        """A word for the agent's state: busy, idle, paused, ... or gone."""

    async def subtree(self, agent_id: str) -> list[str]:
        """Ids of the agent and every descendant, at any depth (children before parents)."""

    def __len__(self) -> int: ...


class Fleet:
    """The registry itself. Runners are added by the pool, and removed only when another
    worker took the agent over (a killed agent stays for /status and /logs); their state is
    the runners' own."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._runners: dict[str, AgentRunner] = {}

    def add(self, runner: AgentRunner) -> None:
        """The pool's alone: a runner it built (spawned or recovered)."""
        self._runners[runner.id] = runner

    def drop(self, agent_id: str) -> None:
        """The pool's alone: an agent another worker runs now (its lease was taken over)."""
        self._runners.pop(agent_id, None)

    def find(self, agent_id: str) -> AgentRunner | None:
        return self._runners.get(agent_id)

    async def get(self, ref: str) -> AgentRunner:
        ref = ref.strip()
        found = [r for r in self._runners.values() if r.id == ref or r.name == ref]
        if not found:
            raise UnknownAgent(ref)
        return max(found, key=lambda r: (r.id == ref, r.state.live, r.created_at))

    def live(self) -> list[AgentRunner]:
        return [r for r in self._runners.values() if r.state.live]

    def everyone(self) -> list[AgentRunner]:
        return list(self._runners.values())

    def __len__(self) -> int:
        return len(self._runners)

    def is_live(self, agent_id: str) -> bool:
        r = self._runners.get(agent_id)
        return r is not None and r.state.live

    def state_of(self, agent_id: str) -> str:
        r = self._runners.get(agent_id)
        if r is None:
            return "gone"
        return "busy" if r.busy else str(r.state)

    async def subtree(self, agent_id: str) -> list[str]:
        order: list[str] = []
        stack = [agent_id]
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            order.append(current)
            stack.extend(c.id for c in await self._store.agents.children(current))
        return list(reversed(order))


class BusMembers:
    """The fleet as the bus sees it (`supervisor.bus.core.Members`): (id, name) pairs, and
    interrupting a busy recipient's turn for an `interrupt` message."""

    def __init__(self, fleet: FleetReader,
                 remote: Callable[[], dict[str, tuple[str, str]]] = dict) -> None:
        self._fleet = fleet
        # Live agents other workers run: id -> (name, worker) (supervisor/agents/handover.py).
        self._remote = remote

    def live(self) -> list[tuple[str, str]]:
        return [(r.id, r.name) for r in self._fleet.live()] + self._others()

    def everyone(self) -> list[tuple[str, str]]:
        return [(r.id, r.name) for r in self._fleet.everyone()] + self._others()

    def _others(self) -> list[tuple[str, str]]:
        return [(agent_id, name) for agent_id, (name, _) in self._remote().items()]

    def count(self) -> int:
        return len(self._fleet) + len(self._remote())

    def is_live(self, agent_id: str) -> bool:
        return self._fleet.is_live(agent_id) or agent_id in self._remote()

    def state_of(self, agent_id: str) -> str:
        if self._fleet.find(agent_id) is None and agent_id in self._remote():
            return "on another worker"
        return self._fleet.state_of(agent_id)

    async def interrupt(self, agent_id: str) -> None:
        r = self._fleet.find(agent_id)
        if r is not None:
            await r.interrupt_turn()
