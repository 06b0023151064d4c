"""`switchboard doctor`: every check at once (data directory, credentials, the CLI, isolation,
the database, the policy file, each front end's settings, the kill switch), each problem named
with what to do."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from supervisor.config import Settings
from supervisor.errors import ConfigError, StoreFailed
from supervisor.guard.gateway import MAX_SOCKET_PATH, upstream_of
from supervisor.persistence.offline import (
    SQLITE_ONLY_OFF,
    HaltState,
    database_where,
    find_cli,
    halt_state,
    policy_problem,
    running_pid,
    schema_version,
)
from supervisor.process.cpugroup import doctor_text as cpu_group_text
from supervisor.process.network import mode_for, netns_problem
from supervisor.process.sandbox import Isolation
from supervisor.process.sandbox import describe as describe_isolation
from supervisor.process.sandbox import probe as probe_isolation
from supervisor.redact import SECRETS

NO_CREDENTIALS_FIX = ("set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or log in once with the "
                      "bundled CLI's `auth login` command as this user (its path is on the "
                      "`claude CLI` line of `switchboard doctor`); to see the whole flow "
                      "without a key first: `switchboard demo` (`make demo` in a checkout)")


class Doctor:
    """The doctor's report: every line through the redactor, and a count of the problems."""

    def __init__(self) -> None:
        self.problems = 0

    def say(self, text: str) -> None:
        print(SECRETS(text))

    def report(self, ok: bool, text: str) -> None:
        self.problems += 0 if ok else 1
        self.say(f"[{'ok' if ok else 'PROBLEM'}] {text}")


def cmd_doctor(settings: Settings) -> int:
    # Doctor quotes URLs, error messages and the CLI's output: all of it through the redactor.
    SECRETS.add(*settings.secret_values())
    doctor = Doctor()
    doctor.say(f"data directory: {settings.home}")
    _check_home(settings, doctor)
    _check_credentials(settings, doctor)
    _check_model_api(settings, doctor)
    cli = _check_cli(settings, doctor)
    _check_network(settings, _check_isolation(settings, cli, doctor), doctor)
    doctor.report(*cpu_group_text(settings.agent_cpu_group, settings.agent_nice))
    _check_database(settings, doctor)
    _check_policy(settings, doctor)
    _check_fronts(settings, doctor)
    _check_telegram(settings, doctor)
    doctor.say(killswitch_text(halt_state(settings)))
    listen = settings.http_listen
    doctor.say(f"http listener (/healthz /readyz /metrics): http://{listen[0]}:{listen[1]}"
               if listen else "http listener: off (set SWITCHBOARD_HTTP_PORT or PORT to turn "
               "it on)")
    doctor.say("all good" if not doctor.problems else f"{doctor.problems} problem(s) found")
    return 0 if not doctor.problems else 1


def killswitch_text(h: HaltState | None) -> str:
    """The kill switch's line for `switchboard status` and `doctor`."""
    if h is None:
        return "kill switch: off"
    since = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(h.at))}" if h.at else ""
    why = f" ({h.reason})" if h.reason else ""
    pending = " (trigger file; a running supervisor acts on it)" if h.pending else ""
    return (f"kill switch: ON{since}, by {h.by} via {h.via}{why}{pending}: agents are refused "
            "until an admin sends /killswitch off confirm from the console or a chat front end")


def has_credentials(settings: Settings) -> bool:
    """Whether agents will have credentials: a key or token, or the CLI's own login."""
    if settings.credential_source != "claude login":
        return True
    config_dir = settings.claude_config_dir or Path.home() / ".claude"
    return (config_dir / ".credentials.json").exists()


def _check_home(settings: Settings, doctor: Doctor) -> None:
    try:
        settings.home.mkdir(parents=True, exist_ok=True)
        probe = settings.home / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
        doctor.report(True, "data directory is writable")
    except OSError as exc:
        doctor.report(False, f"data directory is not writable: {exc}")


def _check_credentials(settings: Settings, doctor: Doctor) -> None:
    source = settings.credential_source
    if source == "claude login":
        config_dir = settings.claude_config_dir or Path.home() / ".claude"
        found = has_credentials(settings)
        doctor.report(found, f"credentials: the CLI's own login in {config_dir} "
                      + ("(found)" if found else f"— none found: {NO_CREDENTIALS_FIX}"))
    else:
        held = upstream_of(settings) is not None
        doctor.report(True, f"credentials: {source} is set; " + (
            "the model gateway holds it and agents get a token of their own" if held
            else "it is handed to agents"))
    if settings.anthropic_base_url:
        doctor.say(f"       using ANTHROPIC_BASE_URL={settings.anthropic_base_url}")


DEFAULT_API = "https://api.anthropic.com"
API_CHECK_TIMEOUT_S = 10.0


