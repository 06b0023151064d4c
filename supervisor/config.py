"""Typed settings, read once from the environment and an optional TOML file (the only reader)."""

# Loading is pydantic-settings rather than hand parsing because each setting is then declared
# once, as a typed field with its constraints, and the library does the rest: coercing
# environment strings, refusing what does not fit (a fraction for a whole number, an unknown
# key), checking ranges, and reporting every problem at once. The hand-written parser needed a
# helper per type, and each had to remember to refuse: int() truncated 2.9, a misspelt key was
# ignored, `console = "on"` meant off. What is ours is only where each setting is read
# (supervisor/config_sources.py: variable names, TOML sections) and the wording of a refusal.

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field, PrivateAttr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from supervisor import launcher
from supervisor.config_sources import EnvironmentSource, FileSource, Key, explain
from supervisor.config_types import (
    _WHOLE,
    AgentEnv,
    Budget,
    Choice,
    CliPath,
    Flag,
    Interval,
    Names,
    Paths,
    Percent,
    Port,
    Seconds,
    Secret,
    SecretText,
    SlackUserIds,
    SlashCommand,
    Text,
    UserIds,
    UserPath,
    Whole,
    _lower,
    _not_a_bool,
    _upper,
    env_secrets,
    looks_secret,
)
from supervisor.errors import ConfigError

