"""Agents' in-process MCP tool servers: `claude_agent_sdk.create_sdk_mcp_server`, with each
tool's argument validator built once instead of at every call.

The SDK's server checks every call's arguments with `jsonschema.validate`, which first checks
the tool's schema itself against the JSON Schema metaschema: about 5 to 9 ms of the supervisor's
event loop per tool call on the test VM, 60% of the supervisor's CPU while 50 agents sent bus
messages (py-spy, tests/integration/test_bus_crash.py). Here the same checks run with a
validator made once per tool schema and process (0.3 ms a call; every agent's server has the same
tools, so a new agent's server checks nothing again), and everything else is the SDK's own code: the
wire schema and metadata, the content conversion, the lowlevel server and its mcp-version
handling. Unknown tools, invalid arguments and a handler's exception come back as error results
with the SDK's texts. If a newer SDK no longer has those helpers, this falls back to
`create_sdk_mcp_server` as it is (slower, same behaviour).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema
from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool, create_sdk_mcp_server
from mcp.types import CallToolResult, Tool

logger = logging.getLogger(__name__)

try:  # the SDK's own helpers (private): the fast path is exactly its behaviour but one step
    from claude_agent_sdk import (
        _build_input_schema,
        _build_meta,
        _convert_tool_content,
    )
    from claude_agent_sdk._internal._mcp_compat import build_tool_server as _build_server
    build_tool_server: Any = _build_server
except ImportError:  # pragma: no cover - a newer SDK: use its server unchanged
    build_tool_server = None

Runner = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]


def _error(message: str) -> CallToolResult:
    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": message}], "isError": True})


_VALIDATORS: dict[str, Any] = {}  # a schema's JSON -> its validator (they hold no state)


def _validator(schema: dict[str, Any]) -> Any:
    """The schema's validator, checked against the metaschema once per process: every agent's
    server has the same tools, and a checked schema costs 5-9 ms to check again."""
    key = json.dumps(schema, sort_keys=True, default=repr)
    found = _VALIDATORS.get(key)
    if found is None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)  # once, here: the SDK does it at every call
        found = _VALIDATORS[key] = cls(schema)
    return found


def tool_runner(tools: list[SdkMcpTool[Any]]) -> tuple[list[Tool], Runner]:
    """The wire tools and the call handler of a server of `tools` (the SDK's semantics)."""
    by_name = {t.name: t for t in tools}
    schemas = {t.name: _build_input_schema(t) for t in tools}
    validators = {name: _validator(schema) for name, schema in schemas.items()}
    wire = [Tool.model_validate({"name": t.name, "description": t.description,
                                 "inputSchema": schemas[t.name], "annotations": t.annotations,
                                 "_meta": _build_meta(t)}) for t in tools]

    async def run_tool(tool_name: str, arguments: dict[str, Any]) -> CallToolResult:
        tool_def = by_name.get(tool_name)
        if tool_def is None:
            return _error(f"Tool '{tool_name}' not found")
        try:
            error = jsonschema.exceptions.best_match(validators[tool_name].iter_errors(arguments))
            if error is not None:
                return _error(f"Input validation error: {error.message}")
            result = await tool_def.handler(arguments)
            return CallToolResult.model_validate({
                "content": _convert_tool_content(result.get("content", [])),
                "isError": result.get("is_error", False)})
        except Exception as exc:  # noqa: BLE001 - reported to the model, as the SDK does
            return _error(str(exc))

    return wire, run_tool


def tool_server(name: str, tools: list[SdkMcpTool[Any]],
                version: str = "1.0.0") -> McpSdkServerConfig:
    """`create_sdk_mcp_server(name, version, tools)`, validating with prebuilt validators."""
    if build_tool_server is None:  # pragma: no cover
        return create_sdk_mcp_server(name, version=version, tools=tools)
    wire, run_tool = tool_runner(tools)
    return McpSdkServerConfig(type="sdk", name=name,
                              instance=build_tool_server(name, version, wire, run_tool))


__all__ = ["tool_server", "tool_runner"]
