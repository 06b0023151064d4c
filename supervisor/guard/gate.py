"""The tool-time gate of one agent: PreToolUse hook and can_use_tool, backed by the policy and
escalations, plus the agent's in-process MCP tools (bound to its identity, no tokens to leak).

The hook sees every tool call (the CLI skips can_use_tool for calls it deems safe, like `echo`),
so it denies what policy denies and turns "ask" into a prompt; can_use_tool decides again
(belt and braces) and escalates to the operator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from claude_agent_sdk import (
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    tool,
)
from claude_agent_sdk.types import (
    HookContext,
    HookInput,
    HookJSONOutput,
    PermissionResult,
    PreToolUseHookInput,
    PreToolUseHookSpecificOutput,
    SyncHookJSONOutput,
    ToolPermissionContext,
)

from store import Store
from supervisor.guard.describe import describe
from supervisor.guard.escalations import Answer, Decision, Escalations, Kind
from supervisor.guard.learned import (
    ALWAYS,
    OFFER_AFTER,
    approvals_in_a_row,
    rule_words,
)
from supervisor.guard.mcp_server import tool_server
from supervisor.guard.policy import Action, Policy
from supervisor.guard.policy import Decision as PolicyDecision
from supervisor.guard.recommend import marked, recommend
from supervisor.guard.reviews import Request
from supervisor.guard.sendback import send_back, turn_scope
from supervisor.guard.unsolicited import REFUSED
from supervisor.guard.unusual import unusual

logger = logging.getLogger(__name__)

MCP_SERVER = "switchboard"
OPERATOR_TOOLS = (f"mcp__{MCP_SERVER}__ask_operator",)
PERMISSION_OPTIONS = ("Allow", "Allow for session", "Deny")
# An irreversible step of a standing agent is asked about every time: no session allowance.
IRREVERSIBLE_OPTIONS = ("Allow", "Deny")


class AgentSide(Protocol):
    """What the gate needs from its runner."""

    id: str
    name: str
    cwd: str
    session_id: str | None

    @property
    def in_turn(self) -> bool: ...

    async def refuse_unsolicited(self, kind: str | None, what: str,
                                 detail: dict[str, Any]) -> None: ...
    async def escalation_started(self) -> None: ...
    async def escalation_finished(self) -> None: ...
    async def pause_for_timeout(self) -> None: ...
    async def resume_after_answer(self) -> None: ...


@dataclass(frozen=True, slots=True)
class GateDeps:
    store: Store
    policy: Policy
    escalations: Escalations
    halted: Callable[[], bool]  # the kill switch: while on, every tool call is denied
    tools: Callable[[], list[Any]] = list  # more MCP tools of this agent (the bus's)


HALTED = "Switchboard's kill switch is on: no tool may run."


def _hook_output(decision: Literal["allow", "deny", "ask"],
                 reason: str = "") -> SyncHookJSONOutput:
    out: PreToolUseHookSpecificOutput = {"hookEventName": "PreToolUse",
                                         "permissionDecision": decision}
    if reason:
        out["permissionDecisionReason"] = reason
    return {"hookSpecificOutput": out}


class ToolGate:
    def __init__(self, agent: AgentSide, deps: GateDeps) -> None:
        self.agent = agent
        self.deps = deps

    # -- SDK wiring ------------------------------------------------------------------------------

    def hooks(self) -> dict[str, list[HookMatcher]]:
        return {"PreToolUse": [HookMatcher(matcher=None, hooks=[self.pre_tool_use], timeout=120)]}

    def mcp_servers(self) -> dict[str, Any]:
        @tool(
            "ask_operator",
            "Ask the human operator a question and wait for the answer. Use it when you need "
            "a decision or information only a human has. Optional `options` become buttons; "
            "the operator may also answer in free text.",
            {
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "the question, self-contained"},
                    "options": {"type": "array", "items": {"type": "string"},
                                "description": "suggested answers (optional)"},
                    "recommended": {"type": "string",
                                    "description": "the answer you recommend (optional): "
                                                   "shown first, so one tap accepts it"},
                    "why": {"type": "string",
                            "description": "why you recommend it, in a sentence (optional)"},
                },
                "required": ["question"],
            },
        )
        async def ask_operator(args: dict[str, Any]) -> dict[str, Any]:
            question = str(args.get("question") or "").strip()
            if not question:
                return {"content": [{"type": "text", "text": "error: question is empty"}],
                        "is_error": True}
            options = tuple(str(o) for o in (args.get("options") or [])[:10])
            back = await self._send_back(question)
            if back is not None:
                return {"content": [{"type": "text", "text": back}]}
            options, line = recommend(options, str(args.get("recommended") or ""),
                                      str(args.get("why") or ""))
            answer = await self._escalate(
                Kind.QUESTION, f"{self.agent.name} asks",
                "\n\n".join(p for p in (line, question) if p), None, None, options, True,
                review=question,
            )
            return {"content": [{"type": "text", "text": answer.to_agent()}]}

        # Not the SDK's create_sdk_mcp_server: it checks the schema itself at every call
        # (supervisor/guard/mcp_server.py).
        return {MCP_SERVER: tool_server(MCP_SERVER, [ask_operator, *self.deps.tools()])}

    # -- callbacks -------------------------------------------------------------------------------

    async def pre_tool_use(self, hook_input: HookInput, tool_use_id: str | None,
                           context: HookContext) -> HookJSONOutput:
        # hooks() registers this for PreToolUse only, so that is the input it gets.
        pre = cast(PreToolUseHookInput, hook_input)
        name = str(pre.get("tool_name", ""))
        tool_input = pre.get("tool_input") or {}
        if self.deps.halted():
            return _hook_output("deny", HALTED)
        if not self.agent.in_turn:
            return _hook_output("deny", await self._unsolicited(name, tool_input))
        decision, irreversible = self._decide(name, tool_input)
        if decision.action == Action.DENY:
            await self._blocked(name, tool_input, decision.reason, decision.rule)
            return _hook_output("deny", f"Blocked by Switchboard policy: {decision.reason}")
        if decision.action == Action.ALLOW:
            return _hook_output("allow")
        if name in ("AskUserQuestion", "ExitPlanMode"):
            return _hook_output("ask", "needs the operator")
        if await self._learned(name, tool_input, decision, irreversible):
            return _hook_output("allow")
        if not irreversible and await self._session_allowed(name, tool_input):
            return _hook_output("allow")
        return _hook_output("ask", decision.reason)

    async def can_use_tool(self, name: str, tool_input: dict[str, Any],
                           ctx: ToolPermissionContext) -> PermissionResult:
        if self.deps.halted():
            return PermissionResultDeny(message=HALTED, interrupt=True)
        if not self.agent.in_turn:
            return PermissionResultDeny(message=await self._unsolicited(name, tool_input),
                                        interrupt=True)
        decision, irreversible = self._decide(name, tool_input)
        if decision.action == Action.DENY:
            await self._blocked(name, tool_input, decision.reason, decision.rule)
            return PermissionResultDeny(message=f"Blocked by Switchboard policy: "
                                                f"{decision.reason}")
        if name == "AskUserQuestion":
            return await self._ask_user_question(tool_input)
        if name == "ExitPlanMode":
            return await self._exit_plan_mode(tool_input)
        if decision.action == Action.ALLOW or (
                not irreversible and await self._session_allowed(name, tool_input)) or (
                await self._learned(name, tool_input, decision, irreversible)):
            return PermissionResultAllow(updated_input=tool_input)
        # The body is short, the reason first so that no preview can push it out of sight;
        # the call itself goes whole into detail, which chats preview and send as a file.
        call = describe(name, tool_input)
        options = IRREVERSIBLE_OPTIONS if irreversible else PERMISSION_OPTIONS
        offer = await self._rule_offer(name, tool_input, decision, irreversible)
        if offer:
            options = (*options, ALWAYS)
        odd = unusual(name, tool_input, self.agent.cwd)
        body = "\n\n".join(p for p in (f"Why asked: {decision.reason}", odd, call.summary,
                                        offer) if p)
        answer = await self._escalate(
            Kind.PERMISSION, f"{self.agent.name} wants to use {name}", body,
            name, tool_input, options, False, detail=call.text, detail_name=call.filename,
            review=None if irreversible or odd else (  # the unusual: to a human
                f"{name}: {call.text}" if name == "Bash" else call.summary),
        )
        if answer.decision in (Decision.ALLOW, Decision.ALLOW_SESSION):
            if answer.decision == Decision.ALLOW_SESSION and not irreversible:
                await self.deps.store.escalations.allow_for_session(
                    self.agent.id, self.agent.session_id,
                    self.deps.policy.session_key(name, tool_input), name, answer.by,
                )
            return PermissionResultAllow(updated_input=tool_input)
        reason = answer.text or "no reason given"
        who = answer.by.capitalize() if answer.via == "reviewer" else "The operator"
        return PermissionResultDeny(message=f"{who} denied this: {reason}")

    async def _unsolicited(self, name: str, tool_input: dict[str, Any]) -> str:
        """A tool call while no turn anybody asked for runs: the CLI began one on its own."""
        await self.agent.refuse_unsolicited(None, f"a {name} call",
                                            {"tool_name": name, "input": tool_input})
        return REFUSED.format(kind="no turn was asked for")

    # -- escalation kinds ------------------------------------------------------------------------

    def _decide(self, name: str, tool_input: dict[str, Any]) -> tuple[PolicyDecision, bool]:
        """The policy's decision, and whether it is an irreversible step of a standing agent
        (then it asks whatever the rules allow, and no session allowance covers it)."""
        decision = self.deps.policy.decide(self.agent.name, name, tool_input, self.agent.cwd)
        if decision.action == Action.DENY or getattr(self.agent, "charter", None) is None:
            return decision, False
        held = self.deps.policy.irreversible(name, tool_input, self.agent.cwd)
        return (held, True) if held is not None else (decision, False)

    async def _send_back(self, question: str) -> str | None:
        """A standing agent's question its charter decides: the text that sends it back."""
        return await send_back(self.deps.store, self.deps.escalations.clock.now(),
                               self.agent.id, getattr(self.agent, "charter", None), question,
                               turn_scope(self.agent))

    async def _ask_user_question(self, tool_input: dict[str, Any]) -> PermissionResult:
        answers: dict[str, str] = {}
        texts = [str(q.get("question") or "") for q in tool_input.get("questions") or []
                 if isinstance(q, dict)]
        backs = [b for t in texts if (b := await self._send_back(t)) is not None]
        if backs:  # not asked at all: the agent decides, and asks again only what is left
            return PermissionResultDeny(message="\n".join(backs))
        for q in tool_input.get("questions") or []:
            if not isinstance(q, dict):
                continue
            text = str(q.get("question") or "")
            labels = tuple(str(o.get("label", o)) if isinstance(o, dict) else str(o)
                           for o in q.get("options") or [])
            labels, line = recommend(labels, marked(labels))
            answer = await self._escalate(Kind.QUESTION, f"{self.agent.name} asks",
                                          "\n\n".join(p for p in (line, text) if p),
                                          "AskUserQuestion", tool_input, labels, True,
                                          review=text)
            if answer.decision == Decision.DENY:
                who = answer.by.capitalize() if answer.via == "reviewer" else "The operator"
                return PermissionResultDeny(
                    message=f"{who} did not answer: {answer.text or 'declined'}")
            answers[text] = answer.text
        return PermissionResultAllow(updated_input={**tool_input, "answers": answers})

    async def _exit_plan_mode(self, tool_input: dict[str, Any]) -> PermissionResult:
        plan = str(tool_input.get("plan") or "")
        if plan:
            body = "Approving the plan lets the agent start making changes."
        else:  # Recent CLIs keep the plan in a file and send ExitPlanMode with no input.
            body = ("The agent wants to leave plan mode and start making changes. Its plan was "
                    f"not sent with the request: /logs {self.agent.name} shows what it said.")
        answer = await self._escalate(
            Kind.PLAN, f"{self.agent.name} has a plan", body, "ExitPlanMode", tool_input,
            ("Approve plan", "Keep planning"), True,
            detail=plan or None, detail_name="plan.md" if plan else None,
        )
        if answer.decision in (Decision.ALLOW, Decision.ALLOW_SESSION) or (
            answer.decision == Decision.ANSWER and answer.text == "Approve plan"
        ):
            return PermissionResultAllow(updated_input=tool_input)
        return PermissionResultDeny(message=f"The operator wants more planning: "
                                            f"{answer.text or 'keep planning'}")

    async def _escalate(self, kind: Kind, title: str, body: str, tool_name: str | None,
                        tool_input: dict[str, Any] | None, options: tuple[str, ...],
                        free_text: bool, *, detail: str | None = None,
                        detail_name: str | None = None, review: str | None = None) -> Answer:
        """Ask the operator; first a reviewer agent when `review` (the request's whole
        text) is given and one covers it (supervisor/guard/reviews.py)."""
        esc = self.deps.escalations
        if review is not None and esc.desk is not None:
            outcome = await esc.desk.settle(Request(
                self.agent.id, self.agent.name, kind, title, body, review, detail, tool_name,
                self.deps.policy.session_key(tool_name, tool_input or {})
                if tool_name and kind == Kind.PERMISSION else None,
                self.agent.session_id, options))
            if outcome.answer is not None:
                return outcome.answer
            body = "\n\n".join(p for p in (outcome.note, body) if p)
        row = await esc.open(agent_id=self.agent.id, kind=kind, title=title, body=body,
                             tool_name=tool_name, tool_input=tool_input, options=options,
                             free_text=free_text, detail=detail, detail_name=detail_name)
        await self.agent.escalation_started()
        try:
            return await esc.wait(row, on_pause=self.agent.pause_for_timeout,
                                  on_resume=self.agent.resume_after_answer)
        except asyncio.CancelledError:
            # The turn was interrupted while waiting: the question is moot.
            await asyncio.shield(esc.cancel_one(row.id, "the agent's turn was interrupted"))
            raise
        finally:
            await self.agent.escalation_finished()

    async def _learned(self, name: str, tool_input: dict[str, Any], decision: PolicyDecision,
                       irreversible: bool) -> bool:
        """A rule learned from the operator's answers allows exactly this call (recorded)."""
        rule = self.deps.policy.learned_rule(self.agent.name, name, tool_input, self.agent.cwd,
                                             decision, irreversible)
        if rule is None:
            return False
        await self.deps.store.events.append(
            self.agent.id, None, "learned_allow", f"{name} allowed by learned rule {rule.id}",
            {"tool_name": name, "input": tool_input, "rule": rule.id, "added_by": rule.by})
        return True

    async def _rule_offer(self, name: str, tool_input: dict[str, Any], decision: PolicyDecision,
                          irreversible: bool) -> str:
        """After the operator allowed this same call OFFER_AFTER times in a row: the line that
        offers to always allow it, with the rule in words; else "". Never for a call a rule
        asks about or denies, a built-in check, or a standing agent's irreversible step."""
        policy = self.deps.policy
        if not policy.learnable(self.agent.name, name, tool_input, self.agent.cwd, decision,
                                irreversible):
            return ""
        key = policy.session_key(name, tool_input)
        decided = await self.deps.store.escalations.decided_calls(self.agent.id, name)
        times = approvals_in_a_row(key, [(policy.session_key(name, inp), d)
                                         for inp, d in decided])
        if times < OFFER_AFTER:
            return ""
        return (f"Allowed {times} times in a row. ♾ {ALWAYS} adds a rule to the policy file: "
                f"{rule_words(self.agent.name, name, key)}.")

    async def _session_allowed(self, name: str, tool_input: dict[str, Any]) -> bool:
        key = self.deps.policy.session_key(name, tool_input)
        return await self.deps.store.escalations.session_allowed(
            self.agent.id, self.agent.session_id, key)

    async def _blocked(self, name: str, tool_input: dict[str, Any], reason: str,
                       rule: str) -> None:
        call = describe(name, tool_input)
        await self.deps.store.events.append(
            self.agent.id, None, "policy_denied", f"{name} blocked: {reason}",
            {"tool_name": name, "input": tool_input, "rule": rule, "reason": reason},
        )
        await self.deps.escalations.notify(
            self.agent.id, f"{self.agent.name}: blocked by policy",
            "\n\n".join(p for p in (reason, call.summary) if p),
            detail=call.text, detail_name=call.filename)


