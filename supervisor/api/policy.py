"""The policy's part of the supervisor API (`SupervisorAPI.policy`): rules learned from the
operator's answers (supervisor/guard/learned.py) added when an offered "Always allow" is taken,
listed, and taken back. The policy file is edited in a worker thread and the running policy,
which every agent's gate holds, takes the new rules at once."""

from __future__ import annotations

import asyncio
import logging
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store import Store
from store.escalations import EscalationRow
from supervisor.api.views import Actor
from supervisor.config import Settings
from supervisor.errors import InvalidRequest
from supervisor.guard import learned
from supervisor.guard.describe import summarize_tool
from supervisor.guard.escalations import Kind
from supervisor.guard.policy import Action, Policy, PolicyError
from supervisor.guard.policy_rules import DEFAULT_POLICY

logger = logging.getLogger(__name__)


REPLAY_DAYS = 7.0  # how far back /policy test replays, unless told
REPLAY_CALLS = 20_000  # at most this many recorded assistant messages are replayed


@dataclass(frozen=True, slots=True)
class ChangedCall:
    agent: str
    call: str  # one line: the tool and what it does
    now: str  # allow | ask | deny
    then: str


@dataclass(frozen=True, slots=True)
class PolicyTestView:
    """A candidate policy replayed on the recorded tool calls: what it would have decided
    against what the running policy decides, and every call whose decision changes."""

    source: str
    days: float
    calls: int
    agents: int
    now: dict[str, int]  # action -> count, under the running policy
    then: dict[str, int]  # under the candidate
    changed: tuple[ChangedCall, ...]


@dataclass(frozen=True, slots=True)
class LearnedRuleView:
    id: int
    words: str  # the rule in words
    by: str
    via: str
    at: str
    approvals: int


def _effective(policy: Policy, agent: str, tool: str, tool_input: dict[str, Any],
               cwd: str) -> str:
    """What a policy does with a call: its decision, or allow when a learned rule settles it."""
    decision = policy.decide(agent, tool, tool_input, cwd)
    if policy.learned_rule(agent, tool, tool_input, cwd, decision) is not None:
        return Action.ALLOW.value
    return decision.action.value


def _counts(counter: Counter[str]) -> dict[str, int]:
    return {a.value: counter.get(a.value, 0) for a in Action}


def _view(rule: learned.Learned) -> LearnedRuleView:
    return LearnedRuleView(rule.id, rule.words(), rule.by, rule.via, rule.at, rule.approvals)


