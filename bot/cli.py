"""The `switchboard` command: run, status, doctor. Configures logging and signals (only here)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import difflib
import getpass
import importlib.metadata
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from bot.doctor import NO_CREDENTIALS_FIX, cmd_doctor, has_credentials, killswitch_text
from bot.logs import JsonFormatter
from commands.dispatcher import REGISTRY, describe
from commands.render import hosts_text, money
from supervisor import heap
from supervisor.config import Settings
from supervisor.errors import ConfigError
from supervisor.persistence.offline import (
    halt_state,
    has_database,
    kill_from_shell,
    recorded_agents,
    recorded_hosts,
    running_pid,
)
from supervisor.redact import SECRETS
from supervisor.redact import install as install_redaction

logger = logging.getLogger("switchboard")


SUBCOMMANDS = ("run", "demo", "status", "doctor", "kill", "backup", "restore")

USAGE = """usage: switchboard <command> [options]

  run       start Switchboard (the console on a terminal; Telegram and Slack if configured)
  demo      see the whole flow in a minute, with no key: a real agent on a scripted model
  status    the agents recorded here, and the kill switch
  doctor    check credentials, the claude CLI, the sandbox, settings, policy and front ends
  kill      KILL SWITCH: SIGKILL every agent now, even with the supervisor hung
  backup    save a snapshot of the database (restore puts one back)

