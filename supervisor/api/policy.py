"""The policy's part of the supervisor API (`SupervisorAPI.policy`): rules learned from the
operator's answers (supervisor/guard/learned.py) added when an offered "Always allow" is taken,
listed, and taken back. The policy file is edited in a worker thread and the running policy,
which every agent's gate holds, takes the new rules at once."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from store import Store
from store.escalations import EscalationRow
from supervisor.api.views import Actor
from supervisor.config import Settings
from supervisor.errors import InvalidRequest
from supervisor.guard import learned
from supervisor.guard.escalations import Kind
from supervisor.guard.policy import Policy, PolicyError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LearnedRuleView:
    id: int
    words: str  # the rule in words
    by: str
    via: str
    at: str
    approvals: int


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

    async def _reload(self) -> None:
        """The running policy takes the file as it is now (every gate holds this object)."""
        path = self._settings.learned_rules_file
        fresh = await asyncio.to_thread(Policy.load, path, protected=self._policy.protected)
        self._policy.adopt(fresh)


__all__ = ["LearnedRuleView", "PolicyAPI"]
