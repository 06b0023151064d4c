"""Results with a confidence grade: agents report a task's outcome with `report_result(summary,
confidence 0-100, evidence)`; the finished-turn notice shows it, one below
`review_below_confidence` is pushed as needing review with its evidence, and `/results` lists
the recent ones, lowest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor.errors import InvalidRequest, SupervisorError
from supervisor.sanitize import clean, clean_text

if TYPE_CHECKING:
    from claude_agent_sdk import SdkMcpTool

    from store import Store
    from store.results import ResultRow
    from supervisor.agents.pool import AgentPool
    from supervisor.agents.runner import AgentRunner
    from supervisor.config import Settings
    from supervisor.guard.escalations import Escalations

SUMMARY_CHARS = 2000
EVIDENCE_CHARS = 20_000
REVIEW_TITLE = "needs review"


@dataclass(frozen=True, slots=True)
class ResultView:
    id: int
    agent_id: str
    agent_name: str
    summary: str
    confidence: int
    evidence: str
    needs_review: bool
    at: float


def _view(row: ResultRow) -> ResultView:
    return ResultView(row.id, row.agent_id, row.agent_name, row.summary, row.confidence,
                      row.evidence, row.needs_review, row.created_at)


def grade_of(value: Any) -> int:
    """A confidence as the agent gave it (a number or its text), as a whole 0-100."""
    if isinstance(value, bool):
        raise InvalidRequest("confidence must be a number from 0 to 100, not true or false")
    try:
        grade = float(str(value).strip().rstrip("%"))
    except ValueError:
        raise InvalidRequest(f"confidence must be a number from 0 to 100, not {value!r}") \
            from None
    if not 0 <= grade <= 100:
        raise InvalidRequest(f"confidence must be from 0 to 100, not {grade:g}")
    return round(grade)


class ResultsAPI:
    """`api.results`: what agents report, for the operator."""

    def __init__(self, pool: AgentPool, settings: Settings, store: Store,
                 escalations: Escalations) -> None:
        self._pool = pool
        self.settings = settings
        self._store = store
        self._escalations = escalations
        pool.tool_makers["results"] = self.tools

    async def report(self, runner: AgentRunner, summary: str, confidence: Any,
                     evidence: str = "") -> ResultView:
        """Record an agent's result; below the threshold, push it as needing review."""
        grade = grade_of(confidence)
        summary = clean(summary).text.strip()[:SUMMARY_CHARS]
        if not summary:
            raise InvalidRequest("summary is empty: say in a sentence what the outcome is")
        evidence = clean(evidence).text.strip()[:EVIDENCE_CHARS]
        review = grade < self.settings.review_below_confidence
        row = await self._store.results.add(
            agent_id=runner.id, agent_name=runner.name, summary=summary, confidence=grade,
            evidence=evidence, needs_review=review)
        runner.graded = f"confidence {grade}%: {summary}"
        if review:
            await self._escalations.notify(
                runner.id, clean_text(f"⚠️ {runner.name}: {REVIEW_TITLE} (confidence {grade}%)"),
                clean_text(f"{summary}\n\nEvidence:\n{evidence or '(none given)'}\n\n"
                           f"Below review_below_confidence "
                           f"({self.settings.review_below_confidence}). /results lists the "
                           f"recent results; /ask {runner.name} … to follow up."))
        return _view(row)

    async def recent(self, ref: str | None = None, n: int = 20) -> tuple[ResultView, ...]:
        """The `n` newest results (of one agent), lowest confidence first."""
        agent_id = (await self._pool.fleet.get(ref)).id if ref else None
        rows = await self._store.results.recent(max(1, min(n, 200)), agent_id=agent_id)
        return tuple(_view(r) for r in rows)

    def tools(self, runner: AgentRunner) -> list[SdkMcpTool[Any]]:
        from claude_agent_sdk import tool  # noqa: PLC0415 - the API loads without the SDK

        async def report_result(args: dict[str, Any]) -> dict[str, Any]:
            try:
                view = await self.report(runner, str(args.get("summary") or ""),
                                         args.get("confidence"),
                                         str(args.get("evidence") or ""))
            except SupervisorError as exc:
                return {"content": [{"type": "text", "text": f"error: {exc.what}"}],
                        "is_error": True}
            pushed = (" It is below the review threshold: the operator was asked to review it."
                      if view.needs_review else "")
            return {"content": [{"type": "text", "text": (
                f"Recorded result {view.id} with confidence {view.confidence}%.{pushed}")}]}

        return [tool(
            "report_result",
            "Report the outcome of your task with how sure you are: `summary` (one or two "
            "sentences), `confidence` 0-100 (100: verified, e.g. tests pass; 50: plausible, "
            "untested; below 30: a guess), `evidence` (what you checked: commands and their "
            "output, files, tests). Low confidence is sent to the operator for review.",
            {"type": "object",
             "properties": {"summary": {"type": "string"},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 100},
                            "evidence": {"type": "string"}},
             "required": ["summary", "confidence"]})(report_result)]




__all__ = ["REVIEW_TITLE", "ResultView", "ResultsAPI", "grade_of"]
