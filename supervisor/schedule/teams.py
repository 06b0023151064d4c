"""Team templates: named teams of agents (each member a name, role, model, prompt and optional
parent) read from the built-in default_teams.toml and the operator's `team_file`, and spawning
one whole team at once under the guardrails."""

from __future__ import annotations

import asyncio
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.errors import ConfigError, InvalidRequest

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool
    from supervisor.agents.runner import AgentRunner

DEFAULT_TEAMS = Path(__file__).with_name("default_teams.toml")
_PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9_.-]*)\}")


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    role: str
    prompt: str
    model: str | None = None
    parent: str | None = None  # another member's name


@dataclass(frozen=True, slots=True)
class Team:
    name: str
    summary: str
    example: str
    members: tuple[Member, ...]


def _member(team: str, raw: Any) -> Member:
    if not isinstance(raw, dict):
        raise ConfigError(f"team {team!r}: each member is a table")
    unknown = set(raw) - {"name", "role", "prompt", "model", "parent"}
    if unknown:
        raise ConfigError(f"team {team!r}: unknown member key(s) {', '.join(sorted(unknown))}")
    try:
        return Member(str(raw["name"]), str(raw["role"]), str(raw["prompt"]),
                      str(raw["model"]) if raw.get("model") else None,
                      str(raw["parent"]) if raw.get("parent") else None)
    except KeyError as exc:
        raise ConfigError(f"team {team!r}: a member has no {exc.args[0]}") from None


def parse(text: str, source: str) -> dict[str, Team]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    teams: dict[str, Team] = {}
    for name, raw in data.items():
        if not isinstance(raw, dict) or not isinstance(raw.get("members"), list):
            raise ConfigError(f"{source}: team {name!r} needs a [[{name}.members]] list")
        members = tuple(_member(name, m) for m in raw["members"])
        names = [m.name for m in members]
        if not members or len(set(names)) != len(names):
            raise ConfigError(f"{source}: team {name!r} needs members with distinct names")
        for m in members:
            if m.parent is not None and m.parent not in names:
                raise ConfigError(f"{source}: team {name!r}: {m.name}'s parent {m.parent!r} "
                                  "is not a member")
        teams[name] = Team(name, str(raw.get("summary", "")), str(raw.get("example", "")),
                           members)
    return teams


def load(team_file: Path | None) -> dict[str, Team]:
    """The built-in templates, then the operator's file (a name there replaces a built-in)."""
    teams = parse(DEFAULT_TEAMS.read_text(), "default_teams.toml")
    if team_file is not None:
        try:
            text = Path(team_file).read_text()
        except OSError as exc:
            raise ConfigError(f"team_file {team_file}: {exc.strerror}") from None
        teams.update(parse(text, str(team_file)))
    return teams


def agent_names(team: Team, prefix: str | None) -> dict[str, str]:
    return {m.name: f"{prefix}-{m.name}" if prefix else m.name for m in team.members}


def prompt_of(member: Member, names: dict[str, str], prompt: str) -> str:
    values = {**names, "prompt": prompt}
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), member.prompt)


async def spawn_team(pool: AgentPool, team: Team, prompt: str | None, *, by: str,
                     prefix: str | None = None, cwd: str | None = None) -> list[AgentRunner]:
    """Every member at once (parents before their children, each level in parallel), each
    admitted by the pool's guardrails. A member that is refused stops the rest from starting;
    those already started keep running (the reply names them)."""
    task = (prompt or "").strip() or team.example
    if not task:
        raise InvalidRequest(f"team {team.name!r} has no example: say what the team should do")
    names = agent_names(team, prefix)
    started: list[AgentRunner] = []
    pending = list(team.members)
    while pending:
        ready = [m for m in pending if m.parent is None
                 or names[m.parent] in {r.name for r in started}]
        if not ready:  # a parent cycle: parse() let it through
            raise InvalidRequest(f"team {team.name!r}: its members' parents form a cycle")
        runners = await asyncio.gather(*(
            pool.spawn(names[m.name], prompt_of(m, names, task), model=m.model, by=by, cwd=cwd,
                       parent=names[m.parent] if m.parent else None, role=m.role)
            for m in ready), return_exceptions=True)
        errors = [r for r in runners if isinstance(r, BaseException)]
        started += [r for r in runners if not isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        pending = [m for m in pending if m not in ready]
    return started
