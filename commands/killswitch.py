"""Kill-switch commands: /killall (trigger, with a confirm) and /killswitch (status, off)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from commands.base import Arg, Button, Context, Param, Reply, Role, Text, UsageError
from commands.render import ago


class KillAll:
    name: ClassVar[str] = "killall"
    summary: ClassVar[str] = ("KILL SWITCH: SIGKILL every agent at once, deny every open request, "
                              "refuse all new work until an admin turns it off")
    role: ClassVar[Role] = Role.ADMIN
    params: ClassVar[tuple[Param, ...]] = (Arg("confirm", "the word 'confirm'", required=False),)
    examples: ClassVar[tuple[str, ...]] = ("/killall", "/killall confirm")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        ks = ctx.pool.killswitch
        if args["confirm"] != "confirm":
            if args["confirm"]:
                raise UsageError(f"expected 'confirm', got {args['confirm']!r}")
            live = len([r for r in ctx.pool.runners() if r.state.live])
            return Reply(
                blocks=(Text(f"This kills all {live} live agent(s) immediately, with no grace, "
                             "and halts Switchboard until an admin turns the switch off.",
                             "title"),
                        Text("Send /killall confirm (or tap the button) to go ahead.")),
                buttons=((Button("🛑 Yes, kill everything", "/killall confirm", confirm=True),),),
            )
        if ks.halted:
            report_text = "The kill switch was already on; every agent process swept again."
            await ks.trigger(ctx.caller.name, ctx.caller.platform, "repeated")
            return Reply.text(report_text)
        report = await ks.trigger(ctx.caller.name, ctx.caller.platform, "operator /killall")
        return Reply(blocks=(Text(report.text(), "title"),),
                     buttons=((Button("Turn it off…", "/killswitch off"),),))


class KillSwitchCmd:
    name: ClassVar[str] = "killswitch"
    summary: ClassVar[str] = "kill switch state; '/killswitch off confirm' turns it off (admin)"
    role: ClassVar[Role] = Role.VIEWER
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "'off' to turn it off", required=False),
        Arg("confirm", "the word 'confirm'", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = ("/killswitch", "/killswitch off confirm")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        ks = ctx.pool.killswitch
        action, confirm = args["action"], args["confirm"]
        if action is None:
            if not ks.halted:
                return Reply.text("The kill switch is off. /killall turns it on.")
            h = ks.halt or {}
            since = ago(float(h.get("at", time.time())))
            return Reply(blocks=(Text(f"The kill switch is ON since {since} ago: triggered by "
                                      f"{h.get('by')} via {h.get('via')}.", "title"),),
                         buttons=((Button("Turn it off…", "/killswitch off"),),))
        if action != "off":
            raise UsageError(f"unknown action {action!r}; the only one is 'off'")
        if ctx.caller.role < Role.ADMIN:
            return Reply.error("Only an admin can turn the kill switch off.")
        if confirm != "confirm":
            return Reply(blocks=(Text("Turning the kill switch off lets agents be spawned and "
                                      "messaged again. Send /killswitch off confirm."),),
                         buttons=((Button("Yes, turn it off", "/killswitch off confirm",
                                          confirm=True),),))
        return Reply.text(await ks.deactivate(ctx.caller.name, ctx.caller.platform))
