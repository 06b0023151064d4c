"""One agent: its turn queue, state machine, restarts, cost accounting and event log.

What an SDK message means (the event row, the outputs, a turn's cost) is worked out by the pure
functions in supervisor/agents/records.py; which state changes are legal is
supervisor/agents/lifecycle.py's table; the turn queue is an `Inbox` (supervisor/bus/inbox.py),
so the bus can replace it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeSDKError,
)

from store import Store
from store.agents import AgentRow
from store.errors import StoreError
from supervisor.agents.api_trouble import ApiTrouble
from supervisor.agents.cli_launch import (
    NATIVE_TOOLS_DISALLOWED,
    agent_env,
    cli_options,
    token_revoker,
)
from supervisor.agents.ingest import EventIngest
from supervisor.agents.lifecycle import check as check_transition
from supervisor.agents.transcripts import FRESH_TOOL, bring_back, report_resume_failed
from supervisor.agents.turn import TurnExecution
from supervisor.bus.inbox import Inbox, MemoryInbox, Origin
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.errors import AgentFailed, AgentNotRunning, ResumeFailed
from supervisor.events import AgentState, EventHub, StateChanged
from supervisor.guard.describe import summarize_tool
from supervisor.guard.escalations import Escalations
from supervisor.guard.gate import GateDeps, ToolGate
from supervisor.guard.gateway import ModelGateway
from supervisor.guard.guardrails import CrashTracker, LimitExceeded, day_start
from supervisor.guard.policy import Policy
from supervisor.process.agent import AgentProcess
from supervisor.process.sandbox import Isolation
from supervisor.process.tree import sweep
from supervisor.repos.memory import AgentMemory

logger = logging.getLogger(__name__)

IDLE_POLL_S = 1.0
NO_SESSION = "No conversation found with session ID"  # the CLI's words for a lost session
__all__ = ["AgentRunner", "RunnerDeps", "NATIVE_TOOLS_DISALLOWED", "summarize_tool"]


@dataclass(frozen=True, slots=True)
class RunnerDeps:
    settings: Settings
    store: Store
    hub: EventHub
    launcher: Path
    real_cli: Path
    policy: Policy
    escalations: Escalations
    killswitch: Any  # supervisor.guard.killswitch.KillSwitch: check() raises while halted
    crashes: CrashTracker
    over_budget: Callable[[AgentRunner], Awaitable[str | None]]
    isolation: Isolation
    peer_dirs: Callable[[str], tuple[str, ...]] = lambda _agent_id: ()  # others' --cwd
    clock: Clock = SYSTEM_CLOCK
    agent_tools: Callable[[AgentRunner], list[Any]] = lambda _runner: []  # the bus's MCP tools
    session_store: Any = None  # store.gcs_sessions.GcsSessionStore when a bucket is configured
    # The agent's worktree as its sandbox sees it (supervisor/repos: mounts and environment).
    repo_wall: Callable[[str], Any] = lambda _agent_id: None
    # Awaited before the agent's process starts; raises AgentFailed to refuse (the lease in the
    # bucket is held by another supervisor: supervisor/persistence/bucket.py).
    before_start: Callable[[str], Awaitable[None]] | None = None
    # Called once the agent's session id is known or changed: a snapshot is then wanted, or a
    # container lost before the turn ends would come back not knowing which session to resume.
    session_known: Callable[[str], None] | None = None
    ingest: EventIngest | None = None  # batched event writes; None: each event written alone
    memory: AgentMemory | None = None  # the project memory (supervisor/repos/memory.py)
    gateway: ModelGateway | None = None  # the model gateway: agents' tokens, not the key
    cpu_group: str | None = None  # the agents' CPU group's cgroup.procs (process/cpugroup.py)
    # The (owner, epoch) of the agent's lease that its turn starts and state changes are
    # fenced by (supervisor/agents/ownership.py); None: unfenced.
    fence: Callable[[str], tuple[str, int] | None] = lambda _agent_id: None


class AgentRunner(TurnExecution):
    """One agent's state, queue and lifecycle; its turns run in TurnExecution
    (supervisor/agents/turn.py)."""

    def __init__(self, row: AgentRow, deps: RunnerDeps, inbox: Inbox | None = None,
                 charter: str | None = None) -> None:
        self.id = row.id
        self.charter = charter  # a standing agent's (docs/standing-agents.md), else None
        self.name = row.name
        self.parent_id = row.parent_id
        self.model = row.model
        self.cwd = row.cwd
        self.permission_mode = row.permission_mode
        self.project_settings = row.project_settings
        self.session_id = row.session_id
        self.state = AgentState(row.state)
        self.created_at = row.created_at
        self.last_error = row.last_error
        self._deps = deps
        self._baseline: dict[str, float] = dict(row.cost_baseline)
        self._inbox: Inbox = inbox if inbox is not None else MemoryInbox()
        self._not_paused = asyncio.Event()
        if self.state != AgentState.PAUSED:
            self._not_paused.set()
        # Cleared in resume_failed: the loop holds its message until the operator chooses.
        self._resumable = asyncio.Event()
        if self.state != AgentState.RESUME_FAILED:
            self._resumable.set()
        self._note: str | None = None  # told the agent with its next turn (a restart, a summary)
        self._mirror_warned = False
        self._api_trouble = ApiTrouble()
        self._proc: AgentProcess | None = None
        self._turn_done = asyncio.Event()
        self._turn_done.set()
        self._lifecycle = asyncio.Lock()
        self._state_lock = asyncio.Lock()
        self._state_before_pause = AgentState.IDLE
        self._stopping = False
        self._shutting_down = False  # the supervisor is closing: the loop ends, whatever else
        self.current_tool: str | None = None
        self.turn_started_at: float | None = None
        self.first_event_at: float | None = None
        self._open_escalations = 0
        # An interrupt that came before the CLI began the turn: sent once it has.
        self._interrupt_pending = False
        self._turn_begun = False
        self._paused_by_timeout = False
        self.budget_blocked: str | None = None
        self._budget_day = 0
        self.session_started_at: float | None = None  # when the current CLI process started
        self.last_activity_at = deps.clock.now()
        self.ttl_warned = False
        # A scheduled run's agent: a turn that went well is no news (the schedule's notify
        # policy says what reaches the operator); a failed one still is.
        self.quiet_turns = False
        # What the agent reported of this turn's outcome (report_result), shown with the
        # finished-turn notice and then cleared.
        self.graded: str | None = None
        self._quiet_turn = False  # this turn: quiet_turns, or only such scheduled messages
        self._operator_turn = False  # this turn: one with a message of the operator's
        self._unsolicited_told = False  # a turn of the CLI's own was refused, its result unread
        self.gate = ToolGate(self, GateDeps(deps.store, deps.policy, deps.escalations,
                                            lambda: deps.killswitch.halted,
                                            lambda: deps.agent_tools(self)))

    # -- public API used by the pool ---------------------------------------------------------

    @property
    def tag(self) -> str:
        return f"{self._deps.settings.instance_id}/{self.id}"

    @property
    def process(self) -> AgentProcess | None:
        return self._proc

    @property
    def queued(self) -> int:
        return len(self._inbox)

    @property
    def busy(self) -> bool:
        return not self._turn_done.is_set()

    async def turn_ended(self, timeout_s: float) -> bool:
        """Until the running turn, if any, has ended (its row is written before its last
        bookkeeping: state, budget, pids), bounded by `timeout_s`. True once it has."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._turn_done.wait()
        return not self.busy

    @property
    def standing(self) -> bool:
        """Spawned with a charter: no session TTL, parked when idle, irreversible steps ask."""
        return self.charter is not None

    async def submit(self, text: str, origin: Origin = Origin.OPERATOR) -> int:
        """Queue a message (stored before this returns); it becomes the next turn. Returns
        how many are ahead of it. `origin`: who asked, where it is not the operator."""
        if self.state == AgentState.RESUME_FAILED and not any(
                e.tool_name == FRESH_TOOL for e in await self._deps.escalations.pending(self.id)):
            # "Leave it" was the answer before: asked again, since a message came.
            await report_resume_failed(self._deps.escalations, self.id, self.name,
                                       self._resume_reason, text)
        self.admit()
        ahead = len(self._inbox) + (1 if self.busy else 0)
        await self._inbox.put(text, origin)
        return ahead

    @property
    def _resume_reason(self) -> str:
        return (self.last_error or "").removeprefix("resume failed: ")

    def admit(self) -> None:
        """Raises what refuses this agent a next turn: killed, its resume failed, over budget,
        in a crash loop (a wake is checked like an /ask). Not the kill switch, which every
        caller checked before it looked anything up (the pool's `ask`, the API, the scheduler,
        the agents' spawn tool), nor the text, which the bus checks as it stores it."""
        if self.state == AgentState.KILLED:
            raise AgentNotRunning(self.name, self.state, "message")
        if self.state == AgentState.RESUME_FAILED:
            raise ResumeFailed(self.name, self._resume_reason)
        if self.budget_blocked and self._budget_day != int(day_start(clock=self._deps.clock)):
            self.budget_blocked = None  # budgets are per day: a new day, a new budget
        if self.budget_blocked:
            raise LimitExceeded(f"{self.name} is stopped: {self.budget_blocked}.",
                                "Raise its budget (answer the budget question) to continue.")
        wait_s = self._deps.crashes.in_loop(self.id)
        if wait_s is not None and not (self._proc and self._proc.alive()):
            raise LimitExceeded(
                f"{self.name} crashed {self._deps.crashes.max_crashes} times in "
                f"{self._deps.crashes.window_s / 60:.0f} minutes, so it is not restarted "
                f"(last error: {(self.last_error or '?')[:300]}).",
                f"Fix the cause and try again in {wait_s / 60:.0f} minutes, or /kill it.",
            )

    def _ended(self, *, shutdown: bool = True) -> bool:
        """Killed (or, with `shutdown`, the supervisor closing): the loop stops. A method, not
        an inline test: the state changes across every await of the loop."""
        return self.state == AgentState.KILLED or (shutdown and self._shutting_down)

    async def run(self) -> None:
        """The agent's loop: one turn at a time, for as long as it is not killed."""
        while not self._ended():
            item = await self._inbox.take(IDLE_POLL_S)
            if item is None:
                if not self._ended():
                    await self._check_idle_process()
                continue
            if self._shutting_down:  # taken, not run: back to the queue for the next start
                await self._inbox.ack(item, consumed=False)
                break
            await self._not_paused.wait()
            await self._resumable.wait()  # resume failed: held until the operator chooses
            if self._ended(shutdown=False):
                break
            if self._deps.killswitch.halted:
                logger.warning("kill switch on: message not delivered agent=%s", self.id)
                await self._inbox.ack(item, consumed=False)  # kept for after the release
                continue
            consumed = False
            try:
                consumed = await self._turn(item)
            except Exception:  # noqa: BLE001 - the loop must outlive any one turn's failure
                logger.exception("turn crashed agent=%s name=%s", self.id, self.name)
            finally:
                await self._inbox.ack(item, consumed=consumed)

    async def pause(self) -> list[int]:
        async with self._lifecycle:
            if not self.state.live or self.state == AgentState.PAUSED:
                raise AgentNotRunning(self.name, self.state, "pause")
            stopped = self._proc.pause() if self._proc and self._proc.alive() else []
            self._not_paused.clear()
            try:
                await self._set_state(AgentState.PAUSED,
                                      f"paused ({len(stopped)} processes stopped)", remember=True)
            except StoreError:  # not recorded: undone, so that "nothing was changed" holds
                if self._proc and stopped:
                    self._proc.resume()
                self._not_paused.set()
                raise
            return stopped

    async def resume(self) -> None:
        async with self._lifecycle:
            if self.state != AgentState.PAUSED:
                raise AgentNotRunning(self.name, self.state, "resume")
            if self._proc:
                self._proc.resume()
            self._paused_by_timeout = False
            back = self._state_before_pause if self.busy else AgentState.IDLE
            if back == AgentState.PAUSED:
                back = AgentState.IDLE
            try:
                await self._set_state(back, "resumed")
            except StoreError:  # not recorded: frozen again, so that "nothing was changed" holds
                if self._proc:
                    self._proc.pause()
                raise
            self._not_paused.set()

    async def stop(self) -> None:
        """Interrupt the running turn, close the CLI, keep the session for a later message."""
        async with self._lifecycle:
            if not self.state.live:
                raise AgentNotRunning(self.name, self.state, "stop")
            self._stopping = True
            with contextlib.suppress(StoreError):  # a stop works whatever the store does
                await self._deps.escalations.cancel_for_agent(self.id, "the agent was stopped")
            try:
                proc = self._proc
                if proc is not None:
                    if proc.paused:
                        proc.resume()
                    if self.busy:
                        await self._interrupt(proc)
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(self._deps.settings.stop_grace_s):
                                await self._turn_done.wait()
                    await proc.close(kill=True, timeout_s=self._deps.settings.stop_grace_s)
                    self._proc = None
                self._not_paused.set()
                await self._set_state_held(AgentState.STOPPED, "stopped by operator")
            finally:
                self._stopping = False

    async def park(self, idle_s: float) -> bool:
        """A standing agent idle for `idle_s`: its CLI is closed, the agent stays idle with its
        session, and the next message starts the CLI again with resume=<session id>."""
        async with self._lifecycle:
            proc = self._proc
            if (proc is None or self.busy or self._stopping or self.queued
                    or self.state != AgentState.IDLE or self._open_escalations):
                return False
            self._proc = None  # from here a new turn starts a CLI of its own
            await proc.close(kill=True, timeout_s=self._deps.settings.stop_grace_s)
            with contextlib.suppress(StoreError):
                await self._deps.store.agents.update(self.id, launcher_pid=None, cli_pid=None)
            if self.state == AgentState.IDLE:
                await self._set_state(AgentState.IDLE, f"parked after {idle_s:.0f}s idle; a "
                                      "message or schedule resumes its session")
            return True

    async def kill(self, reason: str = "killed by operator") -> list[int]:
        """SIGTERM, bounded wait, SIGKILL, sweep. Returns the pids that had to be SIGKILLed."""
        async with self._lifecycle:
            if self.state == AgentState.KILLED:
                return []
            self._stopping = True
            with contextlib.suppress(StoreError):  # a kill works whatever the store does
                await self._deps.escalations.cancel_for_agent(self.id, "the agent was killed")
            forced: list[int] = []
            proc, self._proc = self._proc, None
            if proc is not None:
                forced = await proc.kill(self._deps.settings.kill_grace_s)
            else:  # no process of ours (e.g. after a restart): anything tagged goes anyway
                forced = await asyncio.to_thread(sweep, self.tag + "\0")
            await self._set_state_held(AgentState.KILLED, reason)
            self._not_paused.set()
            self._resumable.set()
            self._inbox.wake()
            return forced

    async def interrupt_turn(self) -> bool:
        """An `interrupt` message arrived: end the running turn now (the message is next)."""
        proc = self._proc
        if not self.busy:
            return False
        if proc is None or not proc.alive() or not self._turn_begun:
            self._interrupt_pending = True  # the turn is being set up: interrupted once sent
            return True
        await self._interrupt(proc)
        return True

    async def _interrupt(self, proc: AgentProcess) -> None:
        """Interrupt the running turn, bounded (asyncio.timeout, not wait_for, which can lose a
        cancel on 3.11); a CLI that is gone or does not answer is no error here."""
        with contextlib.suppress(ClaudeSDKError, OSError, TimeoutError):
            async with asyncio.timeout(5):
                await proc.interrupt()

    # -- called by the gate while an escalation is open ------------------------------------------

    async def escalation_started(self) -> None:
        self._open_escalations += 1
        if self.state in (AgentState.WORKING, AgentState.STALLED):
            await self._set_state(AgentState.WAITING, "waiting for the operator")
        elif self.state == AgentState.PAUSED and self._state_before_pause == AgentState.WORKING:
            self._state_before_pause = AgentState.WAITING

    async def escalation_finished(self) -> None:
        self._open_escalations = max(0, self._open_escalations - 1)
        if self._open_escalations:
            return
        if self.state == AgentState.WAITING:
            await self._set_state(AgentState.WORKING, "answered")
        elif self.state == AgentState.PAUSED and self._state_before_pause == AgentState.WAITING:
            self._state_before_pause = AgentState.WORKING

    def warned_of_ttl(self) -> None:
        """The watchdog told the operator this session nears its TTL (once per session)."""
        self.ttl_warned = True

    def lift_budget_block(self) -> None:
        """The operator raised today's budget: the next message may start a turn."""
        self.budget_blocked = None

    def keep_turns_quiet(self, quiet: bool) -> None:
        """A scheduled run's agent: a turn that went well is not pushed to the operator."""
        self.quiet_turns = quiet

    async def mark_stalled(self, idle_s: float) -> bool:
        """Watchdog: a turn with no output for too long. Returns True on the transition."""
        if self.state != AgentState.WORKING:
            return False
        await self._set_state(AgentState.STALLED, f"no output for {idle_s:.0f}s")
        return True

    async def pause_for_timeout(self) -> None:
        if self.state.live and self.state != AgentState.PAUSED:
            await self.pause()
            self._paused_by_timeout = True

    async def resume_after_answer(self) -> None:
        if self._paused_by_timeout and self.state == AgentState.PAUSED:
            await self.resume()

    async def recover(self, note: str | None = None) -> None:
        """After a supervisor restart: no process yet; the session resumes on the next message,
        which tells the agent `note` (that it was restarted, and whether its turn was cut)."""
        if self.session_id and note:
            self._note = note
        if self.state.live and self.state != AgentState.PAUSED:
            await self._set_state(
                AgentState.IDLE, "supervisor restarted; the session resumes on the next message"
            )

    async def start_fresh(self, summary: str, *, by: str, prompt: str = "") -> None:
        """The operator's answer to a failed resume: a new session whose first turn tells the
        agent `summary`, with `prompt` (the message that met the failure) as its message."""
        async with self._lifecycle:
            if self.state != AgentState.RESUME_FAILED:
                raise AgentNotRunning(self.name, self.state, "start a fresh session of")
            self.session_id = None
            self._baseline = {}  # the CLI's cumulative cost starts again with a new session
            await self._deps.store.agents.update(self.id, session_id=None, cost_baseline={},
                                                 last_error=None)
            self.last_error = None
            self._note = summary
            await self._set_state(AgentState.IDLE, f"fresh session, asked by {by}")
            # The failed turn's message went back to the queue held (an operator's was dropped,
            # as with any failed turn): a new message releases what is held and is the turn.
            await self._inbox.put(prompt if prompt and not len(self._inbox) else
                                  "[Switchboard] Continue your task from where it was.")
            self._resumable.set()

    async def _resume_failed(self, reason: str, prompt: str) -> None:
        """Deterministic: the state says so, the operator is asked once, nothing retries."""
        self._resumable.clear()
        self.last_error = f"resume failed: {reason}"
        logger.warning("resume failed agent=%s name=%s: %s", self.id, self.name, reason)
        await self._deps.store.agents.update(self.id, last_error=self.last_error)
        await self._set_state(AgentState.RESUME_FAILED, reason)
        await report_resume_failed(self._deps.escalations, self.id, self.name, reason, prompt)

    def halting(self) -> None:
        """The kill switch is about to SIGKILL everything: a dying CLI is not a failure."""
        self._stopping = True

    async def mark_killed(self, reason: str, *, swept: bool = False) -> None:
        """Bookkeeping after the kill switch SIGKILLed this agent's processes. `swept`: the
        switch has already swept every tagged process and waited for them (and sweeps once
        more after), so the client is only closed, with no sweep of this agent's own."""
        if self.state == AgentState.KILLED:
            return
        self._stopping = True
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.close(kill=not swept, timeout_s=2)
        with contextlib.suppress(StoreError):  # the processes are gone whatever the store says
            await self._deps.escalations.cancel_for_agent(self.id, reason)
        await self._set_state_held(AgentState.KILLED, reason)
        self._not_paused.set()
        self._resumable.set()
        self._inbox.wake()

    def begin_shutdown(self) -> None:
        """Supervisor shutdown, the synchronous first half: the loop is told to end and the
        CLI gets its SIGTERM now. The pool does this for every agent in one pass before it
        waits for any of them (`close_for_shutdown`): 300 agents then die side by side instead
        of each SIGTERM waiting its turn behind the others' exits on the event loop."""
        self._stopping = True
        self._shutting_down = True
        self._inbox.wake()
        if self._proc is not None and self._deps.settings.kill_grace_s > 0:
            self._proc.terminate()

    async def close_for_shutdown(self) -> None:
        """Supervisor shutdown: end the process, keep the agent resumable on the next start.
        The loop ends too, even if a cancel meant for it were lost somewhere underneath."""
        self.begin_shutdown()
        proc, self._proc = self._proc, None
        if proc is not None:  # the pool sweeps the whole tag once all are closed (`release`)
            await proc.kill(self._deps.settings.kill_grace_s, sweep=False)

    # -- internals -----------------------------------------------------------------------------

    async def _set_state(self, new: AgentState, reason: str = "", *, unless_paused: bool = False,
                         remember: bool = False) -> None:
        """Checked against the transition table; stored first, then held, then published, so
        memory and the front ends never show a state the database does not have. One at a
        time: a pause and a turn starting must not interleave their writes. `unless_paused`:
        if paused, this is the state to resume to instead; `remember`: the state left is it."""
        async with self._state_lock:
            old = self.state
            if unless_paused and old == AgentState.PAUSED:
                self._state_before_pause = new
                return
            if old == new and not reason:
                return
            check_transition(old, new)
            await self._flush_events()
            await self._deps.store.agents.set_state(self.id, old, new, reason,
                                                    fence=self._deps.fence(self.id))
            if remember:
                self._state_before_pause = old
            self.state = new
            self._deps.hub.publish(StateChanged(self.id, self.name, old, new, reason))
            logger.info("agent state agent=%s name=%s old=%s new=%s", self.id, self.name, old,
                        new)

    async def _set_state_held(self, new: AgentState, reason: str) -> None:
        """For what has already happened (the processes are dead): stored if the store takes
        it, else held in memory and published all the same, and the operator told that the
        database does not know (a restart would show the old state)."""
        try:
            await self._set_state(new, reason)
        except StoreError as exc:
            old, self.state = self.state, new
            self._deps.hub.publish(StateChanged(self.id, self.name, old, new, reason))
            logger.warning("state not recorded agent=%s new=%s: %s", self.id, new, exc)
            await self._deps.escalations.notify(
                self.id, f"{self.name} is {new}, but the database could not record it",
                f"{exc}. After a restart it would show as {old} until the database works "
                "again; nothing else is needed.")

    async def _start_process(self, prompt: str = "") -> AgentProcess | None:
        """A new CLI, resuming the session if there is one; None if it cannot be resumed."""
        if self._deps.before_start is not None:
            await self._deps.before_start(self.id)
        await self._set_state(
            AgentState.STARTING, f"resuming session {self.session_id}" if self.session_id else ""
        )
        env = agent_env(self, self._deps)
        if self.session_id and self._deps.session_store is not None:
            why = await bring_back(self._deps.session_store, env, self.cwd, self.session_id,
                                   self._deps.isolation)
            if why is not None:
                await self._resume_failed(why, prompt)
                return None
        proc = AgentProcess(tag=self.tag, options=cli_options(self, self._deps, env),
                            on_end=token_revoker(self, self._deps, env))
        try:
            await proc.start()
        except (ClaudeSDKError, OSError, TimeoutError) as exc:
            await proc.kill(0)
            if self.session_id and NO_SESSION in f"{exc} {proc.stderr_text()}":
                # The CLI has no such session (no transcript on this disk and no bucket, or
                # one it cannot read): the same every time, so not a crash to retry.
                await self._resume_failed(f"the claude CLI found no conversation with session "
                                          f"id {self.session_id}", prompt)
                return None
            raise AgentFailed(None, proc.stderr_text(), f"the claude CLI did not start: {exc}") \
                from exc
        self._proc = proc
        self.session_started_at = self._deps.clock.now()
        self._mirror_warned = False
        self.ttl_warned = False
        return proc

    def _record_pids(self, proc: AgentProcess | None) -> asyncio.Task[None] | None:
        """Store a new process's pids (for /status: nothing else reads them back, a restart
        clears them, and membership is the sandbox or the tag) while the CLI works on its first
        message, instead of before that message is sent. Awaited by `_pids_recorded`."""
        if proc is None:
            return None
        return asyncio.create_task(self._deps.store.agents.update(
            self.id, launcher_pid=proc.launcher_pid, cli_pid=proc.cli_pid),
            name=f"agent-pids-{self.id}")

    async def _pids_recorded(self, task: asyncio.Task[None] | None) -> None:
        if task is None:
            return
        (error,) = await asyncio.gather(task, return_exceptions=True)
        if error is not None:  # the store's trouble shows on the writes that matter
            logger.warning("pids not recorded agent=%s: %s", self.id, error)

    async def _check_idle_process(self) -> None:
        proc = self._proc
        if proc is None or self._stopping or self.busy or proc.alive():
            return
        async with self._lifecycle:
            if self._proc is not proc or self._stopping:
                return
            await self._fail(None, AgentFailed(None, proc.stderr_text(), "the claude CLI exited"))
