"""The HTTP API's OpenAPI description is a valid OpenAPI 3.1 document (checked by
openapi-spec-validator against the specification's own schema), names every command with its
role, and serves the reading commands on GET only; a JSON call becomes the chat line it stands
for, each value one argument whatever it holds."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from bot.web.http_api import READS, BadCall, command_line, openapi
from commands.base import parse_args
from commands.dispatcher import COMMANDS, REGISTRY


def test_the_description_is_valid_openapi_and_covers_every_command() -> None:
    spec = openapi("https://switchboard.example.com")
    validate(spec)  # raises on any violation of the OpenAPI 3.1 schema
    assert set(spec["paths"]) == {f"/api/v1/{c.name}" for c in REGISTRY}
    for cmd in REGISTRY:
        item = spec["paths"][f"/api/v1/{cmd.name}"]
        assert item["post"]["x-role"] == cmd.role.name.lower()
        assert ("get" in item) == (cmd.name in READS)
    assert READS <= set(COMMANDS)


@pytest.mark.parametrize("values", [
    {"name": "dev", "prompt": 'say "hi" --model opus; rm -rf /', "model": "son net"},
    {"name": "dev", "prompt": "x", "cwd": "/tmp/a b", "role": 'q"uote\\d'},
])
def test_a_call_is_the_chat_line_with_each_value_whole(values: dict[str, str]) -> None:
    spawn = COMMANDS["spawn"]
    line = command_line("spawn", spawn.params, values)
    parsed = parse_args(spawn.params, line.split(maxsplit=1)[1])
    for key, value in values.items():
        assert parsed[key] == value


@pytest.mark.parametrize(("command", "values", "wrong"), [
    ("spawn", {"name": "dev"}, "needs prompt"),
    ("spawn", {"name": "dev", "prompt": "--model x"}, "may not start with --"),
    ("spawn", {"name": 3, "prompt": "x"}, "must be text"),
    ("ask", {"agent": "dev", "txt": "x"}, "no parameter txt"),
    ("approve", {"scope": "session"}, "needs id"),
    ("killall", {"confirm": True}, "must be text"),
])
def test_a_wrong_call_says_what_was_wrong(command: str, values: dict[str, object],
                                          wrong: str) -> None:
    with pytest.raises(BadCall, match=wrong):
        command_line(command, COMMANDS[command].params, values)
