"""/cron and /remind through the real dispatcher, API and store (no agent process): plain words
confirmed as one sentence with buttons, bad expressions, the dom+dow warning, list, next,
history, pause/resume/delete, reminders, and every action in the audit table."""

from __future__ import annotations

from commands.base import Caller, Role
from tests.conftest import QuietSwitchboard, run

VIEWER = Caller("test:viewer", "watcher", Role.VIEWER, "test")


async def test_plain_words_are_confirmed_as_one_sentence_then_created(
        quiet_app: QuietSwitchboard) -> None:
    reply = await run(quiet_app, "/cron add every weekday at 9 new:nightly check the build "
                                 "--tz Europe/Berlin")
    assert reply.ok, reply.plain()
    assert reply.blocks[0].text.startswith("Every weekday at 09:00 Europe/Berlin, next ")
    assert "a new agent nightly-<run> is started for each run: check the build" in reply.plain()
    [[create, test_run]] = reply.buttons
    assert create.command.startswith("/cron confirm d") and test_run.command.endswith(" run")
    assert (await run(quiet_app, "/cron list")).plain().startswith("No schedules")
    made = await run(quiet_app, "/cron confirm")
    assert made.ok and made.plain().startswith("Created schedule ")
    sid = made.plain().split()[2].rstrip(":")
    listed = (await run(quiet_app, "/cron list")).plain()
    assert f"{sid} · Every weekday at 09:00 Europe/Berlin → new agent nightly · on" in listed
    upcoming = (await run(quiet_app, f"/cron next {sid}")).plain().splitlines()
    assert len(upcoming) == 6 and all(line.endswith("09:00 Europe/Berlin")
                                      for line in upcoming[1:])
    assert (await run(quiet_app, f"/cron history {sid}")).plain().endswith("No slot has come yet.")
    assert "paused" in (await run(quiet_app, f"/cron pause {sid}")).plain()
    assert "PAUSED (paused by tester)" in (await run(quiet_app, "/cron list")).plain()
    assert "on again" in (await run(quiet_app, f"/cron resume {sid}")).plain()
    assert "deleted" in (await run(quiet_app, f"/cron delete {sid}")).plain()
    assert "There is no schedule draft" in (await run(quiet_app, "/cron confirm")).plain()
    actions = [(a.action, a.args) for a in await quiet_app.api.recent_actions(20)]
    assert ("cron", f"pause {sid}") in actions and ("cron", "confirm") in actions


async def test_bad_expressions_say_what_is_wrong(quiet_app: QuietSwitchboard) -> None:
    reply = await run(quiet_app, "/cron add 0 25 * * * new check")
    assert not reply.ok and "hour 25 is out of range 0-23" in reply.plain()
    reply = await run(quiet_app, "/cron add every fortnight new check")
    assert "'every fortnight' is not a schedule I know" in reply.plain()
    reply = await run(quiet_app, "/cron add every day at 9 check the build")
    assert "name who runs it after the time" in reply.plain()
    reply = await run(quiet_app, "/cron add 0 9 * * * new check --tz Mars/Olympus")
    assert "'Mars/Olympus' is not an IANA time zone" in reply.plain()


async def test_day_of_month_and_day_of_week_warns(quiet_app: QuietSwitchboard) -> None:
    reply = await run(quiet_app, "/cron add 0 9 1 * 1 new report")
    assert reply.ok
    assert any(b.style == "error" and "EITHER" in b.text for b in reply.blocks)


async def test_remind_is_a_one_shot_notice(quiet_app: QuietSwitchboard) -> None:
    reply = await run(quiet_app, "/remind in 20 min check the deploy")
    assert reply.ok and reply.plain().startswith("I will remind you ")
    [view] = await quiet_app.api.schedules.list()
    assert (view.target_kind, view.prompt, view.sentence[:5]) == ("notice", "check the deploy",
                                                                  "Once,")
    reply = await run(quiet_app, "/remind every day at 9 stretch")
    assert not reply.ok and "a reminder is one time" in reply.plain()


async def test_a_viewer_may_look_but_not_change(quiet_app: QuietSwitchboard) -> None:
    assert (await quiet_app.run_command(VIEWER, "/cron list")).ok
    reply = await quiet_app.run_command(VIEWER, "/cron add every day at 9 new check")
    assert not reply.ok and "/cron add needs the operator role; you are viewer" in reply.plain()
