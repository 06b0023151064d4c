"""Who is talking: caller lookup with roles, the one-time refusal of strangers and its audit
rows, invite redemption, admins seeded from the settings, and the chats of each role."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from bot.kit.ports import AuditEntry, ChatAdapter, ChatId, FleetPort, Operator, Sender
from commands.base import Caller, Reply, Role
from commands.operators import redact_codes
from supervisor.redact import MASK

logger = logging.getLogger(__name__)
INVITE_ARGS = f"/start {MASK}"  # what the audit row says of a redemption: never the code

STRANGER_TEXT = ("Sorry, this is a private Switchboard bot. If you should have access, ask its "
                 "admin for an invite code, then send /start <code>.")
NOT_AN_OPERATOR = "You are not an operator of this Switchboard."
BAD_INVITE = Reply.error("That invite code is not valid: it is mistyped, expired or already used.",
                         "Ask an admin for a new one (/invite).")


class Access:
    def __init__(self, adapter: ChatAdapter, fleet: FleetPort) -> None:
        self.adapter = adapter
        self.fleet = fleet
        self.platform = adapter.platform
        self._refused: set[str] = set()  # strangers already told, this run

    def caller_of(self, operator: Operator, name: str) -> Caller:
        return Caller(f"{self.platform}:{operator.user_id}", name, operator.role, self.platform)

    async def caller(self, sender: Sender) -> Caller | None:
        """The operator behind `sender`, their stored name kept up to date; None: a stranger."""
        row = await self.fleet.operator(self.platform, sender.user_id)
        if row is None:
            return None
        if sender.name and row.name != sender.name:
            await self.fleet.save_operator(Operator(row.platform, row.user_id, sender.name,
                                                    row.role, row.added_by))
        return self.caller_of(row, sender.name or row.name or sender.user_id)

    async def audit(self, sender: Sender, action: str, args: str, ok: bool, result: str) -> None:
        await self.fleet.audit(AuditEntry(self.platform, sender.user_id, sender.name, action,
                                          args, ok, result))

    async def seed_admins(self, user_ids: Iterable[str]) -> None:
        """Admins named in the settings, added once (a role changed since is left alone)."""
        for uid in user_ids:
            if await self.fleet.operator(self.platform, uid) is None:
                await self.fleet.save_operator(Operator(self.platform, uid, "", Role.ADMIN,
                                                        "config"))

    async def chats(self, min_role: Role) -> list[ChatId]:
        rows = await self.fleet.operators(self.platform)
        # Once each: on a platform whose operators share one channel, that channel.
        chats = [await self.adapter.direct_chat(r.user_id) for r in rows if r.role >= min_role]
        return list(dict.fromkeys(chats))

    async def redeem(self, sender: Sender, code: str) -> Caller | None:
        """An invite code sent by a stranger: they join with its role, or are told it is not
        valid. Both are audited; the code itself is not."""
        role = await self.fleet.redeem_invite(code, f"{self.platform}:{sender.user_id}")
        if role is None:
            await self.audit(sender, "start", INVITE_ARGS, False, "invalid invite code")
            return None
        name = sender.name or sender.user_id
        operator = Operator(self.platform, sender.user_id, name, role, "invite")
        await self.fleet.save_operator(operator)
        label = role.name.lower()
        await self.audit(sender, "start", INVITE_ARGS, True, f"joined as {label}")
        await self.fleet.notify(f"New {label}: {name}",
                                f"{self.platform.capitalize()} user {sender.user_id} joined "
                                "with an invite.")
        return self.caller_of(operator, name)

    async def refuse(self, sender: Sender, what: str) -> Reply | None:
        """A stranger's message: an audit row every time, a refusal only the first time."""
        await self.audit(sender, "refused", redact_codes(what)[:200], False, "not an operator")
        logger.warning("refused a stranger platform=%s user_id=%s name=%s", self.platform,
                       sender.user_id, sender.name)
        if sender.user_id in self._refused:
            return None
        self._refused.add(sender.user_id)
        return Reply.text(STRANGER_TEXT)