switchboard <command> --help for its options; switchboard --help for everything, with every
operator command; the README and docs/commands.md for the rest."""


def version() -> str:
    try:
        return importlib.metadata.version("switchboard")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


def _epilog() -> str:
    lines = ["operator commands (console, Telegram, Slack):"]
    lines += ["  " + describe(c).replace("\n", "\n    ") for c in REGISTRY]
    lines += [
        "",
        "configuration: environment variables (SWITCHBOARD_HOME, default ~/.switchboard;",
        "ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL, or the CLI's own login)",
        "and an optional $SWITCHBOARD_HOME/switchboard.toml (see README).",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="switchboard",
        description="Run a fleet of Claude Code agents under supervision and steer it from a "
        "console, Telegram or Slack.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"switchboard {version()}")
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(SUBCOMMANDS) + "}")
    run = sub.add_parser("run", help="start the supervisor (with the console on a terminal)")
    group = run.add_mutually_exclusive_group()
    group.add_argument("--console", dest="console", action="store_true", default=None,
                       help="attach the console front end even without a terminal")
    group.add_argument("--headless", dest="console", action="store_false",
                       help="no console; run until SIGTERM/SIGINT")
    demo = sub.add_parser(
        "demo", help="a one-minute tour with no key and no network: the real claude CLI on a "
        "scripted local model, showing a permission request, a question, a message between "
        "two agents and a long answer")
    demo.add_argument("--keep", action="store_true",
                      help="keep the demo's data directory (printed at the end)")
    status = sub.add_parser("status", help="show the agents recorded in the data directory "
                            "and the kill switch")
    status.add_argument("--check", action="store_true",
                        help="only say whether the supervisor runs; exit 0 if it does, 1 if "
                        "not (for health checks)")
    sub.add_parser("doctor", help="check credentials, the claude CLI, the sandbox, the database, "
                   "the policy file, each front end's settings and the kill switch")
    kill = sub.add_parser(
        "kill", help="KILL SWITCH: halt Switchboard and SIGKILL every agent, even if the "
        "supervisor is hung (turn it off from a front end: /killswitch off confirm)")
    kill.add_argument("--reason", default="", help="recorded with the trigger")
    backup = sub.add_parser(
        "backup", help="save a consistent snapshot of the database and the shared context "
        "now (to the configured bucket unless --to is given)")
    backup.add_argument("--to", default=None, metavar="DIR|gs://bucket/prefix",
                        help="a directory, or another bucket and prefix")
    restore = sub.add_parser(
        "restore", help="replace the database with the newest good snapshot (the supervisor "
        "must be stopped; the database there is kept beside it)")
    restore.add_argument("--from", dest="source", default=None,
                         metavar="DIR|gs://bucket/prefix",
                         help="a directory, or another bucket and prefix")
    return parser


def mistyped(argv: list[str]) -> str | None:
    """What to say about a first word that is no subcommand (argparse's own message lists
    them all but guesses nothing), or None when it is one, or an option."""
    if not argv or argv[0].startswith("-") or argv[0] in SUBCOMMANDS:
        return None
    close = difflib.get_close_matches(argv[0], SUBCOMMANDS, n=1, cutoff=0.5)
    hint = f" Did you mean `switchboard {close[0]}`?" if close else ""
    return (f"switchboard: {argv[0]!r} is not a command.{hint} The commands: "
            f"{', '.join(SUBCOMMANDS)} (switchboard --help for more).")


# Noise control only; the redactor, not this, is what keeps secrets out. These log every
# request at INFO (httpx: each long poll, Bot API URL included): WARNING unless DEBUG is asked
# for.
CHATTY_LOGGERS = ("httpx", "urllib3", "google.auth", "slack_sdk", "slack_bolt")
# These log each SQL statement or socket event, with parameters, at DEBUG: never useful here.
TRACE_LOGGERS = ("aiosqlite", "httpcore")


def json_logs(settings: Settings) -> bool:
    """Whether stderr gets JSON lines: yes unless asked for text, or (auto) stderr is a
    terminal: a person reads a terminal; a container's log driver or journald reads everything
    else."""
    if settings.log_format != "auto":
        return settings.log_format == "json"
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return True


def configure_logging(settings: Settings, *, to_stderr: bool) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    SECRETS.add(*settings.secret_values())
    handlers: list[logging.Handler] = [logging.FileHandler(settings.log_path)]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    level = getattr(logging, settings.log_level, logging.INFO)
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        handlers=handlers,
        force=True,
    )
    # One format per sink, whoever started us: the log file is always JSON lines unless text
    # is asked for (a file that switched format with each start would read as neither);
    # stderr is text on a terminal, JSON lines into a pipe.
    sinks = [(handlers[0], settings.log_format != "text")]
    if to_stderr:
        sinks.append((handlers[1], json_logs(settings)))
    for handler, as_json in sinks:
        if as_json:
            handler.setFormatter(JsonFormatter(SECRETS))
    for handler in handlers:  # after basicConfig, which sets their formatter
        install_redaction(handler, SECRETS)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if level > logging.DEBUG
                                         else logging.NOTSET)
    for name in TRACE_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.INFO))
    # An exception escaping a thread would go to stderr unredacted; send it through the log.
    threading.excepthook = _log_thread_crash


def _log_thread_crash(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread else "?"
    logger.error("thread crashed thread=%s error=%s", name, args.exc_type.__name__,
                 exc_info=args.exc_value)


PR_SET_DUMPABLE = 4


def make_undumpable() -> str | None:
    """Mark this process non-dumpable (Linux): no core dump, and no other process of our user
    (an agent, say) may read our /proc/<pid>/environ, memory or file descriptors, where every
    token lives. Agents are unaffected: exec makes a process dumpable again. Returns why it
    could not be done, or None."""
    if not sys.platform.startswith("linux"):
        return f"not on Linux ({sys.platform})"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return f"prctl failed: errno {ctypes.get_errno()}"
    except (OSError, AttributeError) as exc:
        return f"prctl unavailable: {exc}"
    return None


def announcer(settings: Settings, *, console: bool) -> Callable[[str], None]:
    """How `run` tells the operator what it does. On stderr in JSON mode, a line of its own
    would break "one object a line", so it is a log line there (stderr and the log file)."""
    if not console and json_logs(settings):
        return lambda text: logger.info("%s", text)
    return lambda text: print(text, file=sys.stderr, flush=True)


async def serve(settings: Settings, *, console: bool) -> int:
    """Run until a signal (or the console's /quit); then shut down in two phases."""
    loop = asyncio.get_running_loop()
    say = announcer(settings, console=console)
    from bot.app import Switchboard  # the whole supervisor: only `run` needs it

    app = Switchboard(settings)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, app.on_signal, sig)
    async with app:
        assert app.pool is not None
        heap.settle()  # started: what exists now lives to the end (supervisor/heap.py)
        if app.pool.recovery and (app.pool.recovery.resumed or app.pool.recovery.swept_pids):
            rec = app.pool.recovery
            msg = (f"recovered {len(rec.resumed)} agent(s); ended {len(rec.swept_pids)} leftover"
                   " process(es)")
            if console:
                print(msg)
            else:
                say(msg)
        if settings.telegram_token:
            from bot.telegram.front import run_telegram

            await app.add_task_service("telegram", lambda: run_telegram(app.telegram_context()),
                                       coordinator_only=True)
        if settings.slack_bot_token:
            if settings.slack_channel:
                from bot.slack.front import run_slack

                await app.add_task_service("slack", lambda: run_slack(app.slack_context()),
                                           coordinator_only=True)
            else:
                logger.error("slack: SLACK_BOT_TOKEN is set but SLACK_CHANNEL is not; running "
                             "without Slack (see docs/slack.md)")
        # Before the console: once its prompt is up, only it writes to the terminal.
        if app.listener is not None:
            text = (f"health and metrics on {app.listener.url} (/healthz /readyz /metrics); "
                    "the web console there: /web gives a sign-in link")
            if console:
                print(text)
            else:
                say(text)
        if console:
            from bot.console import Console

            await app.add_task_service("console", lambda: Console(
                app.console_context(), on_exit=app.request_stop).run())
        else:
            say(f"switchboard running headless (home {settings.home}); SIGTERM or SIGINT to "
                "stop")
        await app.run_until_stopped(say)
    return 0


