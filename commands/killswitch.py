"""Kill-switch commands: /killall (trigger, with a confirm) and /killswitch (status, off)."""

from __future__ import annotations

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
        api = ctx.api
        if args["confirm"] != "confirm":
            if args["confirm"]:
                raise UsageError(f"expected 'confirm', got {args['confirm']!r}")
            live = len(api.agents())
            return Reply(
                blocks=(Text(f"This kills all {live} live agent(s) immediately, with no grace, "
                             "and halts Switchboard until an admin turns the switch off.",
                             "title"),
                        Text("Send /killall confirm (or tap the button) to go ahead.")),
                # This message is the confirmation: its button acts at once (two taps in all).
                buttons=((Button("🛑 Yes, kill everything", "/killall confirm"),),),
            )
        if api.halted:
            report_text = "The kill switch was already on; every agent process swept again."
            await api.halt(by=ctx.caller, reason="repeated")
            return Reply.text(report_text, announced=True)
        report = await api.halt(by=ctx.caller, reason="operator /killall")
        # Every front end gets the kill switch's notice; the reply would say it again.
        return Reply(blocks=(Text(report.text(), "title"),),
                     buttons=((Button("Turn it off…", "/killswitch off"),),), announced=True)


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
        action, confirm = args["action"], args["confirm"]
        if action is None:
            h = ctx.api.halt_state()
            if h is None:
                return Reply.text("The kill switch is off. /killall turns it on.")
            return Reply(blocks=(Text(f"The kill switch is ON since {ago(h.at)} ago: triggered by "
                                      f"{h.by} via {h.via}.", "title"),),
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
        return Reply.text(await ctx.api.release(by=ctx.caller), announced=True)
