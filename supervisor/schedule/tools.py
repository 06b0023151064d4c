"""An agent's scheduling tool, in its in-process MCP server: `schedule_wakeup(when, prompt)`,
bound to the agent's identity when the server is built, so a wakeup always wakes the agent that
asked for it. Claude Code's own CronCreate/ScheduleWakeup/RemoteTrigger stay off; this is the
only way an agent schedules anything, under caps (how many, how often, how long)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.errors import SupervisorError

if TYPE_CHECKING:
    from claude_agent_sdk import SdkMcpTool

    from supervisor.agents.runner import AgentRunner
    from supervisor.api.schedules import ScheduleAPI

SCHEDULE_TOOL_NAMES = ("schedule_wakeup",)


def schedule_tools(schedules: ScheduleAPI, runner: AgentRunner) -> list[SdkMcpTool[Any]]:
    # Imported here: supervisor.api (and with it `switchboard kill`) loads without the SDK.
    from claude_agent_sdk import tool

    async def schedule_wakeup(args: dict[str, Any]) -> dict[str, Any]:
        try:
            view = await schedules.wakeup(runner, str(args.get("when") or ""),
                                          str(args.get("prompt") or ""))
        except SupervisorError as exc:
            text = f"error: {exc.what}" + (f" {exc.fix}" if exc.fix else "")
            return {"content": [{"type": "text", "text": text}], "is_error": True}
        return {"content": [{"type": "text", "text": (
            f"Scheduled {view.id}: {view.sentence}, next {view.next_text}. You will get "
            "the prompt as a message then (queued if you are busy). The operator sees it in "
            "/cron list and can remove it.")}]}

    s = schedules.settings
    return [tool(
        "schedule_wakeup",
        "Wake yourself later with a prompt: `when` is plain words (in 20 min, at 17:00, "
        "tomorrow at 8, every weekday at 9, every 2 hours) or a cron expression, in the "
        f"operator's time zone ({s.timezone}). At most {s.schedule_agent_max} wakeups; "
        f"repeating ones at most every {s.schedule_agent_min_interval_s / 60:g} min; each "
        f"expires after {s.schedule_agent_expiry_s / 86400:g} days.",
        {"type": "object", "properties": {"when": {"type": "string"},
                                          "prompt": {"type": "string"}},
         "required": ["when", "prompt"]})(schedule_wakeup)]
