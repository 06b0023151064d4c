"""Schedule commands: /cron (add from plain words or cron, confirm, list, next, history, pause,
resume, delete, run) and /remind (a one-shot notice to the operator)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from commands.base import Arg, Button, Context, Param, Reply, Rest, Role, Text, UsageError
from commands.render import money
from supervisor.api import BadSchedule, InvalidRequest, RunView, ScheduleView

ACTIONS = ("add", "confirm", "list", "next", "history", "pause", "resume", "delete", "run")
READ_ONLY = ("list", "next", "history")
_OPTION = re.compile(r"(?:^|\s)--(tz|model|notify|timeout|budget)(?:=|\s+)(\S+)")
_SWITCH = re.compile(r"(?:^|\s)--catch-up\b")
MAX_WHEN_WORDS = 8


def _options(text: str) -> tuple[str, dict[str, Any]]:
    """--tz/--model/--notify/--timeout/--budget/--catch-up taken out of `text`, wherever they
    are."""
    opts: dict[str, Any] = {m.group(1): m.group(2) for m in _OPTION.finditer(text)}
    text = _OPTION.sub(" ", text)
    opts["catch_up"] = bool(_SWITCH.search(text))
    text = _SWITCH.sub(" ", text)
    for key, unit in (("timeout", "minutes"), ("budget", "USD")):
        if key in opts:
            try:
                opts[key] = float(str(opts[key]).lstrip("$"))
            except ValueError:
                raise UsageError(f"--{key} takes a number of {unit}, got {opts[key]!r}") from None
    return text.strip(), opts


def _split_when(ctx: Context, text: str) -> tuple[str, str, str]:
    """(when, target, prompt): the time is the words before the first word that names a target
    (a live agent, or new / new:<name>) and reads as a time."""
    quoted = re.match(r"\s*([\"'])(.+?)\1\s+(\S+)\s*(.*)", text, re.S)
    if quoted:
        return quoted.group(2), quoted.group(3), quoted.group(4)
    words = list(re.finditer(r"\S+", text))
    schedules = ctx.api.schedules
    first_error: InvalidRequest | None = None
    for k in range(1, min(len(words), MAX_WHEN_WORDS + 1)):
        if not schedules.is_target(words[k].group()):
            continue
        when = text[:words[k].start()].strip()
        try:
            schedules.parse_when(when)
        except InvalidRequest as exc:
            first_error = first_error or exc
            continue
        return when, words[k].group(), text[words[k].end():].strip()
    if first_error is not None:
        raise first_error
    raise UsageError("name who runs it after the time: a live agent's name (it gets the "
                     "prompt as a message) or new (a fresh agent each run)")


def _run_line(r: RunView) -> str:
    what = r.status.replace("_", " ")
    if r.reason:
        what += f" ({r.reason})"
    tags = [t for t, on in (("catch-up", r.catch_up), ("test run", r.manual)) if on]
    parts = [r.slot_text, what + (f" [{', '.join(tags)}]" if tags else "")]
    if r.status != "skipped":
        parts.append(money(r.cost_usd))
    if r.agent_id:
        parts.append(f"agent {r.agent_name} ({r.agent_id})")
    outcome = " ".join(r.outcome.split())
    if outcome:
        parts.append(outcome[:160] + ("…" if len(outcome) > 160 else ""))
    return " · ".join(parts)


def _schedule_line(s: ScheduleView) -> str:
    target = {"spawn": f"new agent {s.target_name}", "notice": "reminder"}.get(
        s.target_kind, s.target_name)
    state = "on" if s.enabled else f"PAUSED ({s.paused_why})" if s.paused_why else "PAUSED"
    lines = [f"{s.id} · {s.sentence} → {target} · {state}"
             + (f" · next {s.next_text}" if s.next_text and s.enabled else "")
             + ("" if s.next_text else " · done")]
    prompt = " ".join(s.prompt.split())
    lines.append("    " + (prompt[:100] + "…" if len(prompt) > 100 else prompt))
    if s.last is not None:
        lines.append(f"    last: {_run_line(s.last)}")
    if s.consecutive_failures:
        lines.append(f"    {s.consecutive_failures} failure(s) in a row")
    if s.owner_agent:
        lines.append(f"    made by agent {s.owner_agent} (schedule_wakeup); /cron delete {s.id} "
                     "removes it")
    return "\n".join(lines)


class CronCmd:
    name: ClassVar[str] = "cron"
    summary: ClassVar[str] = ("schedules: add one from plain words or cron (then confirm), list, "
                              "next, history, pause, resume, delete, run now")
    role: ClassVar[Role] = Role.VIEWER  # list, next and history; the rest need operator
    params: ClassVar[tuple[Param, ...]] = (
        Arg("action", "add, confirm, list, next, history, pause, resume, delete or run",
            required=False),
        Rest("args", "add: <when> <agent|new[:name]> <prompt> [--tz Zone] [--catch-up] "
                     "[--notify failure|always|never] [--timeout MIN] [--budget USD] "
                     "[--model M]; the others: <id>", required=False),
    )
    examples: ClassVar[tuple[str, ...]] = (
        "/cron add every weekday at 9 fixer check the nightly build",
        "/cron add 0 */2 * * * new:triage --tz Europe/Berlin triage new issues",
        "/cron confirm", "/cron list", "/cron next k3x9p", "/cron history k3x9p",
        "/cron pause k3x9p", "/cron run k3x9p")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        action = (args["action"] or "list").lower()
        rest = (args["args"] or "").strip()
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if action not in READ_ONLY and ctx.caller.role < Role.OPERATOR:
            return Reply.error(f"/cron {action} needs the operator role; you are "
                               f"{ctx.caller.role.name.lower()}.",
                               "/cron list, next and history work for you.")
        if action == "add":
            return await self._add(ctx, rest)
        if action == "confirm":
            words = rest.split()
            draft = next((w for w in words if w != "run"), None)
            view = await ctx.api.schedules.confirm(draft, by=ctx.caller, run_now="run" in words)
            return Reply.text(f"Created schedule {view.id}: {view.sentence}"
                              + (f", next {view.next_text}" if view.next_text else "") + "."
                              + (" A test run has started." if "run" in words else ""),
                              f"/cron history {view.id} shows its runs; /cron pause {view.id} "
                              "stops it for now.")
        if action == "list":
            return await self._list(ctx)
        if not rest:
            raise UsageError(f"/cron {action} needs a schedule id (/cron list shows them)")
        return await self._one(ctx, action, rest.split()[0])

    async def _add(self, ctx: Context, rest: str) -> Reply:
        text, opts = _options(rest)
        if not text:
            raise UsageError("say when, who and what: /cron add every weekday at 9 fixer "
                             "check the build")
        when, target, prompt = _split_when(ctx, text)
        draft = await ctx.api.schedules.draft(
            when, target, prompt, by=ctx.caller, tz=opts.get("tz"), model=opts.get("model"),
            catch_up=opts["catch_up"], notify=opts.get("notify") or "failure",
            timeout_s=opts["timeout"] * 60 if "timeout" in opts else None,
            budget_usd=opts.get("budget"))
        how = ("gets the prompt as a message (at once if idle, queued if busy)"
               if draft.target_kind == "message" else "is started for each run")
        blocks = [Text(draft.summary(), "title"),
                  Text(f"{draft.target_name} {how}: {draft.prompt[:300]}"),
                  Text(f"Missed runs: {'one catch-up run' if opts['catch_up'] else 'skipped'}; "
                       f"notify: {draft.notify}; timeout {draft.timeout_s / 60:g} min"
                       + (f"; budget {money(draft.budget_usd)}" if draft.budget_usd else ""))]
        blocks += [Text(f"⚠ {w}", "error") for w in draft.warnings]
        blocks.append(Text("Send /cron confirm (or tap a button) to create it."))
        return Reply(blocks=tuple(blocks), buttons=((
            Button("✅ Create", f"/cron confirm {draft.id}"),
            Button("▶ Create and test-run now", f"/cron confirm {draft.id} run")),))

    async def _list(self, ctx: Context) -> Reply:
        rows = await ctx.api.schedules.list()
        if not rows:
            return Reply.text("No schedules. /cron add every weekday at 9 <agent> <prompt> "
                              "makes one; /remind in 20 min <text> a reminder.")
        return Reply(blocks=(Text(f"{len(rows)} schedule(s)", "title"),
                             Text("\n".join(_schedule_line(s) for s in rows))))

    async def _one(self, ctx: Context, action: str, sid: str) -> Reply:
        api = ctx.api.schedules
        if action == "next":
            times = await api.upcoming(sid, 5)
            view = await api.get(sid)
            return Reply(blocks=(Text(f"{view.id}: {view.sentence}", "title"),
                                 Text("\n".join(times) or "It will not run again.")))
        if action == "history":
            view = await api.get(sid)
            runs = await api.history(sid, 20)
            return Reply(blocks=(Text(f"{view.id}: {view.sentence} (newest first)", "title"),
                                 Text("\n".join(_run_line(r) for r in runs)
                                      or "No slot has come yet.")))
        if action == "run":
            run = await api.run_now(sid, by=ctx.caller)
            return Reply.text(f"Test run of {sid} started ({run.status}); /cron history {sid} "
                              "shows how it ends.")
        done = {"pause": api.pause, "resume": api.resume, "delete": api.delete}[action]
        view = await done(sid, by=ctx.caller)
        said = {"pause": "paused: its slots are recorded as skipped until /cron resume",
                "resume": f"on again, next {view.next_text}",
                "delete": "deleted (its history is kept)"}[action]
        return Reply.text(f"Schedule {view.id} ({view.sentence}) {said}.")


class RemindCmd:
    name: ClassVar[str] = "remind"
    summary: ClassVar[str] = "a one-time notice to you: /remind in 20 min <text>, at 17:00 ..."
    role: ClassVar[Role] = Role.OPERATOR
    params: ClassVar[tuple[Param, ...]] = (
        Rest("args", "<when> <text> [--tz Zone]: when is in 20 min, at 17:00, tomorrow at 8"),)
    examples: ClassVar[tuple[str, ...]] = ("/remind in 20 min check the deploy",
                                           "/remind tomorrow at 8 review the nightly runs")

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply:
        text, opts = _options(args["args"])
        words = list(re.finditer(r"\S+", text))
        error: InvalidRequest | None = None
        for k in range(min(len(words) - 1, MAX_WHEN_WORDS), 0, -1):
            when = text[:words[k].start()].strip()
            try:
                ctx.api.schedules.parse_when(when, opts.get("tz"))
            except InvalidRequest as exc:
                error = exc
                continue
            view = await ctx.api.schedules.remind(when, text[words[k].start():].strip(),
                                                  by=ctx.caller, tz=opts.get("tz"))
            return Reply.text(f"I will remind you {view.next_text} {view.tz} "
                              f"(schedule {view.id}; /cron delete {view.id} cancels it).")
        raise error or BadSchedule("say when, then what: /remind in 20 min check the deploy")