PermissionMode = Literal["default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)
OnTimeout = Literal["deny", "pause"]
ON_TIMEOUT: tuple[str, ...] = get_args(OnTimeout)
SlackMode = Literal["socket", "http"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LogFormat = Literal["auto", "text", "json"]
MergeMode = Literal["ff", "merge"]
Egress = Literal["auto", "model-only", "allowlist", "open"]
CpuGroup = Literal["auto", "cgroup", "autogroup"]

# Variables an agent may see. Everything else in the supervisor's environment (chat tokens,
# cloud credentials, our own secrets) is withheld.
BASE_AGENT_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM",
    "TZ", "TMPDIR", "NO_COLOR",
)
# The shared-context directory's path, in every agent's environment.
CONTEXT_VAR = "SWITCHBOARD_CONTEXT_DIR"
AGENT_ENV_DEFAULTS = {
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    # Our in-process MCP tools are few: list them up front rather than behind ToolSearch.
    "ENABLE_TOOL_SEARCH": "false",
    # ask_operator waits for a human: the CLI must not give up on the tool call first.
    "MCP_TOOL_TIMEOUT": "86400000",
}
# Names that may never be passed through to an agent, whatever the configuration says.
# SWITCHBOARD_ variables that are not settings: the ones we set for our own agents' launchers.
INTERNAL_VARS = (*launcher.CONTROL, launcher.KEYS_VAR)


# Which sources a construction reads besides its keyword arguments. Empty, so that
# Settings(home=...) (tests, with_) never picks up the environment; `load` sets it for the
# length of its one call.
_LOADING: ContextVar[tuple[PydanticBaseSettingsSource, ...]] = ContextVar("_LOADING", default=())


OWN_POLICY = "policy.toml"  # the policy file Switchboard writes in its data directory

class Settings(BaseSettings):
    """Everything configurable, flat (settings.max_agents), whatever section the file puts it in.

    Each field's Key names its environment variable and its TOML key (docs/configuration.md
    lists them all, and tests/unit/test_config_docs.py holds the two together).
    """

    model_config = SettingsConfigDict(frozen=True, extra="forbid")

    home: Annotated[UserPath, Key(env="SWITCHBOARD_HOME")]
    config_file: Annotated[UserPath | None, Key(env="SWITCHBOARD_CONFIG")] = None
    # A PostgreSQL store (docs/postgresql.md); unset: SQLite under `home`.
    database_url: Annotated[SecretText, Key("SWITCHBOARD_DATABASE_URL", "database_url")] = None
    claude_cli: Annotated[CliPath | None, Key("SWITCHBOARD_CLAUDE_CLI", "claude_cli")] = None
    default_model: Annotated[Text | None, Key("SWITCHBOARD_MODEL", "model")] = None
    permission_mode: Annotated[PermissionMode, Choice,
                               Key("SWITCHBOARD_PERMISSION_MODE", "permission_mode")] = "default"
    anthropic_api_key: Annotated[SecretText, Key("ANTHROPIC_API_KEY", "anthropic_api_key")] = None
    anthropic_auth_token: Annotated[SecretText,
                                    Key("ANTHROPIC_AUTH_TOKEN", "anthropic_auth_token")] = None
    anthropic_base_url: Annotated[Text | None,
                                  Key("ANTHROPIC_BASE_URL", "anthropic_base_url")] = None
    claude_oauth_token: Annotated[SecretText,
                                  Key("CLAUDE_CODE_OAUTH_TOKEN", "claude_oauth_token")] = None
    claude_config_dir: Annotated[UserPath | None,
                                 Key("CLAUDE_CONFIG_DIR", "claude_config_dir")] = None
    # Extra values given to agents; may hold a Claude key, so never shown in a repr.
    agent_env: Annotated[AgentEnv, Key(toml="agent_env")] = Field(default_factory=dict,
                                                                   repr=False)
    # Extra names copied from our environment.
    agent_env_passthrough: Annotated[Names, Key("SWITCHBOARD_AGENT_ENV_PASSTHROUGH",
                                                "agent_env_passthrough")] = ()
    kill_grace_s: Annotated[Seconds, Key("SWITCHBOARD_KILL_GRACE_S", "kill_grace_s")] = 5.0
    # How many nice levels below the supervisor every agent runs (its nice value, and its CPU
    # group's weight or its session's autogroup), so that a busy fleet cannot starve the
    # supervisor; 0: same priority.
    agent_nice: Annotated[int, _WHOLE, BeforeValidator(_not_a_bool), Field(ge=0, le=19),
                          Key("SWITCHBOARD_AGENT_NICE", "agent_nice")] = 10
    # What holds them there (supervisor/process/cpugroup.py): auto, a cgroup where one can be
    # made, else autogroups; cgroup, refuse to start without one; autogroup, never a cgroup.
    agent_cpu_group: Annotated[CpuGroup, Choice, Key("SWITCHBOARD_AGENT_CPU_GROUP",
                                                     "agent_cpu_group")] = "auto"
    stop_grace_s: Annotated[Seconds, Key("SWITCHBOARD_STOP_GRACE_S", "stop_grace_s")] = 10.0
    shutdown_grace_s: Annotated[Seconds,
                                Key("SWITCHBOARD_SHUTDOWN_GRACE_S", "shutdown_grace_s")] = 30.0
    max_prompt_chars: Annotated[Whole,
                                Key("SWITCHBOARD_MAX_PROMPT_CHARS", "max_prompt_chars")] = 100_000
    # A file the operator sends an agent (Telegram lets a bot download 20 MB at most).
    attachment_max_bytes: Annotated[Whole, Key("SWITCHBOARD_ATTACHMENT_MAX_BYTES",
                                               "attachment_max_bytes")] = 20_000_000
    # A file an agent sends out with send_file, or /file fetches (Telegram's upload limit).
    send_file_max_bytes: Annotated[Whole, Key("SWITCHBOARD_SEND_FILE_MAX_BYTES",
                                              "send_file_max_bytes")] = 50_000_000
    # A result an agent reports (report_result) under this confidence (0-100) is pushed to
    # the operator as needing review, with its evidence.
    review_below_confidence: Annotated[int, _WHOLE, BeforeValidator(_not_a_bool),
                                       Field(ge=0, le=101),
                                       Key("SWITCHBOARD_REVIEW_BELOW_CONFIDENCE",
                                           "review_below_confidence")] = 70
    # Managed project memory (docs/memory.md): the managed region's size, and the slice of
    # the memory each agent started on the project gets in its system prompt.
    memory_managed_bytes: Annotated[Whole, Key("SWITCHBOARD_MEMORY_MANAGED_BYTES",
                                               "memory_managed_bytes")] = 16_000
    memory_slice_bytes: Annotated[Whole, Key("SWITCHBOARD_MEMORY_SLICE_BYTES",
                                             "memory_slice_bytes")] = 4_000
    max_line_bytes: Whole = 64 * 1024 * 1024  # not configurable
    policy_file: Annotated[UserPath | None, Key("SWITCHBOARD_POLICY", "policy_file")] = None
    approval_reminder_s: Annotated[Seconds, Key("SWITCHBOARD_APPROVAL_REMINDER_S",
                                                "approval_reminder_s")] = 300.0
    approval_timeout_s: Annotated[Seconds, Key("SWITCHBOARD_APPROVAL_TIMEOUT_S",
                                               "approval_timeout_s")] = 900.0
    # How long a reviewer agent has to decide a request before it goes to the operator.
    review_timeout_s: Annotated[Interval, Key("SWITCHBOARD_REVIEW_TIMEOUT_S",
                                              "review_timeout_s")] = 120.0
    approval_on_timeout: Annotated[OnTimeout, Choice, Key("SWITCHBOARD_APPROVAL_ON_TIMEOUT",
                                                          "approval_on_timeout")] = "deny"
    invite_ttl_s: Annotated[Seconds, Key("SWITCHBOARD_INVITE_TTL_S", "invite_ttl_s")] = 3600.0
    status_card_interval_s: Annotated[Seconds, Key("SWITCHBOARD_STATUS_CARD_INTERVAL_S",
                                                   "status_card_interval_s")] = 2.0
    # Routine notices (sent silently) within this many seconds of the last one sent are
    # gathered into one message on Telegram (bot/kit/digest.py); 0: each on its own.
    notice_digest_s: Annotated[Seconds, Key("SWITCHBOARD_NOTICE_DIGEST_S",
                                            "notice_digest_s")] = 60.0
    console: Annotated[Flag | None, Key("SWITCHBOARD_CONSOLE", "console")] = None  # None: a tty?
    log_level: Annotated[LogLevel, Choice, BeforeValidator(_upper),
                         Key("SWITCHBOARD_LOG_LEVEL", "log_level")] = "INFO"
    # auto: JSON lines when stderr is not a terminal (a container, a service), else text.
    log_format: Annotated[LogFormat, Choice, BeforeValidator(_lower),
                          Key("SWITCHBOARD_LOG_FORMAT", "log_format")] = "auto"
    # The HTTP listener (/healthz, /readyz, /metrics, the Telegram webhook): off unless a port
    # is given. PORT is what Cloud Run (and the image) set; our own variable wins over it.
    http_port: Annotated[Port | None, Key("SWITCHBOARD_HTTP_PORT", "http_port",
                                          also_env=("PORT",))] = None
    http_host: Annotated[Text, Key("SWITCHBOARD_HTTP_HOST", "http_host")] = "127.0.0.1"
    # Where the operator's browser reaches the listener (behind a TLS proxy: its https URL):
    # the web console's sign-in links and the escalations' deep links. Unset: the listener's.
    public_url: Annotated[Text | None, Key("SWITCHBOARD_PUBLIC_URL", "public_url")] = None

    # [telegram]
    telegram_token: Annotated[SecretText, Key("TELEGRAM_BOT_TOKEN", "telegram.bot_token",
                                              "telegram_bot_token")] = None
    telegram_admin_ids: Annotated[UserIds, Key("TELEGRAM_ADMIN_IDS", "telegram.admin_ids",
                                               "telegram_admin_ids")] = ()  # admins at start
    # A self-hosted Bot API server (or a test fake).
    telegram_api_base_url: Annotated[Text | None, Key("TELEGRAM_API_BASE_URL",
                                                      "telegram.api_base_url",
                                                      "telegram_api_base_url")] = None
    # A public HTTPS URL: webhook mode instead of polling.
    telegram_webhook_url: Annotated[Text | None, Key("TELEGRAM_WEBHOOK_URL", "telegram.webhook_url",
                                                     "telegram_webhook_url")] = None
    telegram_webhook_listen: Annotated[Text, Key("TELEGRAM_WEBHOOK_LISTEN",
                                                 "telegram.webhook_listen",
                                                 "telegram_webhook_listen")] = "0.0.0.0"  # noqa: S104
    telegram_webhook_port: Annotated[Port, Key("TELEGRAM_WEBHOOK_PORT", "telegram.webhook_port",
                                               "telegram_webhook_port")] = 8443
    # Checked on every call; random if unset.
    telegram_webhook_secret: Annotated[SecretText, Key("TELEGRAM_WEBHOOK_SECRET",
                                                       "telegram.webhook_secret",
                                                       "telegram_webhook_secret")] = None

    # [slack]
    slack_bot_token: Annotated[SecretText, Key("SLACK_BOT_TOKEN", "slack.bot_token",
                                               "slack_bot_token")] = None
    slack_app_token: Annotated[SecretText, Key("SLACK_APP_TOKEN", "slack.app_token",
                                               "slack_app_token")] = None
    # HTTP mode instead of Socket Mode: Slack posts to our listener, signed with this secret.
    slack_mode: Annotated[SlackMode, Choice, Key("SLACK_MODE", "slack.mode")] = "socket"
    slack_signing_secret: Annotated[SecretText, Key("SLACK_SIGNING_SECRET",
                                                    "slack.signing_secret")] = None
    slack_http_listen: Annotated[Text, Key("SLACK_HTTP_LISTEN",
                                           "slack.http_listen")] = "0.0.0.0"  # noqa: S104
    slack_http_port: Annotated[Port, Key("SLACK_HTTP_PORT", "slack.http_port")] = 3000
    # The Web API's base URL (a test fake); Slack's own when unset.
    slack_api_url: Annotated[Text | None, Key("SLACK_API_URL", "slack.api_url")] = None
    slack_channel: Annotated[Text | None, Key("SLACK_CHANNEL", "slack.channel")] = None
    slack_admin_ids: Annotated[SlackUserIds, Key("SLACK_ADMIN_IDS", "slack.admin_ids")] = ()
    slack_team_id: Annotated[Text | None, Key("SLACK_TEAM_ID", "slack.team_id")] = None
    slack_command: Annotated[SlashCommand, Key("SLACK_COMMAND", "slack.command")] = "/sb"
    slack_card_interval_s: Annotated[Interval, Key("SLACK_CARD_INTERVAL_S",
                                                   "slack.card_interval_s")] = 3.0

    # [gcs]
    gcs_bucket: Annotated[Text | None, Key("SWITCHBOARD_GCS_BUCKET", "gcs.bucket",
                                           "gcs_bucket")] = None
    gcs_project: Annotated[Text | None, Key("GOOGLE_CLOUD_PROJECT", "gcs.project",
                                            "gcs_project")] = None
    kill_poll_s: Annotated[Interval, Key("SWITCHBOARD_KILL_POLL_S", "gcs.poll_s",
                                         "kill_poll_s")] = 10.0
    # Claude session transcripts in the same bucket (docs/persistence.md, "Transcripts").
    gcs_sessions_prefix: Annotated[Text, Key("SWITCHBOARD_GCS_SESSIONS_PREFIX",
                                             "gcs.sessions_prefix",
                                             "gcs_sessions_prefix")] = "sessions"
    storage_emulator_host: Annotated[Text | None, Key(env="STORAGE_EMULATOR_HOST")] = None
    # Database and shared-context snapshots to the bucket (docs/persistence.md).
    snapshot_interval_s: Annotated[Interval, Key("SWITCHBOARD_SNAPSHOT_INTERVAL_S",
                                                 "gcs.snapshot_interval_s",
                                                 "snapshot_interval_s")] = 60.0
    snapshot_debounce_s: Annotated[Interval, Key("SWITCHBOARD_SNAPSHOT_DEBOUNCE_S",
                                                 "gcs.snapshot_debounce_s",
                                                 "snapshot_debounce_s")] = 5.0
    lease_ttl_s: Annotated[Interval, Key("SWITCHBOARD_LEASE_TTL_S", "gcs.lease_ttl_s",
                                         "lease_ttl_s")] = 60.0
    # The service-account key file google-auth uses: hidden from agents and protected by policy.
    gcs_credentials_file: Annotated[UserPath | None,
                                    Key(env="GOOGLE_APPLICATION_CREDENTIALS")] = None

    # [limits]: the guardrails
    max_agents: Annotated[Whole, Key("SWITCHBOARD_MAX_AGENTS", "limits.max_agents",
                                     "max_agents")] = 100
    max_depth: Annotated[Whole, Key("SWITCHBOARD_MAX_DEPTH", "limits.max_depth",
                                    "max_depth")] = 3
    max_children: Annotated[Whole, Key("SWITCHBOARD_MAX_CHILDREN", "limits.max_children",
                                       "max_children")] = 20
    session_ttl_s: Annotated[Seconds, Key("SWITCHBOARD_SESSION_TTL_S", "limits.session_ttl_s",
                                          "session_ttl_s")] = 4 * 3600.0
    ttl_warn_s: Annotated[Seconds, Key("SWITCHBOARD_TTL_WARN_S", "limits.ttl_warn_s",
                                       "ttl_warn_s")] = 600.0
    agent_budget_usd: Annotated[Budget, Key("SWITCHBOARD_AGENT_BUDGET_USD",
                                            "limits.agent_budget_usd", "agent_budget_usd")] = None
    global_budget_usd: Annotated[Budget, Key("SWITCHBOARD_GLOBAL_BUDGET_USD",
                                             "limits.global_budget_usd",
                                             "global_budget_usd")] = None
    spawns_per_minute: Annotated[Whole, Key("SWITCHBOARD_SPAWNS_PER_MINUTE",
                                            "limits.spawns_per_minute",
                                            "spawns_per_minute")] = 30
    commands_per_minute: Annotated[Whole, Key("SWITCHBOARD_COMMANDS_PER_MINUTE",
                                              "limits.commands_per_minute",
                                              "commands_per_minute")] = 120
    messages_per_minute: Annotated[Whole, Key("SWITCHBOARD_MESSAGES_PER_MINUTE",
                                              "limits.messages_per_minute",
                                              "messages_per_minute")] = 60
    memory_refuse_pct: Annotated[Percent, Key("SWITCHBOARD_MEMORY_REFUSE_PCT",
                                              "limits.memory_refuse_pct",
                                              "memory_refuse_pct")] = 85.0
    memory_warn_pct: Annotated[Percent, Key("SWITCHBOARD_MEMORY_WARN_PCT",
                                            "limits.memory_warn_pct", "memory_warn_pct")] = 75.0
    stall_s: Annotated[Seconds, Key("SWITCHBOARD_STALL_S", "limits.stall_s", "stall_s")] = 900.0
    crash_loop_max: Annotated[Whole, Key("SWITCHBOARD_CRASH_LOOP_MAX", "limits.crash_loop_max",
                                         "crash_loop_max")] = 3
    crash_loop_window_s: Annotated[Seconds, Key("SWITCHBOARD_CRASH_LOOP_WINDOW_S",
                                                "limits.crash_loop_window_s",
                                                "crash_loop_window_s")] = 600.0
    watchdog_interval_s: Annotated[Interval, Key("SWITCHBOARD_WATCHDOG_INTERVAL_S",
                                                 "limits.watchdog_interval_s",
                                                 "watchdog_interval_s")] = 5.0
    # Standing agents (docs/standing-agents.md): no session TTL; an idle one's CLI is stopped
    # after this long and its session resumed by the next message or schedule firing.
    standing_idle_stop_s: Annotated[Seconds, Key("SWITCHBOARD_STANDING_IDLE_STOP_S",
                                                 "limits.standing_idle_stop_s",
                                                 "standing_idle_stop_s")] = 900.0
    # [bus]: messages between agents (docs/bus.md)
    bus_message_ttl_s: Annotated[Interval, Key("SWITCHBOARD_BUS_MESSAGE_TTL_S",
                                               "bus.message_ttl_s", "bus_message_ttl_s")] = 86400.0
    bus_lease_s: Annotated[Interval, Key("SWITCHBOARD_BUS_LEASE_S", "bus.lease_s",
                                         "bus_lease_s")] = 60.0
    bus_max_attempts: Annotated[Whole, Key("SWITCHBOARD_BUS_MAX_ATTEMPTS", "bus.max_attempts",
                                           "bus_max_attempts")] = 3
    bus_pair_limit: Annotated[Whole, Key("SWITCHBOARD_BUS_PAIR_LIMIT", "bus.pair_limit",
                                         "bus_pair_limit")] = 20
    bus_pair_window_s: Annotated[Interval, Key("SWITCHBOARD_BUS_PAIR_WINDOW_S",
                                               "bus.pair_window_s", "bus_pair_window_s")] = 60.0
    bus_pair_cooldown_s: Annotated[Seconds, Key("SWITCHBOARD_BUS_PAIR_COOLDOWN_S",
                                                "bus.pair_cooldown_s",
                                                "bus_pair_cooldown_s")] = 60.0
    bus_round_limit: Annotated[Whole, Key("SWITCHBOARD_BUS_ROUND_LIMIT", "bus.round_limit",
                                          "bus_round_limit")] = 10
    bus_inbox_cap: Annotated[Whole, Key("SWITCHBOARD_BUS_INBOX_CAP", "bus.inbox_cap",
                                        "bus_inbox_cap")] = 50
    bus_max_body_chars: Annotated[Whole, Key("SWITCHBOARD_BUS_MAX_BODY_CHARS",
                                             "bus.max_body_chars", "bus_max_body_chars")] = 20_000
    bus_turn_max_messages: Annotated[Whole, Key("SWITCHBOARD_BUS_TURN_MAX_MESSAGES",
                                                "bus.turn_max_messages",
                                                "bus_turn_max_messages")] = 50
    bus_rate_alarm_per_min: Annotated[Whole, Key("SWITCHBOARD_BUS_RATE_ALARM_PER_MIN",
                                                 "bus.rate_alarm_per_min",
                                                 "bus_rate_alarm_per_min")] = 600
    team_file: Annotated[UserPath | None, Key("SWITCHBOARD_TEAM_FILE", "bus.team_file",
                                              "team_file")] = None
    # [scheduler]: schedules and reminders (docs/scheduler.md)
    timezone: Annotated[Text, Key("SWITCHBOARD_TIMEZONE", "scheduler.timezone",
                                  "timezone")] = "UTC"
    schedule_tick_s: Annotated[Interval, Key("SWITCHBOARD_SCHEDULE_TICK_S",
                                             "scheduler.tick_s", "schedule_tick_s")] = 15.0
    schedule_grace_s: Annotated[Seconds, Key("SWITCHBOARD_SCHEDULE_GRACE_S",
                                             "scheduler.grace_s", "schedule_grace_s")] = 300.0
    schedule_timeout_s: Annotated[Interval, Key("SWITCHBOARD_SCHEDULE_TIMEOUT_S",
                                                "scheduler.timeout_s",
                                                "schedule_timeout_s")] = 3600.0
    schedule_agent_max: Annotated[Whole, Key("SWITCHBOARD_SCHEDULE_AGENT_MAX",
                                             "scheduler.agent_max", "schedule_agent_max")] = 5
    schedule_agent_min_interval_s: Annotated[Seconds, Key(
        "SWITCHBOARD_SCHEDULE_AGENT_MIN_INTERVAL_S", "scheduler.agent_min_interval_s",
        "schedule_agent_min_interval_s")] = 600.0
    schedule_agent_expiry_s: Annotated[Interval, Key("SWITCHBOARD_SCHEDULE_AGENT_EXPIRY_S",
                                                     "scheduler.agent_expiry_s",
                                                     "schedule_agent_expiry_s")] = 604800.0

    # [repos]: registered repositories and agents' worktrees (docs/repositories.md). The token
    # and the key are used by Switchboard's own fetches only, never handed to an agent.
    repo_token: Annotated[SecretText, Key("SWITCHBOARD_REPO_TOKEN", "repos.token")] = None
    repo_token_user: Annotated[Text, Key("SWITCHBOARD_REPO_TOKEN_USER",
                                         "repos.token_user")] = "x-access-token"
    repo_ssh_key: Annotated[UserPath | None, Key("SWITCHBOARD_REPO_SSH_KEY",
                                                 "repos.ssh_key")] = None
    repo_merge: Annotated[MergeMode, Choice, Key("SWITCHBOARD_REPO_MERGE", "repos.merge")] = "ff"
    repo_gc_interval_s: Annotated[Interval, Key("SWITCHBOARD_REPO_GC_INTERVAL_S",
                                                "repos.gc_interval_s")] = 600.0
    repo_intent_ttl_s: Annotated[Interval, Key("SWITCHBOARD_REPO_INTENT_TTL_S",
                                               "repos.intent_ttl_s")] = 3600.0
    repo_push_intentions: Annotated[Flag, Key("SWITCHBOARD_REPO_PUSH_INTENTIONS",
                                              "repos.push_intentions")] = False

    # The event ingest and its retention (supervisor/agents/ingest.py and retention.py): how
    # long raw events wait to be written with others, the most in one batch; raw events older
    # than event_retention_days or beyond event_retention_per_agent per agent are pruned every
    # retention_interval_s (turns, costs, escalations and audit rows are kept).
    ingest_window_s: Annotated[Interval, Key("SWITCHBOARD_INGEST_WINDOW_S", "store.ingest_window_s",
                                             "ingest_window_s")] = 0.02
    ingest_max_batch: Annotated[Whole, Key("SWITCHBOARD_INGEST_MAX_BATCH",
                                           "store.ingest_max_batch", "ingest_max_batch")] = 2000
    event_retention_days: Annotated[Seconds, Key("SWITCHBOARD_EVENT_RETENTION_DAYS",
                                                 "store.event_retention_days",
                                                 "event_retention_days")] = 7.0
    event_retention_per_agent: Annotated[Whole, Key("SWITCHBOARD_EVENT_RETENTION_PER_AGENT",
                                                    "store.event_retention_per_agent",
                                                    "event_retention_per_agent")] = 5000
    retention_interval_s: Annotated[Interval, Key("SWITCHBOARD_RETENTION_INTERVAL_S",
                                                  "store.retention_interval_s",
                                                  "retention_interval_s")] = 600.0

    # Where memory.current/memory.max live (auto-detected; not configurable, tests inject it).
    cgroup_dir: UserPath | None = None

    # The sandbox (supervisor/process/sandbox.py): bwrap to use (default: found on PATH),
    # whether agents may run without one when the host cannot isolate, the uid/gid agents run
    # as when we are root (default: user switchboard-agent, else 61000), and extra paths agents
    # must not see.
    bwrap_path: Annotated[UserPath | None, Key("SWITCHBOARD_BWRAP", "bwrap_path")] = None
    allow_unisolated_agents: Annotated[Flag, Key("SWITCHBOARD_ALLOW_UNISOLATED_AGENTS",
                                                 "allow_unisolated_agents")] = False
    sandbox_uid: Annotated[Whole | None, Key("SWITCHBOARD_SANDBOX_UID", "sandbox_uid")] = None
    sandbox_gid: Annotated[Whole | None, Key("SWITCHBOARD_SANDBOX_GID", "sandbox_gid")] = None
    sandbox_hide: Annotated[Paths, Key("SWITCHBOARD_SANDBOX_HIDE", "sandbox_hide")] = ()
    # The model gateway (supervisor/guard/gateway.py, docs/gateway.md): agents hold a token of
    # their own, the supervisor the key; and each agent's model requests per minute.
    model_gateway: Annotated[Flag, Key("SWITCHBOARD_MODEL_GATEWAY", "model_gateway")] = True
    gateway_requests_per_minute: Annotated[Whole, Key("SWITCHBOARD_GATEWAY_REQUESTS_PER_MINUTE",
                                                      "limits.gateway_requests_per_minute",
                                                      "gateway_requests_per_minute")] = 120
    # Each agent's network (supervisor/process/network.py): auto is model-only where the
    # gateway and network namespaces are there, else open; egress_allow: allowlist's hosts.
    egress: Annotated[Egress, Choice, Key("SWITCHBOARD_EGRESS", "egress")] = "auto"
    egress_allow: Annotated[Names, Key("SWITCHBOARD_EGRESS_ALLOW", "egress_allow")] = ()

    _env_secrets: tuple[Secret, ...] = PrivateAttr(default=())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Keyword arguments win, then the environment, then the file (see `load`).
        return (init_settings, *_LOADING.get())

    def __setattr__(self, name: str, value: Any) -> None:
        # As the frozen dataclass this was: pydantic's frozen models raise ValidationError.
        raise AttributeError(f"settings are frozen: use settings.with_({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("settings are frozen")

    @property
    def db_path(self) -> Path:
        return self.home / "switchboard.db"

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def context_dir(self) -> Path:
        """The shared context: Markdown notes every agent may read and write."""
        return self.home / "context"

    @property
    def agents_dir(self) -> Path:
        return self.home / "agents"

    @property
    def memory_dir(self) -> Path:
        """Each project's MEMORY.md and archive (supervisor/repos/memory.py)."""
        return self.home / "memory"

    @property
    def repos_dir(self) -> Path:
        return self.home / "repos"

    @property
    def log_path(self) -> Path:
        return self.home / "switchboard.log"

    @property
    def http_listen(self) -> tuple[str, int] | None:
        """Where the HTTP listener listens, or None for no listener. Webhook mode with no
        port of its own listens where Telegram's webhook settings say."""
        if self.http_port is not None:
            return self.http_host, self.http_port
        if self.telegram_token and self.telegram_webhook_url:
            return self.telegram_webhook_listen, self.telegram_webhook_port
        return None

    @property
    def instance_id(self) -> str:
        """Names this data directory in agent tags, so two supervisors never sweep each other."""
        return hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:12]

    @property
    def policy_path(self) -> Path | None:
        """The policy file in use: `policy_file` when set; else the one Switchboard writes in
        its data directory once a rule is learned from the operator's answers (a copy of the
        built-in default plus the rule); else None, the built-in default."""
        if self.policy_file is not None:
            return self.policy_file
        own = self.home / OWN_POLICY
        return own if own.exists() else None

    @property
    def learned_rules_file(self) -> Path:
        """Where a rule learned from the operator's answers is written."""
        return self.policy_file or self.home / OWN_POLICY

    @property
    def credential_source(self) -> str:
        if self.anthropic_api_key:
            return "ANTHROPIC_API_KEY"
        if self.anthropic_auth_token:
            return "ANTHROPIC_AUTH_TOKEN"
        if self.claude_oauth_token:
            return "CLAUDE_CODE_OAUTH_TOKEN"
        if self.agent_env.get("ANTHROPIC_API_KEY") or self.agent_env.get("ANTHROPIC_AUTH_TOKEN"):
            return "agent_env"
        return "claude login"

    def secret_values(self) -> tuple[str, ...]:
        """Every secret this process knows, for the log and audit redactor and nothing else:
        the Secret settings, secret-looking [agent_env] values, and what our own environment
        holds (AWS_SECRET_ACCESS_KEY, the service-account key file's private key...)."""
        values = [v.value for name in type(self).model_fields
                  if isinstance(v := getattr(self, name), Secret)]
        values += [v for k, v in self.agent_env.items() if looks_secret(k)]
        values += [s.value for s in _private(self).get("_env_secrets", ())]
        return tuple(dict.fromkeys(v for v in values if v))

    def gcs_client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"project": self.gcs_project or "switchboard"}
        if self.storage_emulator_host:
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()  # type: ignore[no-untyped-call]
        return kwargs

    def with_(self, **changes: Any) -> Settings:
        """A copy with some settings changed, checked like any other construction."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        copy = type(self)(**{**values, **changes})
        _private(copy).update(_private(self))
        return copy

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the environment (os.environ unless given) and the settings file, once.

        Raises ConfigError naming every setting refused: an unknown key, a value of the wrong
        type, out of range or not among the accepted ones.
        """
        env = dict(os.environ if environ is None else environ)
        home = Path(env.get("SWITCHBOARD_HOME") or Path(env.get("HOME", ".")) / ".switchboard")
        home = home.expanduser()
        cfg_path = Path(env.get("SWITCHBOARD_CONFIG") or home / "switchboard.toml").expanduser()
        data: dict[str, Any] = {}
        if cfg_path.exists():
            try:
                data = tomllib.loads(cfg_path.read_text())
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read {cfg_path}: {exc}") from exc
        elif env.get("SWITCHBOARD_CONFIG"):
            raise ConfigError(f"SWITCHBOARD_CONFIG points at {cfg_path}, which does not exist")
        sources = (EnvironmentSource(cls, env, INTERNAL_VARS), FileSource(cls, data, cfg_path))
        token = _LOADING.set(sources)
        refused: ValidationError | None = None
        try:
            settings = cls(home=home, config_file=cfg_path if cfg_path.exists() else None)
        except ValidationError as exc:
            refused = exc
        finally:
            _LOADING.reset(token)
        problem = explain(refused, cls, sources)
        if problem is not None:
            # Not chained: pydantic's own text shows every input, secrets included.
            raise problem from None
        # Not a setting: the secrets our environment holds, only so logs can be kept clean.
        _private(settings)["_env_secrets"] = env_secrets(env)
        return settings

    def agent_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The complete environment an agent gets: an allowlist, never our whole environment."""
        src = dict(os.environ if base is None else base)
        env = {k: src[k] for k in (*BASE_AGENT_ENV, *self.agent_env_passthrough) if k in src}
        env.update(AGENT_ENV_DEFAULTS)
        if self.anthropic_api_key:
            env["ANTHROPIC_API_KEY"] = self.anthropic_api_key.value
        if self.anthropic_auth_token:
            env["ANTHROPIC_AUTH_TOKEN"] = self.anthropic_auth_token.value
        if self.claude_oauth_token:
            env["CLAUDE_CODE_OAUTH_TOKEN"] = self.claude_oauth_token.value
        if self.anthropic_base_url:
            env["ANTHROPIC_BASE_URL"] = self.anthropic_base_url
        if self.claude_config_dir:
            env["CLAUDE_CONFIG_DIR"] = str(self.claude_config_dir)
        env[CONTEXT_VAR] = str(self.context_dir.resolve())
        env.update(self.agent_env)
        return env


def _private(model: BaseSettings) -> dict[str, Any]:
    """A model's private attributes (pydantic keeps them apart from the frozen fields)."""
    private = model.__pydantic_private__
    if private is None:
        private = {}
        object.__setattr__(model, "__pydantic_private__", private)
    return private