class PolicyAPI:
    def __init__(self, settings: Settings, store: Store, policy: Policy) -> None:
        self._settings = settings
        self._store = store
        self._policy = policy

    @property
    def file(self) -> str:
        """The policy file learned rules are written to."""
        return str(self._settings.learned_rules_file)

    def rules(self) -> tuple[LearnedRuleView, ...]:
        """The learned rules of the running policy, oldest first."""
        return tuple(_view(r) for r in self._policy.learned)

    async def learn(self, row: EscalationRow, by: Actor) -> LearnedRuleView:
        """Add the rule a permission request offers (it carries the "Always allow" option),
        for exactly its call. InvalidRequest says why when it offers none."""
        if row.kind != Kind.PERMISSION or learned.ALWAYS not in row.options:
            raise InvalidRequest(f"{row.id} offers no rule: one is offered after the same call "
                                 f"was allowed {learned.OFFER_AFTER} times in a row. Use "
                                 f"/approve {row.id} (once) or /approve {row.id} session")
        if row.status != "open":
            raise InvalidRequest(f"{row.id} is already {row.status}: no rule was added")
        agent = await self._store.agents.get(row.agent_id) if row.agent_id else None
        if agent is None or not row.tool_name:
            raise InvalidRequest(f"{row.id} belongs to no agent Switchboard knows: no rule "
                                 "was added")
        tool_input = row.tool_input or {}
        key = self._policy.session_key(row.tool_name, tool_input)
        decided = await self._store.escalations.decided_calls(row.agent_id or "", row.tool_name)
        approvals = learned.approvals_in_a_row(
            key, [(self._policy.session_key(row.tool_name, inp), d) for inp, d in decided])
        at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        path = self._settings.learned_rules_file
        try:
            rule = await asyncio.to_thread(
                learned.add, path, agent=agent.name, tool=row.tool_name, call=key, by=by.name,
                via=by.platform, at=at, approvals=approvals)
            await self._reload()
        except PolicyError as exc:
            raise InvalidRequest(f"{exc}. {row.id} is still open: /approve {row.id} allows "
                                 "it once") from exc
        logger.info("policy: learned rule %d added by=%s file=%s", rule.id, by.name, path)
        return _view(rule)

    async def remove(self, rule_id: int) -> LearnedRuleView:
        path = self._settings.learned_rules_file
        if not path.exists():
            raise InvalidRequest("there are no learned rules (none was ever added)")
        try:
            gone = await asyncio.to_thread(learned.remove, path, rule_id)
            await self._reload()
        except PolicyError as exc:
            raise InvalidRequest(str(exc)) from exc
        logger.info("policy: learned rule %d removed file=%s", rule_id, path)
        return _view(gone)

    async def test(self, candidate: str, days: float = REPLAY_DAYS) -> PolicyTestView:
        """Replay the tool calls recorded in the last `days` against `candidate`: a policy
        file's path, or one rule as a TOML inline table added to the running policy
        (`{tool = "Bash", command = "npm test", action = "allow"}`)."""
        if not 0 < days <= 366:
            raise InvalidRequest(f"days must be between 0 and 366 (got {days:g})")
        policy, source = await asyncio.to_thread(self._candidate, candidate.strip())
        since = time.time() - days * 86_400
        calls = await self._store.events.tool_calls(since, REPLAY_CALLS)
        now: Counter[str] = Counter()
        then: Counter[str] = Counter()
        changed: list[ChangedCall] = []
        for call in calls:
            before = _effective(self._policy, call.agent, call.tool, call.input, call.cwd)
            after = _effective(policy, call.agent, call.tool, call.input, call.cwd)
            now[before] += 1
            then[after] += 1
            if before != after:
                line = " ".join(summarize_tool(call.tool, call.input).split())
                changed.append(ChangedCall(call.agent, line, before, after))
        return PolicyTestView(source, days, len(calls), len({c.agent for c in calls}),
                              _counts(now), _counts(then), tuple(changed))

    def _candidate(self, text: str) -> tuple[Policy, str]:
        """The policy to test: a file, or the running one with one more rule."""
        if not text:
            raise InvalidRequest("name a policy file, or give one rule as a TOML inline "
                                 "table: {tool = \"Bash\", command = \"npm test\", "
                                 "action = \"allow\"}")
        protected = self._policy.protected
        if text.startswith("{"):
            try:
                rule = tomllib.loads(f"rule = {text}")["rule"]
            except tomllib.TOMLDecodeError as exc:
                raise InvalidRequest(f"the rule is not a TOML inline table ({exc}); for "
                                     "example {tool = \"Bash\", command = \"npm test\", "
                                     "action = \"allow\"}") from exc
            current = self._settings.policy_path or DEFAULT_POLICY
            try:
                data = tomllib.loads(current.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InvalidRequest(f"cannot read the running policy {current}: {exc}") from exc
            rules = data.get("rules", [])
            data["rules"] = [*rules, rule] if isinstance(rules, list) else rules
            source = f"the running policy plus {text}"
            try:
                return Policy.from_dict(data, "your rule", protected=protected), source
            except PolicyError as exc:
                raise InvalidRequest(str(exc).replace(f"rules[{len(data['rules']) - 1}]",
                                                      "rule")) from exc
        path = Path(text).expanduser()
        try:
            return Policy.load(path, protected=protected), str(path)
        except PolicyError as exc:
            raise InvalidRequest(str(exc)) from exc

    async def _reload(self) -> None:
        """The running policy takes the file as it is now (every gate holds this object)."""
        path = self._settings.learned_rules_file
        fresh = await asyncio.to_thread(Policy.load, path, protected=self._policy.protected)
        self._policy.adopt(fresh)


__all__ = ["ChangedCall", "LearnedRuleView", "PolicyAPI", "PolicyTestView"]
