"""Standing agents: agents spawned with a charter that live past the session TTL.

Two things live here: reading a charter (`charter_text`), and the fleet side
(`StandingAgents`): the one wake path (`wake`, what the scheduler calls), and a bus question
sent back to its charter (supervisor/guard/sendback.py decides, for the gate too). Parking idle CLIs
is the watchdog's (it has no session TTL for them).
What a charter decides is supervisor/guard/charter.py; what a standing agent may not do unasked
is the policy's [standing] table (supervisor/guard/policy.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from store import Store
from supervisor.bus.core import SYSTEM, Sender, Sent
from supervisor.errors import AgentNotRunning, InvalidRequest
from supervisor.events import AgentState
from supervisor.guard.charter import MAX_CHARTER_CHARS
from supervisor.guard.sendback import send_back, turn_scope

if TYPE_CHECKING:
    from supervisor.agents.fleet import FleetReader
    from supervisor.bus.core import Bus
    from supervisor.clock import Clock

logger = logging.getLogger(__name__)

WAKE_KIND = "task"


def charter_text(value: str, *, refused: Callable[[Path], str | None] = lambda _p: None,
                 redact: Callable[[str], str] = lambda text: text) -> str:
    """The charter given to /spawn --charter: the text itself, or @path for a file's text.
    `refused(path)` says why a file may not be read for an agent (the policy's Read rules:
    credentials, Switchboard's own files); `redact` masks secrets, and a charter it changes
    is refused, since the charter goes into the agent's system prompt."""
    value = value.strip()
    if value.startswith("@"):
        path = Path(value[1:].strip()).expanduser()
        if (why := refused(path)) is not None:
            raise InvalidRequest(f"--charter {value}: {why}. A charter goes to the agent; give "
                                 "a file that holds only the charter.")
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"--charter {value}: cannot read {path} ({exc}). Give the "
                                 "charter's text, or @ and a readable UTF-8 file.") from exc
    if not value:
        raise InvalidRequest("the charter is empty: say the agent's goal, its authority, what "
                             "needs approval, what not to do and when to escalate")
    if redact(value) != value:
        raise InvalidRequest("the charter holds what looks like a secret (a token, key or "
                             "password), and a charter goes to the agent. Take it out.")
    if len(value) > MAX_CHARTER_CHARS:
        raise InvalidRequest(f"the charter is {len(value):,} characters; the limit is "
                             f"{MAX_CHARTER_CHARS:,}. Keep it to the decisions that matter.")
    return value


class StandingAgents:
    """The fleet side of standing agents: the wake path and the charter's send-backs."""

    def __init__(self, fleet: FleetReader, bus: Bus, store: Store, clock: Clock) -> None:
        self._fleet = fleet
        self._bus = bus
        self._store = store
        self._clock = clock

    async def wake(self, ref: str, text: str, *, by: str = "scheduler",
                   dedup_key: str | None = None) -> Sent:
        """THE wake path, for the scheduler and anything else that wakes an agent: a bus
        message of type `task` from `by` to exactly this agent. An idle agent runs it at once;
        a parked (or stopped) one starts its CLI again on its session (resume=<session id>)
        to run it; a busy one gets it when its turn ends; a paused one when resumed. With
        `dedup_key` (e.g. the schedule's slot key) a second wake with the same key is stored
        once: Sent.duplicate. A wake is never consent: it reaches the agent as a message, and
        nothing but an operator's answer settles an escalation. Refused (raised, nothing
        stored) as an /ask would be: killed, the kill switch on, over its daily budget, in a
        crash loop, the text empty or too long."""
        runner = await self._fleet.get(ref)
        if runner.state == AgentState.KILLED:
            raise AgentNotRunning(runner.name, runner.state, "wake")
        runner.admit()  # over budget, crash loop: refused like an /ask
        return await self._bus.send(Sender(SYSTEM, by), runner.name, WAKE_KIND, text,
                                    dedup_key=dedup_key, agent_id=runner.id)

    async def send_back_for(self, agent_id: str, question: str) -> str | None:
        """For a question from the bus to the operator: the send-back text if its agent is
        standing and its charter decides the question (see send_back), else None."""
        runner = self._fleet.find(agent_id)
        if runner is None or runner.charter is None:
            return None
        return await send_back(self._store, self._clock.now(), agent_id,
                               runner.charter, question, turn_scope(runner))