def _check_model_api(settings: Settings, doctor: Doctor) -> None:
    """Whether the model API accepts the key or token: one request that uses no tokens
    (GET /v1/models, the cheapest call the API has), labelled as such. The CLI's own login
    and an OAuth token are the CLI's to present, so they are not tried here."""
    if settings.anthropic_api_key:
        headers = {"x-api-key": settings.anthropic_api_key.value}
    elif settings.anthropic_auth_token:
        headers = {"Authorization": f"Bearer {settings.anthropic_auth_token.value}"}
    else:
        doctor.say("model API: not asked (the CLI presents its own login or OAuth token; "
                   "the first turn shows whether it is accepted)")
        return
    url = urlsplit((settings.anthropic_base_url or DEFAULT_API).rstrip("/"))
    where = url.hostname or "?"
    where += f":{url.port}" if _port(url) else ""
    label = f"model API: one request (GET /v1/models, uses no tokens) to {where}"
    if url.username is not None and "Authorization" not in headers:  # a proxy's own login
        pair = f"{unquote(url.username)}:{unquote(url.password or '')}".encode()
        headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
    netloc = url.netloc.rpartition("@")[2]
    request = urllib.request.Request(
        urlunsplit((url.scheme, netloc, f"{url.path}/v1/models", "limit=1", "")),
        method="GET", headers={**headers, "anthropic-version": "2023-06-01",
                               "user-agent": "switchboard-doctor"})
    try:
        with urllib.request.urlopen(request, timeout=API_CHECK_TIMEOUT_S) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
        detail = _api_error_text(exc)
        if status in (401, 403):
            doctor.report(False, f"{label}: the {settings.credential_source} was refused "
                          f"({status}{detail}). Copy it again from the Anthropic console, or "
                          "check ANTHROPIC_BASE_URL.")
        else:
            doctor.report(False, f"{label}: answered {status}{detail}; agents' turns will "
                          "likely fail too. Try again later, or check ANTHROPIC_BASE_URL.")
        return
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        doctor.report(False, f"{label}: cannot reach it ({reason}); agents need it. Check "
                      "the network, a proxy, or ANTHROPIC_BASE_URL.")
        return
    doctor.report(True, f"{label}: the {settings.credential_source} is accepted ({status})")


def _port(url: SplitResult) -> int | None:
    try:
        return url.port
    except ValueError:
        return None


def _api_error_text(exc: urllib.error.HTTPError) -> str:
    """`: <the API's own message>` from an error answer, if it gave one."""
    try:
        message = json.loads(exc.read(4096) or b"{}").get("error", {}).get("message")
    except (ValueError, AttributeError, OSError):
        return ""
    return f": {str(message)[:200]}" if message else ""


def _check_cli(settings: Settings, doctor: Doctor) -> Path | None:
    """The claude CLI agents run, if it starts."""
    try:
        cli = find_cli(settings)
        started = time.monotonic()
        out = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        ok = out.returncode == 0
        doctor.report(ok, f"claude CLI {cli} starts: {out.stdout.strip() or out.stderr.strip()} "
                      f"({took:.1f}s)")
    except (ConfigError, OSError, subprocess.TimeoutExpired) as exc:
        doctor.report(False, f"claude CLI: {exc}")
        return None
    return cli


def _check_isolation(settings: Settings, cli: Path | None, doctor: Doctor) -> Isolation:
    iso = probe_isolation(settings, cli)
    if iso.ok:
        doctor.report(True, f"isolation: {iso.detail}")
    elif settings.allow_unisolated_agents:
        doctor.report(True, f"isolation: {describe_isolation(iso, True)}")
        doctor.say(f"       to isolate agents: {iso.fix}")
    else:
        doctor.report(False, f"isolation: {describe_isolation(iso, False)}")
    return iso


def _check_network(settings: Settings, iso: Isolation, doctor: Doctor) -> None:
    """The model gateway, whether network namespaces can be made here, and the egress mode
    agents get (docs/gateway.md)."""
    up = upstream_of(settings)
    if up is not None:
        doctor.report(True, f"model gateway: on, forwarding to {up.url}; agents hold a token "
                      "of their own, never the key")
    elif not settings.model_gateway:
        doctor.say("model gateway: off (model_gateway = false): agents hold the key")
    else:
        doctor.say("model gateway: off: no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN to hold, "
                   "so agents get a copy of the CLI's login, which they can read "
                   "(docs/gateway.md)")
    netns = netns_problem(iso)
    doctor.say("network namespaces: " + ("can be made here" if netns is None
                                          else f"not available ({netns})"))
    sock = settings.run_dir / "gateway.sock"
    fits = len(os.fsencode(sock)) <= MAX_SOCKET_PATH
    mode, why = mode_for(settings, iso, sock if up is not None and fits else None)
    if not mode:
        doctor.report(False, f"{why}: agents are refused until it can, or egress = open")
    elif mode == "open":
        doctor.say(f"{why}: an agent reaches whatever this host reaches")
    else:
        allowed = ", ".join(settings.egress_allow) or "none"
        doctor.report(True, why + ("" if mode == "model-only" else
                                   f"; hosts allowed through the proxy: {allowed}"))


