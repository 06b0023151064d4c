"""The supervisor API's part for reviewer agents (docs/reviewers.md): it wires the review desk
(supervisor/guard/reviews.py) to the fleet and the bus, gives reviewers their `review_decision`
tool, and lets the operator list reviewers' decisions (`/reviews`) and overturn one
(`/overturn`). Exposed as `SupervisorAPI.reviews`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from store.errors import StoreError
from supervisor.errors import InvalidRequest, StoreFailed, SupervisorError
from supervisor.events import AgentState
from supervisor.guard.reviews import (
    REVIEW_NOTICE,
    ReviewDesk,
    Reviewer,
    is_reviewer,
    reviewer_label,
)
from supervisor.sanitize import clean_text

if TYPE_CHECKING:
    from claude_agent_sdk import SdkMcpTool

    from store import Store
    from store.reviews import ReviewRow
    from supervisor.agents.pool import AgentPool
    from supervisor.agents.runner import AgentRunner
    from supervisor.api.views import Actor
    from supervisor.schedule.standing import StandingAgents

WAKE_BY = "reviews"
# A reviewer's own state in which it cannot take a review: it would only time out (waiting:
# its own request is open, so no turn of its can start until the operator answers).
_UNAVAILABLE = (AgentState.PAUSED, AgentState.WAITING, AgentState.STOPPED, AgentState.FAILED,
                AgentState.KILLED)


@dataclass(frozen=True, slots=True)
class ReviewView:
    id: str
    agent_name: str
    reviewer_name: str
    kind: str
    summary: str
    status: str  # open | allow | allow_session | deny | answer | handed_over | cancelled
    answer: str
    reasoning: str
    at: float
    overturned_by: str | None


@dataclass(frozen=True, slots=True)
class Overturned:
    review: ReviewView
    done: str  # what overturning did, in a sentence or two


def _view(row: ReviewRow) -> ReviewView:
    return ReviewView(row.id, row.agent_name, row.reviewer_name, row.kind, row.summary,
                      row.status, row.answer, row.reasoning, row.created_at, row.overturned_by)


class ReviewsAPI:
    def __init__(self, pool: AgentPool, standing: StandingAgents, store: Store) -> None:
        self._pool = pool
        self._standing = standing
        self._store = store
        self.desk = ReviewDesk(store, pool.escalations, pool.clock, reviewers=self._reviewers,
                               deliver=self._deliver,
                               timeout_s=pool.settings.review_timeout_s)
        pool.escalations.desk = self.desk
        pool.tool_makers["reviews"] = self.tools

    def _reviewers(self) -> list[Reviewer]:
        """Live agents whose charter has a Reviews section, oldest first."""
        runners = sorted(self._pool.fleet.live(), key=lambda r: r.created_at)
        return [Reviewer(r.id, r.name, r.charter or "") for r in runners
                if is_reviewer(r.charter) and r.state not in _UNAVAILABLE]

    async def _deliver(self, reviewer_id: str, review_id: str, text: str) -> None:
        await self._standing.wake(reviewer_id, text, by=WAKE_BY,
                                  dedup_key=f"review:{review_id}")

    async def recent(self, n: int = 20) -> tuple[ReviewView, ...]:
        """The newest requests offered to reviewers, newest first."""
        try:
            rows = await self._store.reviews.recent(max(1, min(n, 200)))
        except StoreError as exc:
            raise StoreFailed(exc) from exc
        return tuple(_view(r) for r in rows)

    async def overturn(self, review_id: str, *, by: Actor, text: str = "") -> Overturned:
        """The operator overrules a reviewer. An open review comes to the operator at once;
        an allowed call already ran (it cannot be unrun): a session allowance the reviewer
        granted is revoked and the agent told; a denied call is allowed for the rest of the
        agent's session and the agent told to run it again; a question's answer is replaced
        by `text`, which the agent gets."""
        review_id, text = review_id.strip(), clean_text(text).strip()
        try:
            row = await self._store.reviews.get(review_id)
            if row is None:
                raise InvalidRequest(f"no review {review_id!r}: /reviews lists them")
            if row.status == "open":
                if not await self.desk.take(review_id):
                    raise InvalidRequest(f"review {review_id} was settled meanwhile: "
                                         f"/reviews shows how")
                return Overturned(_view(row), f"Taken from {row.reviewer_name}: the request "
                                              "comes to you now as a card.")
            if row.overturned_by:
                raise InvalidRequest(f"review {review_id} was overturned already by "
                                     f"{row.overturned_by}")
            if row.status not in ("allow", "allow_session", "deny", "answer"):
                raise InvalidRequest(f"review {review_id} was not decided by "
                                     f"{row.reviewer_name} ({row.status}): nothing to overturn")
            if row.kind == "question" and not text:
                raise InvalidRequest(f"give your answer: /overturn {review_id} <answer>; the "
                                     f"agent gets it instead of {row.reviewer_name}'s")
            done, message = await self._undo(row, by, text)
            if not await self._store.reviews.overturn(review_id, by=by.name):
                raise InvalidRequest(f"review {review_id} was overturned meanwhile")
        except StoreError as exc:
            raise StoreFailed(exc) from exc
        try:
            await self._standing.wake(row.agent_id, message, by="overturn",
                                      dedup_key=f"overturn:{review_id}")
            told = f" {row.agent_name} was told."
        except SupervisorError as exc:
            told = f" {row.agent_name} could not be told: {exc.what}."
        return Overturned(_view(row), done + told)

    async def _undo(self, row: ReviewRow, by: Actor, text: str) -> tuple[str, str]:
        """What overturning does to the agent's side: (the operator's sentence, the agent's
        message)."""
        who = f"The operator ({by.name}) overturned reviewer {row.reviewer_name}"
        call = row.summary.splitlines()[0][:300] if row.summary else row.title
        if row.kind == "question":
            return ("Your answer goes to the agent as a message.",
                    f"[Switchboard] {who}'s answer to your question \"{row.summary[:300]}\" "
                    f"(review {row.id}). The operator's answer: {text}")
        if row.status == "deny":
            if row.session_key:
                await self._store.escalations.allow_for_session(
                    row.agent_id, row.session_id, row.session_key, row.tool_name or "",
                    by.name)
            return (f"The call is allowed for the rest of {row.agent_name}'s session.",
                    f"[Switchboard] {who}'s denial of your call (review {row.id}): `{call}` "
                    f"is allowed now. Run it again if you still need it.")
        revoked = 0
        if row.status == "allow_session" and row.session_key:
            revoked = await self._store.reviews.revoke_session(
                row.agent_id, row.session_key, reviewer_label(row.reviewer_name))
        taken = " The session allowance it granted is revoked." if revoked else ""
        return (f"The call already ran: it cannot be unrun.{taken}",
                f"[Switchboard] {who}'s approval of your call (review {row.id}): `{call}`. "
                f"Do not run it again without asking, and undo what it did if you can.")

    def tools(self, runner: AgentRunner) -> list[SdkMcpTool[Any]]:
        """review_decision, for reviewer agents only."""
        if not is_reviewer(runner.charter):
            return []
        from claude_agent_sdk import tool  # noqa: PLC0415 - the API loads without the SDK

        async def review_decision(args: dict[str, Any]) -> dict[str, Any]:
            try:
                said = await self.desk.decide(
                    runner.id, str(args.get("review_id") or ""), str(args.get("decision") or ""),
                    clean_text(str(args.get("reasoning") or "")),
                    clean_text(str(args.get("answer") or "")))
            except SupervisorError as exc:
                return {"content": [{"type": "text", "text": f"error: {exc.what}"}],
                        "is_error": True}
            return {"content": [{"type": "text", "text": said}]}

        return [tool(
            "review_decision",
            "Settle a review request another agent's call or question sent you, within your "
            "charter's Reviews section: `review_id` from the request, `decision` (a permission: "
            "allow, allow_session, deny or escalate; a question: answer, deny or escalate), "
            "`reasoning` (one sentence, the operator reads it), `answer` (a question's answer).",
            {"type": "object",
             "properties": {"review_id": {"type": "string"},
                            "decision": {"type": "string",
                                         "enum": ["allow", "allow_session", "deny", "answer",
                                                  "escalate"]},
                            "reasoning": {"type": "string"},
                            "answer": {"type": "string"}},
             "required": ["review_id", "decision", "reasoning"]})(review_decision)]


__all__ = ["REVIEW_NOTICE", "Overturned", "ReviewView", "ReviewsAPI"]
