"""The command layer end to end: the dispatcher's error replies for every command, /help, roles,
and each command's happy path against a running Switchboard whose agents are the fake claude CLI.
What needs no agent (parsing, roles, errors, help, audit) runs on `quiet_app`: the same
dispatcher, API, pool and SQLite store, with the pool never started.

Bad-argument cases are generated from REGISTRY, so a new command is covered without a new test.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bot.app import Switchboard
from commands.base import Arg, Caller, Command, Opt, Reply, Rest, Role, usage_line
from commands.dispatcher import MAX_COMMAND_CHARS, REGISTRY, Dispatcher
from store.errors import StoreUnavailable
from supervisor.agents.runner import AgentRunner
from supervisor.errors import InvalidRequest
from tests.conftest import (
    ADMIN,
    MODEL,
    QuietSwitchboard,
    host_pid,
    processes_with_tag,
    run,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

NAMES = [c.name for c in REGISTRY]
EXPECTED_COMMANDS = {"spawn", "agents", "status", "ask", "pause", "resume", "stop", "kill",
                     "logs", "cost", "help"}


def caller(role: Role) -> Caller:
    return Caller(f"test:{role.name.lower()}", role.name.lower(), role, "test")


async def run_as(app: Switchboard | QuietSwitchboard, role: Role, line: str) -> Reply:
    return await app.run_command(caller(role), line)


def usage_of(cmd: Command) -> str:
    return f"Usage: {usage_line(cmd.name, cmd.params)}"


def assert_usage_error(reply: Reply, cmd: Command, fragment: str) -> None:
    """What was wrong (first, styled as an error, naming the command) and the correct form."""
    text = reply.plain()
    assert not reply.ok, text
    assert reply.blocks[0].style == "error", reply.blocks
    assert reply.blocks[0].text.startswith(f"/{cmd.name}: "), text
    assert fragment in reply.blocks[0].text, text
    assert usage_of(cmd) in text, text


async def spawn_idle(app: Switchboard, name: str = "a", prompt: str = "hello",
                     extra: str = "") -> AgentRunner:
    reply = await run(app, " ".join(w for w in ("/spawn", name, extra, prompt) if w))
    assert reply.ok, reply.plain()
    runner = await app.pool.fleet.get(name)
    await wait_for(lambda: runner.state == "idle" and not runner.busy, 15, f"{name} idle")
    return runner


async def turns_done(app: Switchboard, runner: AgentRunner, n: int) -> None:
    async def done() -> bool:
        turns = await app.store.turns.recent(runner.id, 50)
        return len(turns) >= n and all(t.status != "running" for t in turns) \
            and runner.state == "idle" and not runner.busy
    await wait_for(done, 15, f"{n} finished turns of {runner.name}")


# -- bad arguments, generated from the registry -----------------------------------------------


def _placeholder(p: Arg | Rest) -> str:
    if isinstance(p, Rest):
        return "some words"
    if p.kind is int:
        return str(p.low if p.low is not None else 1)
    return "x1"


def bad_argument_cases() -> Iterator[object]:
    """(command, line, what the error must say) for every way to get a command's arguments wrong."""
    for cmd in REGISTRY:
        name = cmd.name
        positionals = [p for p in cmd.params if not isinstance(p, Opt)]
        opts = [p for p in cmd.params if isinstance(p, Opt)]
        yield pytest.param(cmd, f"/{name} --bogus", "unknown option --bogus",
                           id=f"{name}-unknown-option")
        yield pytest.param(cmd, f"/{name} --bogus=1", "unknown option --bogus",
                           id=f"{name}-unknown-option-equals")
        if positionals and isinstance(positionals[0], Arg):
            yield pytest.param(cmd, f'/{name} "unclosed quote', "unbalanced quote",
                               id=f"{name}-unbalanced-quote")
            yield pytest.param(cmd, f"/{name} 'unclosed", "unbalanced quote",
                               id=f"{name}-unbalanced-single-quote")
        for i, p in enumerate(positionals):
            if p.required:
                before = " ".join(_placeholder(q) for q in positionals[:i])
                yield pytest.param(cmd, f"/{name} {before}".rstrip(), f"missing <{p.name}>",
                                   id=f"{name}-missing-{p.name}")
        if not any(isinstance(p, Rest) for p in positionals):
            full = " ".join(_placeholder(p) for p in positionals)
            yield pytest.param(cmd, f"/{name} {full} surplus".replace("  ", " "),
                               "unexpected extra argument 'surplus'", id=f"{name}-extra-argument")
        for opt in opts:
            if opt.switch:
                yield pytest.param(cmd, f"/{name} {opt.flag}=yes", f"{opt.flag} takes no value",
                                   id=f"{name}-{opt.flag[2:]}-with-value")
                continue
            yield pytest.param(cmd, f"/{name} {opt.flag}", f"{opt.flag} needs a value",
                               id=f"{name}-{opt.flag[2:]}-without-value")
            yield pytest.param(cmd, f"/{name} {opt.flag}=", f"{opt.flag} needs a value",
                               id=f"{name}-{opt.flag[2:]}-empty-equals")
        for i, p in enumerate(positionals):
            if isinstance(p, Arg) and p.kind is int:
                before = " ".join(_placeholder(q) for q in positionals[:i])
                yield pytest.param(cmd, f"/{name} {before} many", f"<{p.name}> must be a whole "
                                   "number, got 'many'", id=f"{name}-{p.name}-not-integer")
                yield pytest.param(cmd, f"/{name} {before} 2.5", f"<{p.name}> must be a whole "
                                   "number", id=f"{name}-{p.name}-fraction")
                if p.low is not None:
                    yield pytest.param(cmd, f"/{name} {before} {p.low - 1}",
                                       f"<{p.name}> must be between {p.low} and {p.high}",
                                       id=f"{name}-{p.name}-below-range")
                if p.high is not None:
                    yield pytest.param(cmd, f"/{name} {before} {p.high + 1}",
                                       f"<{p.name}> must be between {p.low} and {p.high}",
                                       id=f"{name}-{p.name}-above-range")
    # Argument values a command itself rejects after parsing.
    agents = next(c for c in REGISTRY if c.name == "agents")
    yield pytest.param(agents, "/agents everything", "expected nothing or 'all'",
                       id="agents-bad-which")


