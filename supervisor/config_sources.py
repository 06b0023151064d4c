"""Where settings come from (environment, TOML file) and how a refusal reads to the operator."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import PydanticBaseSettingsSource

from supervisor.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

# Sections of the settings file; every other table in it is a mistake, except [agent_env].
SECTIONS = ("telegram", "slack", "limits", "gcs", "bus", "repos", "scheduler", "store")
AGENT_ENV_TABLE = "agent_env"
OUR_PREFIX = "SWITCHBOARD_"
ENVIRONMENT = "environment"  # where a value was given, when not in the file


@dataclass(frozen=True, slots=True)
class Key:
    """Where a setting is read: its environment variable and its key in the settings file."""

    env: str | None = None
    toml: str | None = None  # "name" at the top level, or "section.name"
    flat: str | None = None  # the top-level name it had before sections; still accepted
    # Other variables read when `env` is unset, in order: a platform's own name for the same
    # thing (Cloud Run's PORT).
    also_env: tuple[str, ...] = ()

    @property
    def variables(self) -> tuple[str, ...]:
        return ((self.env,) if self.env else ()) + self.also_env


@dataclass(frozen=True, slots=True)
class Kind:
    """What a type of setting accepts, in the words of the docs' Type column and of errors."""

    name: str  # "whole number": the docs' Type column starts with this
    expect: str  # "... must be {expect}, got ..."


def key_of(field: FieldInfo) -> Key:
    return next((m for m in field.metadata if isinstance(m, Key)), Key())


def kind_of(field: FieldInfo) -> Kind | None:
    # A field's own Kind first; else its type alias's (Annotated[int, Kind(...)]), which may sit
    # inside `X | None`.
    for item in field.metadata:
        if isinstance(item, Kind):
            return item
    stack: list[Any] = [field.annotation]
    while stack:
        for arg in get_args(stack.pop()):
            if isinstance(arg, Kind):
                return arg
            stack.append(arg)
    return None


def choices_of(field: FieldInfo) -> tuple[str, ...]:
    """The accepted values of an enumerated setting (a Literal), else ()."""
    stack: list[Any] = [field.annotation]
    while stack:
        tp = stack.pop()
        if get_origin(tp) is Literal:
            return tuple(str(a) for a in get_args(tp))
        stack.extend(get_args(tp))
    return ()


@dataclass(frozen=True, slots=True)
class Given:
    """One value as the operator wrote it, and where, for error messages."""

    value: Any
    key: str  # the environment variable or the TOML key as written
    where: str  # ENVIRONMENT or the file's path: every message starts with it


class _Source(PydanticBaseSettingsSource):
    """A source whose values are worked out up front, so they can also be named in errors."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.given: dict[str, Given] = {}
        # What this source refused, kept (not raised) so that the load names every problem of
        # every source and every value at once, in one round.
        self.problems: list[str] = []

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        given = self.given.get(field_name)
        return (given.value if given else None), field_name, False

    def __call__(self) -> dict[str, Any]:
        return {name: given.value for name, given in self.given.items()}


class EnvironmentSource(_Source):
    """The environment variables named by the settings' Keys; an empty one counts as unset.

    A SWITCHBOARD_ variable that is not a setting is refused (the prefix is ours, so it is a typo)
    unless it is one Switchboard sets for its own children (`internal`).
    """

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str],
                 internal: tuple[str, ...] = ()) -> None:
        super().__init__(settings_cls)
        by_var = {var: name for name, key in _keys(settings_cls) for var in key.variables}
        unknown = sorted(v for v in environ if v.startswith(OUR_PREFIX)
                         and v not in by_var and v not in internal)
        candidates = [v for v in by_var if v.startswith(OUR_PREFIX)]
        self.problems += [f"{ENVIRONMENT}: {v} is not a setting{_did_you_mean(v, candidates)}"
                          for v in unknown]
        for var, name in by_var.items():  # a setting's own variable before its others
            if environ.get(var, "") != "" and name not in self.given:
                self.given[name] = Given(environ[var], var, ENVIRONMENT)


class FileSource(_Source):
    """The settings file: top-level keys, the [telegram], [slack], [limits] and [gcs] sections
    (each key also accepted under its older top-level name), and the free-form [agent_env]."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any],
                 path: Path | None) -> None:
        super().__init__(settings_cls)
        where = str(path)
        places: dict[str, str] = {}  # TOML key (canonical first, then older flat names) -> field
        for field, key in _keys(settings_cls):
            if key.toml:
                places[key.toml] = field
        for field, key in _keys(settings_cls):
            if key.flat:
                places[key.flat] = field
        problems: list[str] = []
        for written, value in _entries(data, problems):
            name = places.get(written)
            if name is None:
                problems.append(f"{written} is not a setting"
                                f"{_did_you_mean(written, [*places, *SECTIONS])}")
            elif name in self.given:
                first = self.given[name].key
                problems.append(f"{written} is given twice: as {first} and as {written}; "
                                "keep one")
            elif value != "":  # an empty string counts as unset, as in the environment
                self.given[name] = Given(value, written, where)
        self.problems += [f"{where}: {p}" for p in problems]