def _check_database(settings: Settings, doctor: Doctor) -> None:
    try:
        if running_pid(settings):
            doctor.report(True, "database in use by the running supervisor")
        else:
            version = asyncio.run(schema_version(settings))
            doctor.report(True, f"database {database_where(settings)} opens (schema version"
                                f" {version})")
    except StoreFailed as exc:
        doctor.report(False, f"database: {exc.cause}")
    if settings.database_url is not None:
        doctor.say(f"[info] {SQLITE_ONLY_OFF}")


def _check_policy(settings: Settings, doctor: Doctor) -> None:
    """The policy file as `run` reads it: a file `run` would refuse fails here first."""
    problem = policy_problem(settings)
    where = settings.policy_path or "the built-in default"
    if problem is None:
        doctor.report(True, f"policy: {where} is valid")
    else:
        doctor.report(False, f"policy: {problem}. `switchboard run` refuses to start with it: "
                      "fix the file (docs/policy.md), or unset policy_file / SWITCHBOARD_POLICY "
                      "for the built-in one")


def front_problems(settings: Settings) -> list[str]:
    """Each configured front end's missing settings, named, with what to set."""
    problems: list[str] = []
    if settings.slack_bot_token or settings.slack_app_token or settings.slack_channel:
        if not settings.slack_bot_token:
            problems.append("slack: SLACK_APP_TOKEN or SLACK_CHANNEL is set but SLACK_BOT_TOKEN "
                            "is not: Slack will not start. Set SLACK_BOT_TOKEN (xoxb-…), or "
                            "unset the others (docs/slack.md)")
        if not settings.slack_channel:
            problems.append("slack: SLACK_CHANNEL is not set: Slack will not start. Set it to "
                            "the channel id (C…) that holds the agents' threads (docs/slack.md)")
        if settings.slack_mode == "socket" and not settings.slack_app_token:
            problems.append("slack: Socket Mode needs SLACK_APP_TOKEN (xapp-…, scope "
                            "connections:write), or set SLACK_MODE=http (docs/slack.md)")
        if settings.slack_mode == "http" and not settings.slack_signing_secret:
            problems.append("slack: HTTP mode needs SLACK_SIGNING_SECRET (the app's signing "
                            "secret), or set SLACK_MODE=socket (docs/slack.md)")
    if settings.telegram_webhook_url and not settings.telegram_token:
        problems.append("telegram: TELEGRAM_WEBHOOK_URL is set but TELEGRAM_BOT_TOKEN is not: "
                        "Telegram will not start. Set TELEGRAM_BOT_TOKEN (docs/telegram.md)")
    return problems


def _check_fronts(settings: Settings, doctor: Doctor) -> None:
    fronts = ["console"]
    if settings.telegram_token:
        fronts.append("telegram (token set)")
    if settings.slack_bot_token:
        mode = "HTTP mode" if settings.slack_mode == "http" else "Socket Mode"
        fronts.append(f"slack ({mode}, channel {settings.slack_channel or 'NOT SET'})")
    doctor.say(f"front ends configured: {', '.join(fronts)}")
    for problem in front_problems(settings):
        doctor.report(False, problem)


def _check_telegram(settings: Settings, doctor: Doctor) -> None:
    """The bot token asked of the Bot API itself (getMe). The token is never printed: not
    quoted here, and every line goes through the redactor."""
    token = settings.telegram_token
    if token is None:
        return
    from telegram.error import InvalidToken, TelegramError

    from bot.telegram.front import BadBaseUrl, get_me

    where = settings.telegram_api_base_url or "api.telegram.org"
    try:
        me = asyncio.run(get_me(token.value, settings.telegram_api_base_url))
    except BadBaseUrl as exc:
        doctor.report(False, f"telegram: {exc}")
    except InvalidToken:
        also = (f" (or TELEGRAM_API_BASE_URL={where} is not a Bot API server)"
                if settings.telegram_api_base_url else "")
        doctor.report(False, f"telegram: {where} refused the bot token (getMe){also}. Copy "
                      "TELEGRAM_BOT_TOKEN again from @BotFather.")
    except (TelegramError, OSError) as exc:
        doctor.report(False, f"telegram: cannot reach the Bot API at {where} "
                      f"({type(exc).__name__}: {exc}); check the network or "
                      "TELEGRAM_API_BASE_URL.")
    else:
        doctor.report(True, f"telegram: the bot token works (getMe: @{me.username}, "
                      f"id {me.id})")
