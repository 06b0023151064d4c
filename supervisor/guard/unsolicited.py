"""Turns nobody asked for. In streaming-input mode the CLI can begin a turn on its own: a
background task's notification, a scheduled prompt of its session, a message relayed from a
peer session. Every turn Switchboard runs is asked for by someone (supervisor/bus/inbox.py Origin)
and sent with a uuid; a result that names none of ours, or a tool call while no asked-for turn
runs, belongs to such a turn. It is refused (its tool calls denied, the CLI interrupted),
recorded and audited, and the operator is told."""

from __future__ import annotations

import json
from typing import Any

from claude_agent_sdk import ResultMessage

# Origins the CLI gives the operator's own prompts (None: an SDK prompt it did not classify).
ASKED_KINDS = (None, "human")
REFUSED = ("Refused by Switchboard: nobody asked for this turn (the CLI began it on its own: "
           "{kind}). Wait for the next message instead.")


def origin_kind(origin: Any) -> str | None:
    """The `kind` of an SDK MessageOrigin (a dict), or None."""
    return origin.get("kind") if isinstance(origin, dict) else None


def result_is_ours(msg: ResultMessage, sent: str | None) -> bool:
    """Whether a result ends the turn we sent `sent` for: the CLI names the uuids a turn took
    in; a CLI that names none is believed only for a prompt it calls the operator's."""
    uuids = {u for u in (msg.user_message_uuid, *(msg.user_message_uuids or ())) if u}
    if uuids:
        return sent in uuids
    return origin_kind(msg.origin) in ASKED_KINDS


def describe(kind: str | None, what: str, detail: dict[str, Any]) -> str:
    """One line for the audit table and the event log."""
    return f"{kind or 'unknown origin'}: {what} {json.dumps(detail, default=str)[:1500]}"


__all__ = ["ASKED_KINDS", "REFUSED", "describe", "origin_kind", "result_is_ours"]
