"""A standing agent's question to the operator that its charter already decides goes back to
the agent, once per turn, instead of interrupting the operator (supervisor/guard/charter.py judges;
this records the send-back and says it). Used by the gate's ask_operator tool and by the bus's
questions to the operator alike."""

from __future__ import annotations

import logging

from store import Store
from supervisor.guard.charter import judge, question_key, send_back_text

logger = logging.getLogger(__name__)


async def send_back(store: Store, now: float, agent_id: str, charter: str | None,
                    question: str, scope: str = "") -> str | None:
    """A standing agent's question to the operator: the text to send back to it instead
    ("decide this within your charter: ..."), or None to let it reach the operator. A
    question goes back at most once per `scope` (the turn; recorded in the store), so asked
    again in that turn it reaches the operator; one the charter says to ask, or no charter
    line covers, goes through at once."""
    if not charter or not question.strip():
        return None
    verdict = judge(question, charter)
    if not verdict.send_back:
        logger.info("standing question to the operator agent=%s why=%s", agent_id, verdict.why)
        return None
    if not await store.charters.claim_sendback(agent_id, question_key(question, scope),
                                               question, verdict.lines, now=now):
        logger.info("standing question asked again, to the operator agent=%s", agent_id)
        return None
    text = send_back_text(verdict.lines)
    await store.events.append(agent_id, None, "charter_send_back",
                              f"sent back to its charter: {question[:200]}",
                              {"question": question, "lines": list(verdict.lines)})
    return text


def turn_scope(agent: object) -> str:
    """What "once" means for a send-back: once per question in one turn (a later wake may
    meet the same question and is sent back again; within the turn, the second ask goes up)."""
    started = getattr(agent, "turn_started_at", None)
    return "" if started is None else repr(started)
