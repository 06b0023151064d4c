"""The kinds of value a setting takes (seconds, percent, flags, secrets, user ids, paths ...)
with the validators that read them from TOML and the environment and say what was wrong.
Settings (supervisor/config.py) declares its fields with them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from supervisor.config_sources import Kind

# Words a flag is read from (supervisor/config.py names them in its messages too).
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
# Prefixes of variables never passed to an agent (chat tokens, cloud credentials, ours).
WITHHELD_PREFIXES = (
    "TELEGRAM_", "SLACK_", "SWITCHBOARD_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_", "AWS_", "AZURE_",
    "STORAGE_EMULATOR_HOST",
)


# A variable whose name holds one of these is taken for a secret, and its value kept out of logs.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "PRIVATE")


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


@dataclass(frozen=True, slots=True)
class Secret:
    """A secret value whose repr never shows it."""

    value: str

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


# -- what each type of setting accepts -----------------------------------------------------------


def _not_a_bool(value: Any) -> Any:
    # TOML's `true` is not 1; pydantic would take it as one.
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower() if isinstance(value, str | int) else None
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError("not a clear true or false")


def _none_word(value: Any) -> Any:
    return None if isinstance(value, str) and value.strip().lower() == "none" else value


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _secret(value: Any) -> Any:
    if isinstance(value, str):
        return Secret(value) if value else None
    if value is None or isinstance(value, Secret):
        return value
    raise ValueError("a secret is text")


def _split(sep: str) -> Any:
    def split(value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(sep) if part.strip()]
        return value

    return split


def _not_withheld(names: tuple[str, ...]) -> tuple[str, ...]:
    leaked = [n for n in names if n.upper().startswith(WITHHELD_PREFIXES)]
    if leaked:
        raise PydanticCustomError(
            "setting", "may not name {names}: chat tokens, cloud credentials and Switchboard's "
            "own settings never reach an agent", {"names": ", ".join(leaked)})
    return names


def _ids(value: Any) -> Any:
    items = _split(",")(value)
    if isinstance(items, list | tuple):
        return [str(i).strip() if isinstance(i, int) and not isinstance(i, bool) else i
                for i in items]
    return items


def _numeric(ids: tuple[str, ...]) -> tuple[str, ...]:
    bad = [i for i in ids if not i.lstrip("-").isdigit()]
    if bad:
        raise PydanticCustomError("setting", "must be numeric Telegram user ids (not {bad})",
                                  {"bad": ", ".join(map(repr, bad))})
    return ids


def _slack_ids(ids: tuple[str, ...]) -> tuple[str, ...]:
    bad = [i for i in ids if not re.fullmatch(r"[UW][A-Z0-9]{2,}", i)]
    if bad:
        raise PydanticCustomError("setting", "must be Slack user ids such as U012AB3CD (not "
                                  "{bad})", {"bad": ", ".join(map(repr, bad))})
    return ids


def _slash(word: str) -> str:
    if not re.fullmatch(r"/[a-z0-9_-]{1,31}", word):
        raise PydanticCustomError("setting", "must be a slash command such as /sb (not {w})",
                                  {"w": repr(word)})
    return word


def _env_values(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    out: dict[str, str] = {}
    for name, item in value.items():
        if isinstance(item, bool):
            out[str(name)] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[str(name)] = str(item)
        else:
            raise PydanticCustomError("setting", "values must be text, numbers or true/false "
                                      "({name} is not)", {"name": str(name)})
    return out


_NUMBER = Kind("number", "a number")
_WHOLE = Kind("whole number", "a whole number")
Seconds = Annotated[float, _NUMBER, BeforeValidator(_not_a_bool), Field(ge=0, allow_inf_nan=False)]
Interval = Annotated[float, _NUMBER, BeforeValidator(_not_a_bool), Field(gt=0, allow_inf_nan=False)]
Percent = Annotated[float, _NUMBER, BeforeValidator(_not_a_bool),
                    Field(ge=0, le=100, allow_inf_nan=False)]
Budget = Annotated[Seconds | None, Kind("number", 'a number (or "none")'),
                   BeforeValidator(_none_word)]
Whole = Annotated[int, _WHOLE, BeforeValidator(_not_a_bool), Field(ge=0)]
Port = Annotated[int, _WHOLE, BeforeValidator(_not_a_bool), Field(ge=1, le=65535)]
Flag = Annotated[bool, Kind("true or false", "true or false (also yes/no/on/off/1/0)"),
                 BeforeValidator(_flag)]
Text = Annotated[str, Kind("text", "text (a quoted string)")]
SecretText = Annotated[Secret | None, Kind("secret text", "text (a quoted string)"),
                       BeforeValidator(_secret)]
Choice = Kind("one of", "one of the listed values")
UserPath = Annotated[Path, Kind("path", "a path"), AfterValidator(Path.expanduser)]
CliPath = Annotated[Path, Kind("path", "a path"),
                    AfterValidator(lambda p: p.expanduser().absolute())]
Names = Annotated[tuple[str, ...],
                  Kind("list of names", "a list of variable names (or a comma-separated string)"),
                  BeforeValidator(_split(",")), AfterValidator(_not_withheld)]
UserIds = Annotated[tuple[str, ...],
                    Kind("list of user ids", "a list of user ids (or a comma-separated string)"),
                    BeforeValidator(_ids), AfterValidator(_numeric)]
SlackUserIds = Annotated[tuple[str, ...],
                         Kind("list of user ids", "a list of user ids (or a comma-separated "
                              "string)"), BeforeValidator(_ids), AfterValidator(_slack_ids)]
SlashCommand = Annotated[str, Kind("text", "text (a quoted string)"), AfterValidator(_slash)]
Paths = Annotated[tuple[UserPath, ...],
                  Kind("list of paths", "a list of paths (or a ':'-separated string)"),
                  BeforeValidator(_split(":"))]
AgentEnv = Annotated[Mapping[str, str], Kind("table", "a table of NAME = value"),
                     BeforeValidator(_env_values)]


def env_secrets(env: Mapping[str, str]) -> tuple[Secret, ...]:
    """The secrets our own environment holds (for the redactor only)."""
    values = [v for k, v in env.items() if v and looks_secret(k)]
    # The key file's path is harmless; the private key inside it is not. google-auth does not
    # log it, but an error that quotes the file must not carry it either.
    key_file = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if key_file:
        try:
            info = json.loads(Path(key_file).expanduser().read_text())
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict):
            for name in ("private_key", "private_key_id", "client_secret", "refresh_token"):
                if isinstance(info.get(name), str):
                    values.append(info[name])
                    values += [line for line in info[name].splitlines() if len(line) >= 16
                               and "PRIVATE KEY" not in line]
    return tuple(Secret(v) for v in dict.fromkeys(values))