def cmd_status(settings: Settings, check: bool = False) -> int:
    pid = running_pid(settings)
    if check:
        print(f"supervisor: {'running, pid ' + str(pid) if pid else 'not running'}")
        return 0 if pid else 1
    print(f"data directory: {settings.home}")
    print(f"supervisor: {'running, pid ' + str(pid) if pid else 'not running'}")
    print(killswitch_text(halt_state(settings)))
    if not has_database(settings):
        print("no agents yet (no database)")
        return 0

    agents = asyncio.run(recorded_agents(settings))
    if not agents:
        print("no agents yet")
    for r in agents:
        print(f"  {r.name:<20} {r.id}  {r.state:<9} {money(r.cost_usd):>9}  {r.cwd}")
    hosts = hosts_text(asyncio.run(recorded_hosts(settings)))
    if hosts:
        print(hosts)
    return 0


def cmd_kill(settings: Settings, reason: str) -> int:
    """Works without the supervisor's help: the trigger file (which a running supervisor acts
    on), the halt flag written straight into the database, and a direct sweep by agent tag."""
    by = f"{getpass.getuser()}@cli"
    done = kill_from_shell(settings, by, reason)
    for problem in done.problems:
        print(problem, file=sys.stderr)
    summary = done.summary
    print(summary)
    print("Turn it off from the console or a chat front end: /killswitch off confirm")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    wrong = mistyped(argv)
    if wrong:
        print(wrong, file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        print(USAGE)
        return 0
    if args.command == "demo":
        from bot.demo import cmd_demo  # its own settings: none of the operator's are read

        return cmd_demo(keep=args.keep)
    try:
        settings = Settings.load()
    except ConfigError as exc:
        print(f"switchboard: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.command == "status":
        return _to_a_pipe(lambda: cmd_status(settings, args.check))
    if args.command == "doctor":
        return _to_a_pipe(lambda: cmd_doctor(settings))
    if args.command == "kill":
        return cmd_kill(settings, args.reason)
    if args.command in ("backup", "restore"):
        return cmd_backup(settings, args.command, args.to if args.command == "backup"
                          else args.source)
    return cmd_run(settings, args.console)


def cmd_backup(settings: Settings, command: str, where: str | None) -> int:
    from supervisor.persistence import offline_backup
    from supervisor.persistence.remote import RemoteError
    from supervisor.persistence.snapshot import SnapshotError

    try:
        done = (offline_backup.backup if command == "backup" else offline_backup.restore)(
            settings, where)
    except (ConfigError, RemoteError, SnapshotError, OSError) as exc:
        print(f"switchboard {command}: {SECRETS(str(exc))}", file=sys.stderr)
        return 1
    for problem in done.problems:
        print(problem, file=sys.stderr)
    print(done.text)
    return 0


def _to_a_pipe(command: Callable[[], int]) -> int:
    """Run a command whose output may go to a reader that stops early (`| grep -q`, `| head`):
    a closed pipe ends it quietly, not with a BrokenPipeError traceback (also not at exit,
    when Python flushes stdout once more)."""
    try:
        code = command()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def cmd_run(settings: Settings, console: bool | None) -> int:
    not_protected = make_undumpable()  # the first thing `run` does
    if console is None:
        console = settings.console if settings.console is not None else sys.stdin.isatty()
    configure_logging(settings, to_stderr=not console)
    if not has_credentials(settings):
        # On the terminal as well as in the log: the first /spawn would fail otherwise.
        warning = f"no Claude credentials: agents will fail to start. To fix: {NO_CREDENTIALS_FIX}."
        logger.warning("%s", warning)
        if console:
            print(f"⚠ {warning}", file=sys.stderr, flush=True)
    if not_protected:
        logger.warning("could not make the supervisor non-dumpable: %s", not_protected)
    try:
        return asyncio.run(serve(settings, console=console))
    except ConfigError as exc:
        print(f"switchboard: {SECRETS(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the traceback goes through the redacting log
        logger.critical("switchboard run crashed", exc_info=True)
        print(f"switchboard: crashed ({SECRETS(type(exc).__name__ + ': ' + str(exc))}); "
              f"the traceback is in {settings.log_path}", file=sys.stderr)
        return 1
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()


if __name__ == "__main__":
    sys.exit(main())
