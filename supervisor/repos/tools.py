"""An agent's repository tool, in its in-process MCP server, bound to its identity:
`intend(paths, note)` declares what it is about to change, for its siblings to see."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claude_agent_sdk import SdkMcpTool, tool

from supervisor.errors import SupervisorError

if TYPE_CHECKING:
    from supervisor.repos.manager import Repos


def repo_tools(repos: Repos, agent_id: str) -> list[SdkMcpTool[Any]]:
    if repos.repo_of(agent_id) is None:
        return []

    async def intend(args: dict[str, Any]) -> dict[str, Any]:
        raw = args.get("paths") or []
        paths = [str(p) for p in raw] if isinstance(raw, list) else [str(raw)]
        ttl = args.get("minutes")
        try:
            text = await repos.intend(agent_id, paths, str(args.get("note") or ""),
                                      float(ttl) * 60 if isinstance(ttl, int | float) else None)
        except SupervisorError as exc:
            return {"content": [{"type": "text", "text": f"error: {exc.what}"}],
                    "is_error": True}
        return {"content": [{"type": "text", "text": text}]}

    return [tool(
        "intend",
        "Declare what you are about to change in this repository (paths relative to its root; "
        "a directory covers what is under it), with a short note. Other agents on the same "
        "repository whose work overlaps are told when their turn ends. Expires after an hour "
        "unless you give minutes.",
        {"type": "object",
         "properties": {"paths": {"type": "array", "items": {"type": "string"}},
                        "note": {"type": "string"},
                        "minutes": {"type": "number"}},
         "required": ["paths"]})(intend)]