BAD_ARGUMENT_CASES = list(bad_argument_cases())


def test_registry_has_the_agent_commands_and_no_duplicates():
    assert EXPECTED_COMMANDS <= set(NAMES)  # more may come (/approve, /cron ...): all covered
    assert len(NAMES) == len(set(NAMES))


def test_every_command_has_bad_argument_cases():
    covered = {case.values[0].name for case in BAD_ARGUMENT_CASES}
    assert covered == set(NAMES)


@pytest.mark.parametrize("cmd,line,fragment", BAD_ARGUMENT_CASES)
async def test_bad_arguments_say_what_was_wrong_and_the_usage(quiet_app, cmd, line, fragment):
    reply = await run(quiet_app, line)
    assert_usage_error(reply, cmd, fragment)
    assert quiet_app.pool.fleet.everyone() == []  # nothing happened
    audit = await quiet_app.store.audit.recent(1)
    if cmd.name != "help":
        assert (audit[0].action, audit[0].ok) == (cmd.name, 0)
        assert audit[0].result == reply.plain()[:500]


def _agent_commands() -> list[Command]:
    return [c for c in REGISTRY
            if any(isinstance(p, Arg) and p.name == "agent" for p in c.params)]


def test_the_agent_commands_are_found():
    assert {"status", "ask", "pause", "resume", "stop", "kill", "logs", "cost"} <= {
        c.name for c in _agent_commands()}


@pytest.mark.parametrize("cmd", _agent_commands(), ids=lambda c: c.name)
async def test_unknown_agent_says_so_and_points_at_agents(fake_app, cmd):
    await spawn_idle(fake_app, "real")
    words = []
    for p in cmd.params:
        if isinstance(p, Opt) or (not p.required and p.name != "agent"):
            continue
        words.append("nosuch" if p.name == "agent" else _placeholder(p))
    reply = await run(fake_app, f"/{cmd.name} " + " ".join(words))
    assert not reply.ok
    assert reply.blocks[0].style == "error"
    assert "There is no agent 'nosuch'." in reply.plain()
    assert "/agents" in reply.plain()
    assert [r.name for r in fake_app.pool.fleet.everyone()] == ["real"]


async def test_spawn_with_unknown_parent(fake_app):
    reply = await run(fake_app, "/spawn child --parent nosuch do things")
    assert not reply.ok
    assert "There is no agent 'nosuch'." in reply.plain() and "/agents" in reply.plain()
    assert fake_app.pool.fleet.everyone() == []


# -- the dispatcher's own refusals ---------------------------------------------------------


async def test_unknown_command(quiet_app):
    reply = await run(quiet_app, "/frobnicate now")
    assert not reply.ok
    assert reply.plain() == "Unknown command /frobnicate.\nSend /help for the list of commands."
    row = (await quiet_app.store.audit.recent(1))[0]
    assert (row.action, row.args, row.ok) == ("frobnicate", "now", 0)


