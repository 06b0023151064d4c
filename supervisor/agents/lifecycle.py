"""The agent state machine: the one table of allowed transitions, checked on every change."""

from __future__ import annotations

from supervisor.events import AgentState

S = AgentState
_LIVE_OUT = frozenset({S.PAUSED, S.STOPPED, S.FAILED, S.KILLED})

# From each state, where an agent may go. A state may also be "entered again" with a new
# reason (a resumed session, a restarted supervisor): same-state changes are always allowed.
TRANSITIONS: dict[AgentState, frozenset[AgentState]] = {
    S.STARTING: frozenset({S.WORKING, S.IDLE, S.RESUME_FAILED}) | _LIVE_OUT,
    S.WORKING: frozenset({S.IDLE, S.WAITING, S.STALLED, S.STARTING}) | _LIVE_OUT,
    S.IDLE: frozenset({S.STARTING, S.WORKING, S.WAITING, S.RESUME_FAILED}) | _LIVE_OUT,
    S.WAITING: frozenset({S.WORKING, S.IDLE, S.STALLED}) | _LIVE_OUT,
    S.STALLED: frozenset({S.WORKING, S.WAITING, S.IDLE}) | _LIVE_OUT,
    S.PAUSED: frozenset({S.IDLE, S.WORKING, S.WAITING, S.STALLED, S.STARTING, S.STOPPED,
                         S.FAILED, S.KILLED}),
    S.STOPPED: frozenset({S.STARTING, S.WORKING, S.IDLE, S.FAILED, S.KILLED, S.RESUME_FAILED}),
    S.FAILED: frozenset({S.STARTING, S.WORKING, S.IDLE, S.STOPPED, S.KILLED, S.RESUME_FAILED}),
    # Out only by the operator's choice: a fresh session (idle), a stop or a kill.
    S.RESUME_FAILED: frozenset({S.IDLE, S.STOPPED, S.KILLED}),
    S.KILLED: frozenset(),
}


class InvalidTransition(Exception):
    """A change the table does not allow: a bug in the caller, never the operator's doing."""

    def __init__(self, old: AgentState, new: AgentState) -> None:
        super().__init__(f"an agent cannot go from {old} to {new}")
        self.old = old
        self.new = new


def allowed(old: AgentState, new: AgentState) -> bool:
    return old == new and old != S.KILLED or new in TRANSITIONS[old]


def check(old: AgentState, new: AgentState) -> None:
    if not allowed(old, new):
        raise InvalidTransition(old, new)
