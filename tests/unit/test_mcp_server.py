"""Agents' tool servers (supervisor/guard/mcp_server.py): the SDK's semantics, with each tool's
schema checked once when the server is built, not at every call."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from claude_agent_sdk import tool

from supervisor.guard import mcp_server
from supervisor.guard.mcp_server import tool_runner, tool_server


@tool("echo", "Echo a word", {"type": "object", "properties": {"word": {"type": "string"}},
                              "required": ["word"]})
async def echo(args: dict[str, Any]) -> dict[str, Any]:
    if args["word"] == "boom":
        raise RuntimeError("it broke")
    return {"content": [{"type": "text", "text": f"echo {args['word']}"}]}


def text(result: Any) -> str:
    return "".join(c.text for c in result.content)


async def test_calls_validation_errors_and_unknown_tools_as_the_sdk_reports_them() -> None:
    wire, run = tool_runner([echo])
    assert [t.name for t in wire] == ["echo"] and wire[0].input_schema["required"] == ["word"]
    ok = await run("echo", {"word": "hi"})
    assert text(ok) == "echo hi" and not ok.is_error
    bad = await run("echo", {"word": 3})
    with pytest.raises(jsonschema.ValidationError) as sdk_way:  # what the SDK's check says
        jsonschema.validate({"word": 3}, wire[0].input_schema)
    assert bad.is_error and text(bad) == f"Input validation error: {sdk_way.value.message}"
    missing = await run("echo", {})
    assert missing.is_error and "'word' is a required property" in text(missing)
    broke = await run("echo", {"word": "boom"})
    assert broke.is_error and text(broke) == "it broke"
    unknown = await run("nope", {})
    assert unknown.is_error and text(unknown) == "Tool 'nope' not found"
    assert tool_server("switchboard", [echo])["type"] == "sdk"


async def test_the_schema_is_checked_once_not_at_every_call(monkeypatch) -> None:
    """Regression: the SDK's server checked each tool's schema against the metaschema at
    every call (5-9 ms of the event loop per tool call), and each agent's server again."""
    checks: list[object] = []
    real = jsonschema.Draft202012Validator.check_schema.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, schema: Any, *a: Any, **kw: Any) -> None:
        checks.append(schema)
        real(cls, schema, *a, **kw)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(counting))
    monkeypatch.setattr(mcp_server, "_VALIDATORS", {})
    for _agent in range(2):  # every agent's server has the same tools: checked once
        _, run = tool_runner([echo])
        for word in ("a", "b", "c"):
            assert text(await run("echo", {"word": word})) == f"echo {word}"
    assert len(checks) == 1
