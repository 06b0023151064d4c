"""Turns the supervisor left running when it died or shut down: reported, re-run only on ask.

A turn that was running when the supervisor went away (SIGKILL, a crash, a shutdown that
outlasted the drain) may have done part of its work: edited files, run commands, spent money.
Running it again behind the operator's back is not safe, so it is never replayed on its own.
Each one is marked interrupted and, in the same transaction, reported to the operator as a
question that survives restarts, with two options: run it again (the same prompt becomes the
agent's next turn) or leave it. One tap on a chat button; `/answer <id> 1` on the console.
A turn that held only other agents' bus messages is reported as a plain notice instead: the
bus delivers those again after the restart by itself, so there is nothing to decide.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from store import Store
from store.bus import OPEN_STATES, RESTART_REASON, redelivered_after_restart
from store.escalations import EscalationRow
from store.turns import TurnRow
from supervisor.bus.core import OPERATOR
from supervisor.errors import SupervisorError
from supervisor.guard.escalations import Answer, Escalations, Timeouts

if TYPE_CHECKING:
    from supervisor.agents.runner import AgentRunner

# The pool's ask: (agent ref, text) -> the runner and its queue position.
Ask = Callable[[str, str], Awaitable["tuple[AgentRunner, int]"]]

logger = logging.getLogger(__name__)

RERUN_TOOL = "switchboard:rerun"
RERUN = "Run it again"
LEAVE = "Leave it"
# No reminder; after a day unanswered it closes as "leave it".
ASK_TIMEOUTS = Timeouts(reminder_s=float("inf"), timeout_s=24 * 3600.0, on_timeout="deny")
EXCERPT_CHARS = 300


async def report_interrupted(store: Store, escalations: Escalations, names: dict[str, str],
                             reason: str, *, agent_ids: set[str] | None = None) -> int:
    """Mark every turn still running as interrupted (of `agent_ids` only, when given: the
    agents this worker owns), each with its question (or, when what it held is redelivered
    anyway, its notice). Returns how many were reported."""
    reported = 0
    for turn in await store.turns.running():
        if agent_ids is not None and turn.agent_id not in agent_ids:
            continue  # another worker's agent, running there
        name = names.get(turn.agent_id, turn.agent_id)
        excerpt = turn.prompt if len(turn.prompt) <= EXCERPT_CHARS else \
            turn.prompt[:EXCERPT_CHARS] + "…"
        if await redelivered(store, turn):
            # Nothing to decide: what it held reaches the agent again by itself.
            draft = await escalations.draft_notice(
                turn.agent_id, f"{name}: a turn was interrupted ({reason})",
                "It held only other agents' messages; they are delivered to it again, so "
                "there is nothing to run again.")
        else:
            draft = await escalations.draft_question(
                turn.agent_id, f"{name}: a turn was interrupted ({reason})",
                f"It was running: {excerpt}\nIt is not run again by itself: it may have done "
                f"part of its work. Run it again, or leave it?",
                options=(RERUN, LEAVE), tool_name=RERUN_TOOL, tool_input={"turn_id": turn.id},
                detail=turn.prompt, detail_name="prompt.txt", timeouts=ASK_TIMEOUTS)
        if await store.turns.interrupt(turn.id, reason, report=draft):
            await escalations.published(draft.id)
            reported += 1
            logger.warning("interrupted turn reported turn=%d agent=%s esc=%s", turn.id,
                           turn.agent_id, draft.id)
    return reported


async def redelivered(store: Store, turn: TurnRow) -> bool:
    """Whether everything the cut turn held is delivered to its agent again without anyone
    asking (decided from the turn's record and the deliveries, never from its prompt): it held
    at least one bus message, each one the restart redelivers (another agent's, not the
    operator's nor the scheduler's), and each one's delivery to this agent is still open, so
    the bus hands it over again. A turn with no recorded message (a first prompt, a turn from
    before turns recorded them) is not."""
    ids = await store.turns.message_ids(turn.id)
    if not ids:
        return False
    for message_id in ids:
        message = await store.bus.message(message_id)
        if message is None or not redelivered_after_restart(message):
            return False
        if not any(d.recipient_id == turn.agent_id and d.state in OPEN_STATES
                   for d in await store.bus.deliveries(message_id)):
            return False
    return True


def answer_hook(store: Store, escalations: Escalations, ask: Ask) -> Any:
    """What the operator's answer does: RERUN queues the same prompt as the agent's next
    turn (through `ask`, the pool's, with its usual checks); a refusal is reported as a
    notice."""

    async def act(row: EscalationRow, answer: Answer) -> None:
        if answer.text != RERUN:
            return
        turn_id = int((row.tool_input or {}).get("turn_id", 0))
        turn = await store.turns.get(turn_id)
        if turn is None or row.agent_id is None:
            return
        texts = await rerun_texts(store, row.agent_id, turn)
        if not texts:
            await escalations.notify(
                row.agent_id, f"Nothing to run again: {row.title}",
                "That turn held only other agents' messages, and those are delivered to it "
                "again anyway.", ref_id=row.id)
            return
        try:
            for text in texts:
                runner, _ = await ask(row.agent_id, text)
        except SupervisorError as exc:
            await escalations.notify(row.agent_id, f"Not run again: {row.title}",
                                          f"{exc}", ref_id=row.id)
            return
        await escalations.notify(runner.id, f"{runner.name}: the interrupted turn runs "
                                      "again", f"Asked by {answer.by}.", ref_id=row.id)

    return act


async def rerun_texts(store: Store, agent_id: str, turn: TurnRow) -> list[str]:
    """What "Run it again" sends: the operator's own messages the turn held (its record names
    them, as data), each again, in order; the agents' messages it held were delivered again
    at the restart, and re-sending the rendered turn would wrap them a second time. Only a
    message the restart took from this agent counts. A turn with no recorded message (from
    before turns recorded them): its prompt."""
    ids = await store.turns.message_ids(turn.id)
    if not ids:
        return [turn.prompt]
    texts: list[str] = []
    for message_id in ids:
        message = await store.bus.message(message_id)
        if message is None or message.sender != OPERATOR:
            continue
        if any(d.recipient_id == agent_id and d.reason == RESTART_REASON
               for d in await store.bus.deliveries(message.id)):
            texts.append(message.body)
    return texts