@pytest.mark.parametrize(("typed", "meant"), [("spwan", "spawn"), ("staus", "status"),
                                             ("killal", "killall"), ("aprove", "approve")])
async def test_a_mistyped_command_suggests_the_closest(quiet_app, typed, meant):
    reply = await run(quiet_app, f"/{typed} x")
    assert not reply.ok
    assert reply.plain() == (f"Unknown command /{typed}.\nDid you mean /{meant}? "
                             "Send /help for the list of commands.")
    help_reply = await run(quiet_app, f"/help {typed}")
    assert f"Did you mean /{meant}?" in help_reply.plain()


@pytest.mark.parametrize("text", ["hello there", "agents", "", "   \n", " spawn a x", "?"])
async def test_text_without_a_leading_slash(quiet_app, text):
    reply = await run(quiet_app, text)
    assert not reply.ok
    assert reply.blocks[0].text == "Commands start with '/'."
    assert "/help" in reply.plain()


async def test_a_bare_slash_is_an_unknown_command(quiet_app):
    reply = await run(quiet_app, "/")
    assert not reply.ok and "Unknown command" in reply.plain() and "/help" in reply.plain()


async def test_oversized_message_is_refused_before_parsing(fake_app):
    await spawn_idle(fake_app)
    text = "/ask a " + "x" * MAX_COMMAND_CHARS
    reply = await run(fake_app, text)
    assert not reply.ok
    assert f"{len(text):,} characters" in reply.plain()
    assert f"{MAX_COMMAND_CHARS:,}" in reply.plain()
    assert "file" in reply.plain()  # what to do instead
    assert len(await fake_app.store.turns.recent((await fake_app.pool.fleet.get("a")).id)) == 1


async def test_prompt_over_the_prompt_limit_is_refused_with_the_limit(fake_app):
    limit = fake_app.settings.max_prompt_chars
    reply = await run(fake_app, "/spawn big " + "y" * (limit + 1))
    assert not reply.ok
    assert f"{limit + 1:,} characters; the limit is {limit:,}" in reply.plain()
    assert fake_app.pool.fleet.everyone() == []


@pytest.mark.parametrize("cmd", REGISTRY, ids=lambda c: c.name)
@pytest.mark.parametrize("role", list(Role), ids=lambda r: r.name.lower())
async def test_roles(quiet_app, cmd, role):
    reply = await run_as(quiet_app, role, f"/{cmd.name} --bogus")
    if role < cmd.role:
        assert not reply.ok
        assert reply.plain().startswith(
            f"/{cmd.name} needs the {cmd.role.name.lower()} role; you are {role.name.lower()}.")
        assert "admin" in reply.plain()
        row = (await quiet_app.store.audit.recent(1))[0]
        assert (row.action, row.ok, row.user_id) == (cmd.name, 0, f"test:{role.name.lower()}")
    else:
        assert_usage_error(reply, cmd, "unknown option --bogus")  # got past the role check


async def test_viewer_cannot_spawn_or_kill_but_can_look(fake_app):
    r = await spawn_idle(fake_app)
    for line in ("/spawn b hi", "/kill a", "/ask a hi", "/pause a", "/stop a"):
        reply = await run_as(fake_app, Role.VIEWER, line)
        assert not reply.ok and "needs the operator role; you are viewer" in reply.plain(), line
    for line in ("/agents", "/status a", "/logs a", "/cost", "/help"):
        assert (await run_as(fake_app, Role.VIEWER, line)).ok, line
    assert r.state == "idle"
    assert len(await fake_app.store.turns.recent(r.id)) == 1
    assert [x.name for x in fake_app.pool.fleet.everyone()] == ["a"]


@pytest.mark.parametrize("line", ["/agents@mybot", "/agents@my_bot all", "/AGENTS", "/Agents"])
async def test_telegram_style_and_case_insensitive_command_names(fake_app, line):
    await spawn_idle(fake_app)
    reply = await run(fake_app, line)
    assert reply.ok, reply.plain()
    assert "a (" in reply.plain()


