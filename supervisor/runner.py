"""One agent: its turn queue, state machine, restarts, cost accounting and event log.

What an SDK message means (the event row, the outputs, a turn's cost) is worked out by the pure
functions in supervisor/records.py; which state changes are legal is supervisor/lifecycle.py's
table; the turn queue is an `Inbox` (supervisor/inbox.py), so the bus can replace it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKError, ResultMessage

from store import Store
from store.agents import AgentRow
from store.errors import StoreError
from supervisor import launcher as launcher_module
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.errors import AgentFailed, AgentNotRunning, InvalidRequest
from supervisor.escalations import Escalations
from supervisor.events import AgentOutput, AgentState, EventHub, StateChanged, TurnFinished
from supervisor.gate import GateDeps, ToolGate
from supervisor.guardrails import CrashTracker, LimitExceeded, day_start
from supervisor.inbox import Inbox, MemoryInbox
from supervisor.lifecycle import check as check_transition
from supervisor.policy import Policy
from supervisor.process import AgentProcess, sweep
from supervisor.records import (
    NO_TOOL,
    cost_delta,
    record_of,
    retryable_api_error,
    summarize_tool,
    turn_status,
)
from supervisor.sandbox import Isolation, agent_dirs, bwrap_args, prepare, sandbox_env

logger = logging.getLogger(__name__)

IDLE_POLL_S = 1.0
# A turn the API failed with a passing error is continued after each of these waits.
API_RETRY_WAITS_S = (0.5, 4.0, 15.0)
API_RETRY_PROMPT = ("[Switchboard] The API failed with a passing error (HTTP {status}) before "
                    "your last step could run. Continue the task from where you were.")
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
    killswitch: Any  # supervisor.killswitch.KillSwitch: check() raises while halted
    crashes: CrashTracker
    over_budget: Callable[[AgentRunner], Awaitable[str | None]]
    isolation: Isolation
    peer_dirs: Callable[[str], tuple[str, ...]] = lambda _agent_id: ()  # others' --cwd
    clock: Clock = SYSTEM_CLOCK
    agent_tools: Callable[[AgentRunner], list[Any]] = lambda _runner: []  # the bus's MCP tools


# Claude Code's own tools that would bypass the supervisor: cross-session messaging, session
# cron, remote triggers, workflows, monitors, worktrees and agent teams. Our MCP tools (bus,
# scheduler, worktrees) replace them. Checked against the real CLI's request in the tests.
NATIVE_TOOLS_DISALLOWED = (
    "SendMessage", "ListAgents", "CronCreate", "CronDelete", "CronList", "ScheduleWakeup",
    "RemoteTrigger", "PushNotification", "Workflow", "Monitor", "EnterWorktree",
    "ExitWorktree", "TeamCreate", "TeamDelete", "SendUserMessage",
)


class AgentRunner:
    def __init__(self, row: AgentRow, deps: RunnerDeps, inbox: Inbox | None = None) -> None:
        self.id = row.id
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

    async def submit(self, text: str) -> int:
        """Queue a message (stored before this returns); it becomes the next turn. Returns
        how many are ahead of it."""
        if self.state == AgentState.KILLED:
            raise AgentNotRunning(self.name, self.state, "message")
        self._deps.killswitch.check()
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
        limit = self._deps.settings.max_prompt_chars
        if len(text) > limit:
            raise InvalidRequest(
                f"the message is {len(text):,} characters; the limit is {limit:,}. "
                "Shorten it or put the long part in a file in the agent's directory."
            )
        if not text.strip():
            raise InvalidRequest("the message is empty")
        ahead = len(self._inbox) + (1 if self.busy else 0)
        await self._inbox.put(text)
        return ahead

    async def run(self) -> None:
        """The agent's loop: one turn at a time, for as long as it is not killed."""
        while self.state != AgentState.KILLED and not self._shutting_down:
            item = await self._inbox.take(IDLE_POLL_S)
            if item is None:
                if self.state != AgentState.KILLED and not self._shutting_down:
                    await self._check_idle_process()
                continue
            if self._shutting_down:  # taken, not run: back to the queue for the next start
                await self._inbox.ack(item, consumed=False)
                break
            await self._not_paused.wait()
            if self.state == AgentState.KILLED:
                break
            if self._deps.killswitch.halted:
                logger.warning("kill switch on: message not delivered agent=%s", self.id)
                await self._inbox.ack(item, consumed=False)  # kept for after the release
                continue
            consumed = False
            try:
                consumed = await self._turn(item.text)
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

    async def recover(self) -> None:
        """After a supervisor restart: no process yet; the session resumes on the next message."""
        if self.state.live and self.state != AgentState.PAUSED:
            await self._set_state(
                AgentState.IDLE, "supervisor restarted; the session resumes on the next message"
            )

    def halting(self) -> None:
        """The kill switch is about to SIGKILL everything: a dying CLI is not a failure."""
        self._stopping = True

    async def mark_killed(self, reason: str) -> None:
        """Bookkeeping after the kill switch SIGKILLed this agent's processes."""
        if self.state == AgentState.KILLED:
            return
        self._stopping = True
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.close(kill=True, timeout_s=2)
        with contextlib.suppress(StoreError):  # the processes are gone whatever the store says
            await self._deps.escalations.cancel_for_agent(self.id, reason)
        await self._set_state_held(AgentState.KILLED, reason)
        self._not_paused.set()
        self._inbox.wake()

    async def close_for_shutdown(self) -> None:
        """Supervisor shutdown: end the process, keep the agent resumable on the next start.
        The loop ends too, even if a cancel meant for it were lost somewhere underneath."""
        self._stopping = True
        self._shutting_down = True
        self._inbox.wake()
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.kill(self._deps.settings.kill_grace_s)

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
            await self._deps.store.agents.set_state(self.id, old, new, reason)
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

    def _sandbox(self, env: dict[str, str]) -> dict[str, str]:
        """Prepare the agent's private directory; the variables that put it in its sandbox."""
        deps = self._deps
        iso = deps.isolation
        if not iso.ok:
            if not deps.settings.allow_unisolated_agents:
                raise AgentFailed(None, "", f"agents are not started unisolated: {iso.problem}")
            return {}
        dirs = agent_dirs(deps.settings, self.id)
        prepare(deps.settings, iso, dirs, Path(self.cwd), env)
        argv = bwrap_args(deps.settings, iso, dirs, Path(self.cwd), env, deps.real_cli,
                          ro_extra=(deps.launcher,),
                          peers=(Path(p) for p in deps.peer_dirs(self.id)))
        return sandbox_env(iso, dirs, argv, Path(self.cwd))

    def _options(self) -> ClaudeAgentOptions:
        settings = self._deps.settings
        env = settings.agent_environment()
        env.update(self._sandbox(env))
        keys = sorted(k for k in env if k not in launcher_module.CONTROL)
        env.update(
            {
                launcher_module.TAG_VAR: self.tag,
                launcher_module.CLI_VAR: str(self._deps.real_cli),
                launcher_module.KEYS_VAR: ",".join(keys),
                launcher_module.PARENT_VAR: str(os.getpid()),
                launcher_module.NICE_VAR: str(settings.agent_nice),
            }
        )
        return ClaudeAgentOptions(
            cwd=self.cwd,
            model=self.model or settings.default_model,
            cli_path=str(self._deps.launcher),
            env=env,
            can_use_tool=self.gate.can_use_tool,
            hooks=self.gate.hooks(),  # type: ignore[arg-type]
            mcp_servers=self.gate.mcp_servers(),
            permission_mode=self.permission_mode,  # type: ignore[arg-type]
            system_prompt={"type": "preset", "preset": "claude_code"},
            resume=self.session_id,
            max_buffer_size=settings.max_line_bytes,
            # Only what Switchboard gives the agent: no user, project or local settings (their
            # hooks would run unchecked), no MCP servers but ours, unless the operator allowed
            # the project's own for this agent (/spawn --project-settings).
            setting_sources=["project"] if self.project_settings else [],
            strict_mcp_config=not self.project_settings,
            disallowed_tools=list(NATIVE_TOOLS_DISALLOWED),
        )

    async def _start_process(self) -> AgentProcess:
        await self._set_state(
            AgentState.STARTING, f"resuming session {self.session_id}" if self.session_id else ""
        )
        proc = AgentProcess(tag=self.tag, options=self._options())
        try:
            await proc.start()
        except (ClaudeSDKError, OSError, TimeoutError) as exc:
            await proc.kill(0)
            raise AgentFailed(None, proc.stderr_text(), f"the claude CLI did not start: {exc}") \
                from exc
        self._proc = proc
        self.session_started_at = self._deps.clock.now()
        self.ttl_warned = False
        await self._deps.store.agents.update(
            self.id, launcher_pid=proc.launcher_pid, cli_pid=proc.cli_pid
        )
        return proc

    async def _check_idle_process(self) -> None:
        proc = self._proc
        if proc is None or self._stopping or self.busy or proc.alive():
            return
        async with self._lifecycle:
            if self._proc is not proc or self._stopping:
                return
            await self._fail(None, AgentFailed(None, proc.stderr_text(), "the claude CLI exited"))

    async def _turn(self, prompt: str) -> bool:
        """One turn; whether its input was consumed (False: the CLI failed, deliver again)."""
        self._turn_done.clear()
        turn_id: int | None = None
        try:
            proc = self._proc
            if proc is None or not proc.alive():
                if proc is not None:
                    await proc.kill(0)
                proc = await self._start_process()
            turn_id = await self._deps.store.turns.start(self.id, prompt)
            await self._deps.store.events.append(self.id, turn_id, "prompt", prompt[:200],
                                                 {"prompt": prompt})
            self.turn_started_at = self.last_activity_at = self._deps.clock.now()
            # Paused while the turn was being set up: it is working once resumed.
            await self._set_state(AgentState.WORKING, "", unless_paused=True)
            await proc.query(prompt)
            result = await self._retry_api_errors(proc, turn_id, await self._result(proc, turn_id))
            await self._finish_turn(turn_id, result)
            return True
        except (ClaudeSDKError, AgentFailed, OSError, StoreError) as exc:
            if self._shutting_down:
                pass  # left running: the pool reports it to the operator (supervisor/recovery)
            elif self._stopping or self._deps.killswitch.halted:
                if turn_id is not None:
                    await self._deps.store.turns.finish(
                        turn_id, status="interrupted",
                        error="the kill switch was triggered" if self._deps.killswitch.halted
                        else "stopped by operator")
            elif turn_id is None and isinstance(exc, StoreError):
                excerpt = prompt if len(prompt) <= 300 else prompt[:300] + "…"
                await self._fail(None, AgentFailed(
                    None, "", f"the message could not be recorded, so it was not run ({exc})."
                    f" It was: {excerpt!r}. Send it again once storage works"))
            else:
                await self._fail(turn_id, exc)
                return False  # the CLI failed: the bus delivers it again (then dead letters)
            return True
        except Exception as exc:  # noqa: BLE001 - an unforeseen error still ends the turn visibly
            logger.exception("turn crashed agent=%s name=%s", self.id, self.name)
            if not self._stopping:
                await self._fail(turn_id, AgentFailed(None, "", f"the turn failed: {exc!r}"))
            return False
        finally:
            self.current_tool = None
            self.turn_started_at = None
            self._turn_begun = self._interrupt_pending = False
            self._turn_done.set()

    async def _result(self, proc: AgentProcess, turn_id: int) -> ResultMessage:
        result: ResultMessage | None = None
        async for msg in proc.responses():
            if not self._turn_begun:
                # The CLI has begun the turn (its first message, the turn's system/init): an
                # interrupt written before this could reach it between turns, where it is a
                # no-op, so one that came early is sent now.
                self._turn_begun = True
                if self._interrupt_pending and not isinstance(msg, ResultMessage):
                    self._interrupt_pending = False
                    await self._interrupt(proc)
            await self._record(msg, turn_id)
            if isinstance(msg, ResultMessage):
                result = msg
        if result is None:
            raise AgentFailed(None, proc.stderr_text(), "the turn ended without a result")
        return result

    async def _retry_api_errors(self, proc: AgentProcess, turn_id: int,
                                result: ResultMessage) -> ResultMessage:
        """A turn the API failed with a passing error (overloaded 529, 500, 502-504, 429),
        once the CLI's own retries are spent, is continued in the same session after a
        wait, a few times, alike for every such status. The session holds what the turn did
        so far, so the follow-up asks the model to go on, not to start again."""
        for attempt, wait_s in enumerate(API_RETRY_WAITS_S, start=1):
            status = retryable_api_error(result)
            if status is None or self._stopping or self._deps.killswitch.halted:
                break
            note = (f"API error {status}; continuing the turn in {wait_s:g}s "
                    f"(retry {attempt} of {len(API_RETRY_WAITS_S)})")
            logger.warning("turn retried agent=%s status=%s attempt=%d", self.id, status,
                           attempt)
            await self._deps.store.events.append(self.id, turn_id, "retry", note,
                                                 {"status": status, "attempt": attempt})
            self._deps.hub.publish(AgentOutput(self.id, self.name, "system", note))
            self._turn_begun = False  # an interrupt meanwhile goes to the continuation
            await self._deps.clock.sleep(wait_s)
            await proc.query(API_RETRY_PROMPT.format(status=status))
            result = await self._result(proc, turn_id)
        return result

    async def _fail(self, turn_id: int | None, exc: BaseException) -> None:
        # Halted: the kill switch's thread SIGKILLed the CLI before the loop could mark this
        # runner halting; the switch does the bookkeeping (mark_killed), not a crash report.
        if self.state == AgentState.KILLED or self._stopping or self._deps.killswitch.halted:
            return
        self._deps.crashes.record(self.id)
        proc, self._proc = self._proc, None
        tail = ""
        code = getattr(exc, "exit_code", None)
        if proc is not None:
            # Let the stderr reader drain: the tail is what tells the operator why.
            for _ in range(40):
                if not proc.alive():
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.1)
            tail = proc.stderr_text()
            await proc.kill(0)
        if isinstance(exc, AgentFailed):
            tail = tail or exc.stderr_tail
            message = str(exc) if not tail or tail in str(exc) else f"{exc}; stderr: {tail}"
        else:
            message = f"the claude process failed (exit code {code}): {exc}"
            if tail:
                message += f"\nstderr tail:\n{tail}"
        self.last_error = message
        logger.warning("agent failed agent=%s name=%s exit_code=%s", self.id, self.name, code)
        title = f"{self.name} failed"
        if self._deps.crashes.in_loop(self.id) is not None:
            title += " again: crash loop, it will not be restarted for now"
        try:
            notice = await self._deps.escalations.draft_notice(self.id, title, message)
            if turn_id is not None:  # the notice goes with the turn's end (see _finish_turn)
                await self._deps.store.turns.finish(turn_id, status="failed", error=message,
                                                    notice=notice)
            await self._deps.store.agents.update(self.id, last_error=message)
            await self._set_state(AgentState.FAILED, message)
        except StoreError:
            # The store takes no writes (the storage guard reports why): the failure is still
            # shown, from memory, and the notice is held in memory until delivered.
            logger.warning("failure not recorded agent=%s", self.id, exc_info=True)
            old, self.state = self.state, AgentState.FAILED
            self._deps.hub.publish(StateChanged(self.id, self.name, old, self.state, message))
            turn_id = None
        if turn_id is None:
            await self._deps.escalations.notify(self.id, title, message)
        else:
            await self._deps.escalations.published(notice.id)

    async def _record(self, msg: Any, turn_id: int) -> None:
        rec = record_of(msg)
        self.last_activity_at = self._deps.clock.now()
        if self.first_event_at is None:
            self.first_event_at = self.last_activity_at
        if self.state == AgentState.STALLED:
            await self._set_state(AgentState.WORKING, "output again")
        if rec.session_id and rec.session_id != self.session_id:
            self.session_id = rec.session_id
            await self._deps.store.agents.update(self.id, session_id=rec.session_id)
        if rec.tool is not None:
            self.current_tool = rec.tool if rec.tool != NO_TOOL else None
        for out in rec.outputs:
            self._deps.hub.publish(AgentOutput(self.id, self.name, out.kind, out.text))
        await self._deps.store.events.append(self.id, turn_id, rec.kind, rec.summary, rec.data)

    async def _finish_turn(self, turn_id: int, msg: ResultMessage) -> None:
        status = turn_status(msg)
        ok = status == "ok"
        cost, per_model, self._baseline = cost_delta(self._baseline, msg, self.model)
        usage = msg.usage or {}
        text = msg.result or "; ".join(msg.errors or []) or msg.subtype
        if msg.session_id and msg.session_id != self.session_id:
            self.session_id = msg.session_id
        # The notice is written with the turn's end, in one transaction: a crash right after
        # cannot lose it, and the outbox delivers it after a restart.
        notice = await self._deps.escalations.draft_notice(
            self.id, f"{self.name} {'finished' if ok else 'ended with an error'}",
            text[:200_000])
        await self._deps.store.turns.finish(
            turn_id,
            notice=notice,
            status=status,
            result_text=text,
            error=None if ok else text,
            session_id=msg.session_id,
            cost_usd=cost,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            model_costs=per_model,
        )
        await self._deps.store.agents.update(
            self.id, cost_baseline=self._baseline, session_id=self.session_id
        )
        self._deps.hub.publish(TurnFinished(self.id, self.name, turn_id, ok, text, cost))
        await self._deps.escalations.published(notice.id)
        if self.state in (AgentState.WORKING, AgentState.STALLED):
            await self._set_state(AgentState.IDLE, "turn finished" if ok else f"turn ended: {text}")
        reason = await self._deps.over_budget(self)
        if reason is not None:
            # Stop after the turn, before the next message can start one.
            proc, self._proc = self._proc, None
            if proc is not None:
                await proc.close(kill=True, timeout_s=self._deps.settings.stop_grace_s)
            self.budget_blocked = reason
            self._budget_day = int(day_start(clock=self._deps.clock))
            # Queued messages would restart it past its budget.
            await self._inbox.drop_all(f"{self.name} is over budget")
            await self._set_state(AgentState.STOPPED, reason)
