"""One turn of an agent, as its runner executes it: the prompt sent with a uuid, the CLI's
messages read and recorded until that turn's own result (a turn the CLI began on its own is
refused on the way: supervisor/guard/unsolicited.py), a passing API error continued in the same
session, the result accounted (cost, budget, the notice), a failure reported. A mixin of
AgentRunner (supervisor/agents/runner.py), which owns the state it reads and changes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast

from claude_agent_sdk import ClaudeSDKError, ResultMessage, SystemMessage

from store.errors import StoreError
from supervisor.agents.api_trouble import ApiTrouble
from supervisor.agents.records import (
    NO_TOOL,
    cost_delta,
    in_switchboard_terms,
    record_of,
    retryable_api_error,
    turn_status,
)
from supervisor.bus.inbox import Inbox, Origin, Taken, quiet_turn
from supervisor.errors import AgentFailed
from supervisor.events import REPLY_NOTICE, AgentOutput, AgentState, StateChanged, TurnFinished
from supervisor.guard.guardrails import day_start
from supervisor.guard.unsolicited import describe as describe_unsolicited
from supervisor.guard.unsolicited import origin_kind, result_is_ours
from supervisor.process.agent import AgentProcess

if TYPE_CHECKING:
    from supervisor.agents.runner import AgentRunner, RunnerDeps

logger = logging.getLogger("supervisor.agents.runner")  # one agent's log, whichever half

# A turn the API failed with a passing error is continued after each of these waits.
API_RETRY_WAITS_S = (0.5, 4.0, 15.0)
API_RETRY_PROMPT = ("[Switchboard] The API failed with a passing error (HTTP {status}) before "
                    "your last step could run. Continue the task from where you were.")


class TurnExecution:
    if TYPE_CHECKING:  # the runner's state this half reads and changes
        id: str
        name: str
        model: str | None
        state: AgentState
        session_id: str | None
        last_error: str | None
        budget_blocked: str | None
        quiet_turns: bool
        graded: str | None
        cwd: str
        turn_started_at: float | None
        first_event_at: float | None
        last_activity_at: float
        current_tool: str | None
        _deps: RunnerDeps
        _proc: AgentProcess | None
        _inbox: Inbox
        _turn_done: asyncio.Event
        _turn_begun: bool
        _interrupt_pending: bool
        _stopping: bool
        _shutting_down: bool
        _quiet_turn: bool
        _operator_turn: bool  # this turn holds a message of the operator's
        _note: str | None
        _baseline: dict[str, float]
        _mirror_warned: bool
        _api_trouble: ApiTrouble
        _budget_day: int
        _unsolicited_told: bool

        async def _set_state(self, new: AgentState, reason: str = "", *,
                             unless_paused: bool = False, remember: bool = False) -> None: ...
        async def _start_process(self, prompt: str = "") -> AgentProcess | None: ...
        def _record_pids(self, proc: AgentProcess | None) -> asyncio.Task[None] | None: ...
        async def _pids_recorded(self, task: asyncio.Task[None] | None) -> None: ...
        async def _interrupt(self, proc: AgentProcess) -> None: ...

    @property
    def in_turn(self) -> bool:
        """A turn someone asked for runs: its prompt is sent and its result not yet read."""
        return self.turn_started_at is not None

    async def refuse_unsolicited(self, kind: str | None, what: str,
                                 detail: dict[str, Any]) -> None:
        """A tool call while no asked-for turn runs: the CLI began a turn on its own. The call
        is refused (by the gate) and the CLI interrupted; the turn's first refusal is audited
        and told, any later one of the same turn recorded."""
        proc = self._proc
        if proc is not None and proc.alive():
            with contextlib.suppress(ClaudeSDKError, OSError):
                await self._interrupt(proc)
        first, self._unsolicited_told = not self._unsolicited_told, True
        await self._record_unsolicited(kind, what, detail, tell=first, outcome=(
            "its tool calls were denied and it was interrupted. Nothing it asked to run ran."))

    async def _unsolicited_result(self, msg: ResultMessage) -> None:
        """The result of a turn the CLI began on its own, read as an asked-for turn begins. It
        is not interrupted (it has ended, and an interrupt now would cut the asked-for turn);
        it is told unless its tool calls were (one with none asked to run nothing)."""
        told, self._unsolicited_told = self._unsolicited_told, False
        await self._record_unsolicited(
            origin_kind(msg.origin), "its result",
            {"result": (msg.result or "")[:500], "cost_usd": msg.total_cost_usd}, tell=not told,
            outcome="it asked to run nothing, and its answer was not taken for any turn's.")

    async def _remember(self, summary: str) -> None:
        """The turn's line in its project's memory (supervisor/repos/memory.py); a memory that
        cannot be written is logged, never a turn's failure."""
        memory = self._deps.memory
        if memory is None:
            return
        try:
            await memory.checkpoint(self.id, self.cwd, self.name, summary)
        except OSError:
            logger.exception("project memory not written agent=%s", self.id)

    async def _record_unsolicited(self, kind: str | None, what: str, detail: dict[str, Any], *,
                                  tell: bool, outcome: str) -> None:
        line = describe_unsolicited(kind, what, detail)
        logger.warning("unsolicited turn refused agent=%s %s", self.id, line[:300])
        with contextlib.suppress(StoreError):
            await self._deps.store.events.append(self.id, None, "unsolicited_turn",
                                                 f"refused a turn nobody asked for ({kind})",
                                                 {"kind": kind, "what": what, **detail})
            if not tell:
                return
            await self._deps.store.audit.record(
                platform="agent", user_id=self.id, user_name=self.name,
                action="unsolicited_turn", args=line, ok=False, result=f"refused: {outcome}")
            await self._deps.escalations.notify(
                self.id, f"{self.name}: a turn nobody asked for was refused",
                f"The CLI began a turn on its own ({kind or 'unknown origin'}); {outcome}")

    async def _turn(self, item: Taken) -> bool:
        """One turn; whether its input was consumed (False: the CLI failed, deliver again)."""
        self._turn_done.clear()
        prompt = item.text
        self._quiet_turn = self.quiet_turns or quiet_turn(item)
        self._operator_turn = Origin.OPERATOR in item.origins
        self._api_trouble.begin()
        turn_id: int | None = None
        pids: asyncio.Task[None] | None = None
        try:
            proc = self._proc
            started = None
            if proc is None or not proc.alive():
                if proc is not None:
                    await proc.kill(0)
                proc = started = await self._start_process(prompt)
                if proc is None:
                    return False  # held: the loop waits for the operator's choice
            turn_id = await self._deps.store.turns.start(
                self.id, prompt, origin=item.origin, message_ids=item.message_ids,
                fence=self._deps.fence(self.id))
            self.turn_started_at = self.last_activity_at = self._deps.clock.now()
            # Paused while the turn was being set up: it is working once resumed.
            await self._set_state(AgentState.WORKING, "", unless_paused=True)
            # After the state: a state change first commits the events before it, and the
            # prompt's row need not hold up the turn (it is queued before the CLI's events).
            await self._log(turn_id, "prompt", prompt[:200], {"prompt": prompt})
            sent = await proc.query(prompt, note=self._note)
            self._note = None
            pids = self._record_pids(started)
            result = await self._retry_api_errors(proc, turn_id,
                                                  await self._result(proc, turn_id, sent))
            await self._finish_turn(turn_id, result)
            return True
        except (ClaudeSDKError, AgentFailed, OSError, StoreError) as exc:
            if self._shutting_down:
                pass  # left running: the pool reports it to the operator (agents/recovery.py)
            elif self._stopping or self._deps.killswitch.halted:
                if turn_id is not None:
                    with contextlib.suppress(StoreError):
                        await self._flush_events()
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
            await self._pids_recorded(pids)
            self.current_tool = None
            self.turn_started_at = None
            self._turn_begun = self._interrupt_pending = False
            self._turn_done.set()

    async def _result(self, proc: AgentProcess, turn_id: int, sent: str) -> ResultMessage:
        """Read the CLI until the result of the turn sent as `sent`; the result of a turn the
        CLI began on its own on the way is refused and recorded
        (supervisor/guard/unsolicited.py)."""
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
            if isinstance(msg, ResultMessage) and not result_is_ours(msg, sent):
                await self._unsolicited_result(msg)
                continue
            await self._record(msg, turn_id)
            if isinstance(msg, ResultMessage):
                result = msg
                break
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
            await self._log(turn_id, "retry", note, {"status": status, "attempt": attempt})
            self._deps.hub.publish(AgentOutput(self.id, self.name, "system", note))
            self._turn_begun = False  # an interrupt meanwhile goes to the continuation
            await self._deps.clock.sleep(wait_s)
            sent = await proc.query(API_RETRY_PROMPT.format(status=status))
            result = await self._result(proc, turn_id, sent)
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
            await self._flush_events()
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
        if isinstance(msg, SystemMessage):
            if msg.subtype == "mirror_error":
                await self._mirror_error(msg)
            elif msg.subtype == "api_retry":
                await self._api_retry(msg)
        rec = record_of(msg)
        deps = self._deps
        now = self.last_activity_at = deps.clock.now()
        if self.first_event_at is None:
            self.first_event_at = now
        if self.state == AgentState.STALLED:
            await self._set_state(AgentState.WORKING, "output again")
        if rec.session_id and rec.session_id != self.session_id:
            self.session_id = rec.session_id
            await self._deps.store.agents.update(self.id, session_id=rec.session_id)
            if deps.session_known is not None:
                deps.session_known(self.id)
        if rec.tool is not None:
            self.current_tool = rec.tool if rec.tool != NO_TOOL else None
        if rec.outputs:
            publish = deps.hub.publish
            for kind, text in rec.outputs:
                publish(AgentOutput(self.id, self.name, kind, text))
        ingest = deps.ingest
        if ingest is not None:  # the hot path: queued, written with its batch
            if ingest.add(self.id, turn_id, rec.kind, rec.summary, rec.data, now):
                # `behind`: the writer lags the fleet: wait, so a crash loses no backlog
                await ingest.room()
        else:
            await self._deps.store.events.append(self.id, turn_id, rec.kind, rec.summary,
                                                 rec.data)

    async def _log(self, turn_id: int | None, kind: str, summary: str,
                   data: dict[str, Any]) -> None:
        ingest = self._deps.ingest
        if ingest is not None:
            ingest.add(self.id, turn_id, kind, summary, data)
        else:
            await self._deps.store.events.append(self.id, turn_id, kind, summary, data)

    async def _flush_events(self) -> None:
        """Before a turn end, a cost, a failure or a state change is written and reported: the
        events that led to it are committed first (supervisor/agents/ingest.py)."""
        if self._deps.ingest is not None:
            await self._deps.ingest.flush()

    async def _api_retry(self, msg: SystemMessage) -> None:
        """The CLI retries a failing model API call: logged each time, told to the operator
        once per turn when it keeps failing (supervisor/agents/api_trouble.py)."""
        data = msg.data
        logger.warning("model API retry agent=%s status=%s attempt=%s", self.id,
                       data.get("error_status"), data.get("attempt"))
        notice = self._api_trouble.retried(self.name, data, self._deps.clock.monotonic())
        if notice is not None:
            await self._deps.escalations.notify(self.id, notice.title, notice.body)

    async def _mirror_error(self, msg: SystemMessage) -> None:
        """The SDK could not copy part of the transcript to the bucket (after its retries; the
        store keeps it and sends it again with the next batch). Logged each time, told to the
        operator once per process."""
        error = str(getattr(msg, "error", "") or msg.data.get("error") or "?")
        logger.warning("transcript mirror failed agent=%s name=%s: %s", self.id, self.name,
                       error)
        if self._mirror_warned:
            return
        self._mirror_warned = True
        await self._deps.escalations.notify(
            self.id, f"{self.name}: its transcript is not fully in the bucket",
            f"Copying its session to the bucket failed: {error[:500]}. The copy on this disk is "
            "whole, and what the bucket refused is kept in memory and sent again with the next "
            "copy; if the supervisor stops before the bucket takes it, a new container resumes "
            "without that part. Check the bucket's permissions and reachability.")

    async def _finish_turn(self, turn_id: int, msg: ResultMessage) -> None:
        status = turn_status(msg)
        ok = status == "ok"
        cost, per_model, self._baseline = cost_delta(self._baseline, msg, self.model)
        usage = msg.usage or {}
        text = msg.result or "; ".join(msg.errors or []) or msg.subtype
        if not ok:
            text = in_switchboard_terms(text)
        if msg.session_id and msg.session_id != self.session_id:
            self.session_id = msg.session_id
        # The notice is written with the turn's end, in one transaction: a crash right after
        # cannot lose it, and the outbox delivers it after a restart.
        graded, self.graded = self.graded, None  # report_result during this turn
        title = f"{self.name} {'finished' if ok else 'ended with an error'}"
        notice = None if self._quiet_turn and ok else await self._deps.escalations.draft_notice(
            self.id, f"{title} · {graded.partition(':')[0]}" if graded else title,
            (f"📊 {graded}\n\n{text}" if graded else text)[:200_000],
            tool_name=REPLY_NOTICE if self._operator_turn else None)
        await self._flush_events()
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
        if notice is not None:
            await self._deps.escalations.published(notice.id)
        if ok and not self._quiet_turn:
            await self._remember(graded or text.strip().split("\n", 1)[0])
        if self.state in (AgentState.WORKING, AgentState.STALLED):
            await self._set_state(AgentState.IDLE, "turn finished" if ok else f"turn ended: {text}")
        # The mixin is only ever an AgentRunner.
        reason = await self._deps.over_budget(cast("AgentRunner", self))
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