async def test_unexpected_exception_becomes_a_reply_with_a_log_ref(quiet_app, monkeypatch, caplog):
    async def broken(ref: str) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(quiet_app.pool.fleet, "get", broken)
    with caplog.at_level(logging.ERROR, logger="commands.dispatcher"):
        reply = await run(quiet_app, "/status a")
    assert not reply.ok
    ref = re.search(r"\(ref ([0-9a-f]{6})\)", reply.plain())
    assert ref, reply.plain()
    assert "kaboom" not in reply.plain()  # internals stay in the log
    assert any(f"ref={ref.group(1)}" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_a_failing_audit_write_does_not_fail_the_command(quiet_app, monkeypatch, caplog):
    async def broken(**kw: object) -> int:
        raise StoreUnavailable("db", "disk I/O error")

    monkeypatch.setattr(quiet_app.store.audit, "record", broken)
    with caplog.at_level(logging.WARNING, logger="commands.dispatcher"):
        reply = await run(quiet_app, "/agents")
    assert reply.ok
    assert any("audit write failed" in r.getMessage() for r in caplog.records)


# -- store failures through the dispatcher ---------------------------------------------------


async def test_store_error_in_a_read_becomes_an_error_reply(quiet_app, monkeypatch):
    async def broken(agent_id: str | None = None) -> list[object]:
        raise StoreUnavailable(str(quiet_app.settings.db_path), "disk I/O error")

    monkeypatch.setattr(quiet_app.store.turns, "totals_by_agent", broken)
    reply = await run(quiet_app, "/status")
    assert not reply.ok
    assert "The state database failed" in reply.plain()
    assert "disk I/O error" in reply.plain()
    assert "disk space" in reply.plain()


async def test_full_disk_during_spawn_is_an_error_reply_and_nothing_is_half_done(fake_app):
    first = await spawn_idle(fake_app, "before")
    db = fake_app.store.db
    async with db.transaction() as conn:
        async with conn.execute("PRAGMA page_count") as cur:
            pages = (await cur.fetchone())[0]
        await conn.execute(f"PRAGMA max_page_count = {pages}")
    try:
        # A prompt bigger than the free space in the file's pages: the INSERT needs new pages.
        reply = await run(fake_app, "/spawn after " + "z" * 60_000)
        assert not reply.ok
        assert "The state database failed" in reply.plain()
        assert "full" in reply.plain()
        assert "disk space" in reply.plain()
        assert await fake_app.store.agents.find("after") is None
        assert [r.name for r in fake_app.pool.fleet.everyone()] == ["before"]
    finally:
        async with db.transaction() as conn:
            await conn.execute("PRAGMA max_page_count = 1073741823")
    # The earlier agent is intact and the system works again once there is room.
    assert (await fake_app.store.agents.get(first.id)).state == "idle"
    reply = await run(fake_app, "/spawn after hello again")
    assert reply.ok, reply.plain()


# -- /help ----------------------------------------------------------------------------------------


async def test_help_lists_every_command(quiet_app):
    reply = await run(quiet_app, "/help")
    assert reply.ok
    text = reply.plain()
    for cmd in REGISTRY:
        assert usage_line(cmd.name, cmd.params) in text, cmd.name
        assert cmd.summary in text, cmd.name
    assert "/help <command>" in text


@pytest.mark.parametrize("cmd", REGISTRY, ids=lambda c: c.name)
async def test_help_describes_one_command(quiet_app, cmd):
    for line in (f"/help {cmd.name}", f"/help /{cmd.name}"):
        reply = await run(quiet_app, line)
        assert reply.ok, reply.plain()
        text = reply.plain()
        assert text.startswith(usage_of(cmd))
        assert cmd.summary in text
        for p in cmd.params:
            assert p.help in text, p
        for example in cmd.examples:
            assert example in text
        assert f"Needs role: {cmd.role.name.lower()}" in text


async def test_help_for_an_unknown_command(quiet_app):
    reply = await run(quiet_app, "/help nosuch")
    assert not reply.ok
    assert reply.plain() == "There is no command /nosuch.\nSend /help for the list of commands."


async def test_help_is_open_to_viewers(quiet_app):
    assert (await run_as(quiet_app, Role.VIEWER, "/help spawn")).ok


# -- happy paths ---------------------------------------------------------------------------------


async def test_spawn_starts_an_agent_that_answers(fake_app):
    reply = await run(fake_app, "/spawn alpha fix the tests")
    assert reply.ok, reply.plain()
    runner = await fake_app.pool.fleet.get("alpha")
    assert reply.plain() == f"Spawned alpha ({runner.id}) in {runner.cwd}"
    commands = [b.command for row in reply.buttons for b in row]
    assert commands == [f"/status {runner.id}", f"/logs {runner.id}", f"/pause {runner.id}",
                        f"/stop {runner.id}", f"/kill {runner.id}"]
    confirmed = {b.command for row in reply.buttons for b in row if b.confirm}
    assert confirmed == {f"/stop {runner.id}", f"/kill {runner.id}"}  # destructive: confirm
    assert Path(runner.cwd).is_dir()
    assert Path(runner.cwd).is_relative_to(fake_app.settings.workspaces)
    await turns_done(fake_app, runner, 1)
    [turn] = await fake_app.store.turns.recent(runner.id)
    assert (turn.status, turn.prompt, turn.result_text) == ("ok", "fix the tests",
                                                            "ECHO: fix the tests")
    assert turn.session_id and turn.session_id == runner.session_id


async def test_spawn_options(fake_app, tmp_path):
    reply = await run(fake_app, f'/spawn beta --model=opus --cwd "{tmp_path}" --mode plan go')
    assert reply.ok, reply.plain()
    runner = await fake_app.pool.fleet.get("beta")
    assert (runner.model, runner.cwd, runner.permission_mode) == ("opus", str(tmp_path.resolve()),
                                                                  "plan")
    await turns_done(fake_app, runner, 1)
    costs = await fake_app.store.turns.totals_by_model(runner.id)
    assert [c.key for c in costs] == ["opus"]  # the fake reports the model it was given


async def test_spawn_prompt_is_verbatim(fake_app):
    prompt = 'keep "these quotes"\nand  this   spacing'
    runner = await spawn_idle(fake_app, "v", prompt)
    [turn] = await fake_app.store.turns.recent(runner.id)
    assert turn.prompt == prompt
    assert turn.result_text == f"ECHO: {prompt}"


async def test_spawn_child_and_kill_takes_the_subtree(fake_app):
    parent = await spawn_idle(fake_app, "parent")
    reply = await run(fake_app, "/spawn kid --parent parent hi")
    assert reply.ok, reply.plain()
    kid = await fake_app.pool.fleet.get("kid")
    assert kid.parent_id == parent.id
    await turns_done(fake_app, kid, 1)
    assert f"child of {parent.id}" in (await run(fake_app, "/agents")).plain()
    reply = await run(fake_app, "/kill parent")
    assert reply.ok
    assert reply.plain().startswith("Killed 2 agent(s):")
    assert {parent.state, kid.state} == {"killed"}


async def test_spawn_duplicate_live_name(fake_app):
    await spawn_idle(fake_app, "dup")
    reply = await run(fake_app, "/spawn dup again")
    assert not reply.ok
    assert reply.plain() == ("An agent named 'dup' is already running.\n"
                             "Pick another name, or /kill dup first.")
    assert len(fake_app.pool.fleet.everyone()) == 1


async def test_spawn_reuses_the_name_of_a_killed_agent(fake_app):
    old = await spawn_idle(fake_app, "dup")
    assert (await run(fake_app, "/kill dup")).ok
    new = await spawn_idle(fake_app, "dup", "second life")
    assert new.id != old.id
    assert (await fake_app.pool.fleet.get("dup")) is new  # the live one wins the name


@pytest.mark.parametrize("name", ["9lives", "-x", "a/b", "a" * 41, "ü", "a:b"])
async def test_spawn_invalid_name(fake_app, name):
    reply = await run(fake_app, f"/spawn {name} hello")
    cmd = next(c for c in REGISTRY if c.name == "spawn")
    assert not reply.ok
    assert "is not a valid agent name" in reply.plain()
    assert "start with a letter" in reply.plain()
    assert usage_of(cmd) in reply.plain()
    assert fake_app.pool.fleet.everyone() == []


async def test_spawn_cwd_that_does_not_exist(fake_app, tmp_path):
    missing = tmp_path / "nope"
    reply = await run(fake_app, f"/spawn a --cwd {missing} hello")
    assert not reply.ok
    assert f"--cwd {missing} is not an existing directory" in reply.plain()
    assert "Usage: /spawn" in reply.plain()
    assert fake_app.pool.fleet.everyone() == []


async def test_spawn_cwd_that_is_a_file(fake_app, tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    reply = await run(fake_app, f"/spawn a --cwd {f} hello")
    assert not reply.ok and "is not an existing directory" in reply.plain()


async def test_spawn_unknown_permission_mode(fake_app):
    reply = await run(fake_app, "/spawn a --mode yolo hello")
    assert not reply.ok
    assert "unknown permission mode 'yolo'" in reply.plain()
    assert "acceptEdits" in reply.plain()  # the valid choices


@pytest.mark.parametrize("line", ["/spawn a", "/spawn a   ", "/spawn a --model sonnet",
                                  "/spawn a\n\n"])
async def test_spawn_empty_prompt(quiet_app, line):
    reply = await run(quiet_app, line)
    cmd = next(c for c in REGISTRY if c.name == "spawn")
    assert_usage_error(reply, cmd, "missing <prompt> (what the agent should do)")


async def test_pool_refuses_a_blank_prompt(fake_app):
    """The parser never hands over a blank Rest; the pool still refuses one from other callers."""
    with pytest.raises(InvalidRequest, match="the prompt is empty"):
        await fake_app.pool.spawn("a", "   \n ")
    assert fake_app.pool.fleet.everyone() == []


async def test_agents(fake_app):
    reply = await run(fake_app, "/agents")
    assert reply.ok
    assert reply.plain() == "No agents running. Start one with /spawn <name> <prompt>."
    a = await spawn_idle(fake_app, "a")
    b = await spawn_idle(fake_app, "b")
    reply = await run(fake_app, "/agents")
    assert reply.blocks[0].text == "2 agent(s)"
    assert [blk.text for blk in reply.blocks[1:]] == [f"a ({a.id}) — idle", f"b ({b.id}) — idle"]
    assert len(reply.buttons) == 2
    assert (await run(fake_app, "/kill a")).ok
    reply = await run(fake_app, "/agents")
    assert reply.blocks[0].text == "1 agent(s)" and f"a ({a.id})" not in reply.plain()
    reply = await run(fake_app, "/agents all")
    assert reply.blocks[0].text == "2 agent(s)"
    assert f"a ({a.id}) — killed" in reply.plain()
    assert len(reply.buttons) == 1  # no buttons for the dead


async def test_status_fleet_and_agent(fake_app):
    reply = await run(fake_app, "/status")
    assert reply.ok and reply.plain().startswith(
        "Switchboard: no live agents. Spent $0.0000 in all. Database ")
    r = await spawn_idle(fake_app, "a", "hello")
    reply = await run(fake_app, "/status")
    assert reply.plain().startswith("Switchboard: 1 idle. Spent $0.0010 in all. Database ")
    # The database's size, and how raw events are bounded (settings' defaults).
    # Then this worker, the one on SQLite: the coordinator, its agents, memory, heartbeat.
    assert re.search(r"Database \d+\.\d MB \(raw events kept 7 days, 5,000 per agent\)\.\n"
                     r"Kill switch: off\.\nHost \S+ \(pid \d+, coordinator, this one\): "
                     r"1 agent\(s\), \d+\.\d GB free, last heartbeat \d+s ago\.$",
                     reply.plain()), reply.plain()
    for ref in ("a", r.id):
        reply = await run(fake_app, f"/status {ref}")
        assert reply.ok
        text = reply.plain()
        assert reply.blocks[0].text == f"a ({r.id}) — idle"
        for line in ("state: idle", f"model: {MODEL}", f"cwd: {r.cwd}",
                     f"session: {r.session_id}", "turns: 1, cost: $0.0010, queued: 0",
                     f"pid: {r.process.cli_pid} (launcher {r.process.launcher_pid})",
                     "last answer: ECHO: hello"):
            assert line in text, (line, text)
        assert reply.buttons


async def test_ask_runs_a_new_turn_in_the_same_process(fake_app):
    r = await spawn_idle(fake_app)
    pid = r.process.cli_pid
    reply = await run(fake_app, "/ask a what now?")
    assert reply.ok
    assert reply.plain() == "Sent to a; it runs now."
    await turns_done(fake_app, r, 2)
    last = (await fake_app.store.turns.recent(r.id))[0]
    assert last.result_text == "ECHO: what now?"
    assert r.process.cli_pid == pid


async def test_ask_while_busy_queues(fake_app):
    r = await spawn_idle(fake_app)
    assert (await run(fake_app, "/ask a SLEEP 0.5: first")).ok
    await wait_for(lambda: r.busy, 5, "busy")
    reply = await run(fake_app, "/ask a second")
    assert reply.plain() == "Sent to a; it runs after 1 queued message(s)."
    await turns_done(fake_app, r, 3)
    results = [t.result_text for t in await fake_app.store.turns.recent(r.id)]
    assert results == ["ECHO: second", "ECHO: first", "ECHO: hello"]


async def test_ask_keeps_the_text_verbatim(fake_app):
    r = await spawn_idle(fake_app)
    text = "line 'one'\n  \"line\" two"
    assert (await run(fake_app, f"/ask {r.id} {text}")).ok
    await turns_done(fake_app, r, 2)
    assert (await fake_app.store.turns.recent(r.id))[0].prompt == text


async def test_logs_show_the_answer(fake_app):
    r = await spawn_idle(fake_app, "a", "hello logs")
    reply = await run(fake_app, "/logs a")
    assert reply.ok
    assert reply.blocks[0].text.startswith("Last ") and reply.blocks[0].text.endswith("of a")
    body = reply.blocks[1].text
    assert reply.blocks[1].style == "code"
    assert "[prompt] hello logs" in body
    assert "ECHO: hello logs" in body
    assert f"session {r.session_id}" in body
    reply = await run(fake_app, "/logs a 1")
    assert reply.blocks[0].text == "Last 1 event(s) of a"
    assert reply.blocks[1].text == "[result] [success] ECHO: hello logs"


async def test_cost_stores_per_turn_deltas(fake_app):
    """The fake's total_cost_usd (and modelUsage) is cumulative per process, +0.001 a turn: each
    turn must be charged 0.001, not the running total."""
    r = await spawn_idle(fake_app, "a", "one")
    assert (await run(fake_app, "/ask a two")).ok
    await turns_done(fake_app, r, 2)
    turns = await fake_app.store.turns.recent(r.id)
    assert [t.cost_usd for t in turns] == [pytest.approx(0.001), pytest.approx(0.001)]
    assert [(t.input_tokens, t.output_tokens) for t in turns] == [(10, 12), (10, 12)]
    rows = await fake_app.store.db.fetchall(
        "SELECT model, cost_usd, input_tokens, output_tokens FROM costs WHERE agent_id = ?",
        (r.id,))
    assert [tuple(row) for row in rows] == [(MODEL, pytest.approx(0.001), 10, 12)] * 2
    for line in ("/cost", "/cost a"):
        reply = await run(fake_app, line)
        assert reply.ok
        text = reply.plain()
        assert "total: $0.0020 over 2 turn(s)" in text
        assert "a: $0.0020 (2 turns, 20 in / 24 out tokens)" in text
        assert f"by model:\n  {MODEL}: $0.0020 (20 in / 24 out tokens)" in text
    assert (await run(fake_app, "/cost a")).blocks[0].text == "Spend of a"
    assert (await run(fake_app, "/cost")).blocks[0].text == "Spend, all agents"


async def test_cost_with_no_spend(quiet_app):
    reply = await run(quiet_app, "/cost")
    assert reply.ok
    assert "total: $0.0000 over 0 turn(s)" in reply.plain()


async def test_pause_and_resume(fake_app):
    r = await spawn_idle(fake_app)
    members = r.process.members()
    reply = await run(fake_app, "/pause a")
    assert reply.ok, reply.plain()
    assert reply.plain() == f"Paused a: {len(members)} process(es) frozen."
    assert [b.command for row in reply.buttons for b in row] == [f"/resume {r.id}"]
    assert r.state == "paused"
    assert {psutil.Process(p).status() for p in members} == {psutil.STATUS_STOPPED}

    again = await run(fake_app, "/pause a")
    assert not again.ok
    assert again.plain() == "Cannot pause a: it is paused.\nSend /status a to see what it is doing."

    reply = await run(fake_app, "/ask a while paused")
    assert reply.ok
    assert "paused: the message runs when you /resume it" in reply.plain()
    await asyncio.sleep(0.3)
    assert len(await fake_app.store.turns.recent(r.id)) == 1  # held while paused

    reply = await run(fake_app, "/resume a")
    assert reply.ok
    assert reply.plain().startswith("Resumed a; it is ")
    assert all(psutil.Process(p).status() != psutil.STATUS_STOPPED for p in members)
    await turns_done(fake_app, r, 2)
    assert (await fake_app.store.turns.recent(r.id))[0].result_text == "ECHO: while paused"

    again = await run(fake_app, "/resume a")
    assert not again.ok and again.plain().startswith("Cannot resume a: it is idle.")


async def test_stop_then_ask_restarts_on_the_same_session(fake_app):
    r = await spawn_idle(fake_app)
    session, old_pid = r.session_id, r.process.cli_pid
    reply = await run(fake_app, "/stop a")
    assert reply.ok
    assert reply.plain() == "Stopped a. /ask a <text> restarts it on its session."
    assert r.state == "stopped"
    await wait_for(lambda: not processes_with_tag(r.tag), 5, "no processes after stop")
    assert "a (" not in (await run(fake_app, "/agents")).plain()
    assert "stopped" in (await run(fake_app, "/agents all")).plain()

    again = await run(fake_app, "/stop a")
    assert not again.ok and again.plain().startswith("Cannot stop a: it is stopped.")

    reply = await run(fake_app, "/ask a are you back?")
    assert reply.ok
    assert "not running: it restarts and resumes its session" in reply.plain()
    await turns_done(fake_app, r, 2)
    assert r.session_id == session
    assert r.process.cli_pid != old_pid
    last = (await fake_app.store.turns.recent(r.id))[0]
    assert (last.result_text, last.session_id) == ("ECHO: are you back?", session)


async def test_stop_interrupts_a_running_turn(fake_app):
    r = await spawn_idle(fake_app)
    assert (await run(fake_app, "/ask a SLEEP 30")).ok
    await wait_for(lambda: r.busy and r.state == "working", 5, "working")
    reply = await asyncio.wait_for(run(fake_app, "/stop a"), 15)
    assert reply.ok
    assert r.state == "stopped"
    last = (await fake_app.store.turns.recent(r.id))[0]
    assert last.status == "interrupted"


async def test_kill(fake_app):
    r = await spawn_idle(fake_app, "a", "BG")
    [turn] = await fake_app.store.turns.recent(r.id)
    bg_pid = host_pid(r, int(turn.result_text.split()[-1]))
    assert psutil.pid_exists(bg_pid)
    reply = await run(fake_app, "/kill a")
    assert reply.ok
    assert reply.plain() == "Killed 1 agent(s): a."
    assert r.state == "killed"
    assert processes_with_tag(r.tag) == []
    await wait_for(lambda: not psutil.pid_exists(bg_pid)
                   or psutil.Process(bg_pid).status() == psutil.STATUS_ZOMBIE, 5, "bg gone")
    again = await run(fake_app, "/kill a")
    assert again.ok and again.plain() == "a was already killed."
    reply = await run(fake_app, "/ask a hello?")
    assert not reply.ok
    assert reply.plain().startswith("Cannot message a: it is killed.")
    reply = await run(fake_app, "/status a")  # still inspectable
    assert reply.ok and "state: killed" in reply.plain() and not reply.buttons


async def test_status_of_a_crashed_agent_shows_the_error_and_ask_restarts_it(fake_app):
    assert (await run(fake_app, "/spawn a CRASH")).ok
    r = await fake_app.pool.fleet.get("a")
    await wait_for(lambda: r.state == "failed", 15, "failed")
    reply = await run(fake_app, "/status a")
    assert reply.ok
    assert "state: failed" in reply.plain()
    assert "last error:" in reply.plain() and "fake crash: boom" in reply.plain()
    assert "a (" in (await run(fake_app, "/agents all")).plain()
    assert "a (" not in (await run(fake_app, "/agents")).plain()
    reply = await run(fake_app, "/ask a back again")
    assert "not running: it restarts and resumes its session" in reply.plain()
    await turns_done(fake_app, r, 2)
    turns = await fake_app.store.turns.recent(r.id)
    assert [t.status for t in turns] == ["ok", "failed"]
    # The operator's message whose turn failed is not sent again behind the operator's back
    # (an agent's would be: docs/bus.md); the next turn is the new message alone.
    assert turns[0].prompt == "back again" and turns[0].result_text == "ECHO: back again"


# -- audit ---------------------------------------------------------------------------------------


async def test_every_command_writes_an_audit_row(fake_app):
    """Each command, /help included, leaves a row with who, from where, what, and the result."""
    await spawn_idle(fake_app, "a")
    lines = ["/agents", "/agents all", "/status", "/status a", "/ask a hi", "/logs a 5",
             "/cost", "/cost a", "/pause a", "/resume a", "/stop a", "/kill a", "/help"]
    for line in lines:
        await run(fake_app, line)
    rows = list(reversed(await fake_app.store.audit.recent(100)))
    assert [(row.action, row.args) for row in rows] == [("spawn", "a hello")] + [
        (line.split(" ", 1)[0][1:], line.split(" ", 1)[1] if " " in line else "")
        for line in lines
    ]
    assert {row.action for row in rows} == EXPECTED_COMMANDS
    for row in rows:
        assert (row.platform, row.user_id, row.user_name) == (ADMIN.platform, ADMIN.id, ADMIN.name)
        assert row.ok == 1, row
        assert row.result
        assert row.at > 0


async def test_audit_records_failures_and_their_text(quiet_app):
    reply = await run(quiet_app, "/pause ghost")
    row = (await quiet_app.store.audit.recent(1))[0]
    assert (row.action, row.args, row.ok) == ("pause", "ghost", 0)
    assert row.result == reply.plain()


async def test_dispatcher_with_a_custom_registry(quiet_app):
    """A Dispatcher built on a subset knows only those commands."""
    help_cmd = next(c for c in REGISTRY if c.name == "help")
    d = Dispatcher((help_cmd,))
    ctx = quiet_app.context(ADMIN)
    assert (await d.dispatch(ctx, "/help")).ok
    assert "Unknown command /agents." in (await d.dispatch(ctx, "/agents")).plain()


# Regression: spawn checked the name, then inserted; concurrent spawns raced into the unique
# index and the loser was told the database failed.
async def test_concurrent_spawns_of_one_name_get_already_running(fake_app):
    replies = await asyncio.gather(*(run(fake_app, "/spawn dup hi") for _ in range(3)))
    assert sum(r.ok for r in replies) == 1
    for reply in replies:
        if not reply.ok:
            assert "An agent named 'dup' is already running." in reply.plain()