def _keys(settings_cls: type[BaseSettings]) -> Iterator[tuple[str, Key]]:
    for name, field in settings_cls.model_fields.items():
        yield name, key_of(field)


def _entries(data: Mapping[str, Any], problems: list[str]) -> Iterator[tuple[str, Any]]:
    """(dotted key, value) for every setting in the file, sections flattened."""
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                problems.append(f"{key} must be a table (a [{key}] section), got {shape(value)}")
                continue
            for sub, sub_value in value.items():
                yield f"{key}.{sub}", sub_value
        elif key == AGENT_ENV_TABLE and not isinstance(value, dict):
            problems.append(f"[{AGENT_ENV_TABLE}] in the settings file must be a table of "
                            f"strings, got {shape(value)}")
        else:
            yield key, value


def _did_you_mean(written: str, candidates: list[str]) -> str:
    # The same name in another section is the likeliest slip; else the closest spelling.
    leaf = written.rpartition(".")[2]
    same = [c for c in candidates if c != written and "." in c and c.rpartition(".")[2] == leaf]
    close = same or difflib.get_close_matches(written, candidates, n=1, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def explain(exc: ValidationError | None, settings_cls: type[BaseSettings],
            sources: tuple[_Source, ...]) -> ConfigError | None:
    """Every problem at once: what the sources refused (unknown keys, keys given twice), then
    one sentence per refused value: its variable and key, what it must be, what it got. None
    when there is nothing to say."""
    lines: list[str] = [p for s in sources for p in s.problems]
    if exc is None:
        return problems_error(lines) if lines else None
    seen: set[str] = set()
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else ""
        if name in seen:  # one sentence per setting (a list may have several bad items)
            continue
        seen.add(name)
        field = settings_cls.model_fields.get(name)
        if field is None:
            lines.append(f"{name}: {err['msg']}")
            continue
        given = next((s.given[name] for s in sources if name in s.given), None)
        lines.append(_sentence(name, field, err, given))
    return problems_error(lines) if lines else None


def problems_error(lines: list[str]) -> ConfigError:
    if len(lines) == 1:
        return ConfigError(lines[0])
    return ConfigError(f"{len(lines)} problems:\n" + "\n".join(f"  {line}" for line in lines))


def shape(value: Any) -> str:
    """What a value is, without showing it (it may be a secret)."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _sentence(name: str, field: FieldInfo, err: ErrorDetails, given: Given | None) -> str:
    key = key_of(field)
    toml = given.key if given and given.where != ENVIRONMENT else key.toml
    env = given.key if given and given.where == ENVIRONMENT else key.env  # PORT, not its alias
    subject = " / ".join(k for k in (env, toml) if k) or name
    ctx = err.get("ctx") or {}
    kind = kind_of(field)
    if err["type"] == "setting":
        predicate = err["msg"]
    elif err["type"] == "literal_error":
        predicate = f"must be one of {', '.join(choices_of(field))}"
    elif err["type"] == "greater_than_equal":
        ge = ctx.get("ge")
        predicate = "must not be negative" if ge == 0 else f"must be at least {ge}"
    elif err["type"] == "greater_than":
        predicate = f"must be more than {ctx.get('gt')}"
    elif err["type"] == "less_than_equal":
        predicate = f"must be at most {ctx.get('le')}"
    elif kind is not None:
        predicate = f"must be {kind.expect}"
    else:
        predicate = err["msg"]
    raw = given.value if given else err.get("input")
    hidden = (kind is not None and kind.name == "secret text") or not field.repr
    got = shape(raw) if hidden else repr(raw)
    where = f"{given.where}: " if given else ""
    return f"{where}{subject} {predicate}, got {got}"
