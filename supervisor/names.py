"""Agents' names and ids: what a name may be, and a new id. Kept apart from
supervisor/agents/pool.py so that what checks a name (the repositories' spawn,
supervisor/api/repos.py) does not import the pool, and with it the SDK, on the way:
`switchboard kill` must not need the SDK."""

from __future__ import annotations

import re
import secrets

from supervisor.errors import InvalidRequest

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


def check_names(name: str, role: str | None) -> None:
    if not NAME_RE.match(name):
        raise InvalidRequest(
            f"{name!r} is not a valid agent name: start with a letter, then letters, digits,"
            " '.', '_' or '-', at most 40 characters"
        )
    if role is not None and not NAME_RE.match(role):
        raise InvalidRequest(f"{role!r} is not a valid role: a letter, then letters, digits, "
                             "'.', '_' or '-'")


def new_agent_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(6))
