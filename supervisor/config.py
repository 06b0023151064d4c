"""Typed settings, read once from the environment and an optional TOML file (the only reader)."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from supervisor.errors import ConfigError

PERMISSION_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions")

# Variables an agent may see. Everything else in the supervisor's environment (chat tokens,
# cloud credentials, our own secrets) is withheld.
BASE_AGENT_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM",
    "TZ", "TMPDIR", "NO_COLOR",
)
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
ON_TIMEOUT = ("deny", "pause")
# Names that may never be passed through to an agent, whatever the configuration says.
WITHHELD_PREFIXES = (
    "TELEGRAM_", "SLACK_", "SWITCHBOARD_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_", "AWS_", "AZURE_",
    "STORAGE_EMULATOR_HOST",
)
# A variable whose name holds one of these is taken for a secret, and its value kept out of logs.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "PRIVATE")


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


@dataclass(frozen=True, slots=True)
class Secret:
    """A secret value whose repr never shows it."""

    value: str

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    claude_cli: Path | None = None
    default_model: str | None = None
    permission_mode: str = "default"
    anthropic_api_key: Secret | None = None
    anthropic_auth_token: Secret | None = None
    anthropic_base_url: str | None = None
    claude_oauth_token: Secret | None = None
    claude_config_dir: Path | None = None
    # Extra values given to agents; may hold a Claude key, so never shown in a repr.
    agent_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    agent_env_passthrough: tuple[str, ...] = ()  # extra names copied from our environment
    kill_grace_s: float = 5.0
    stop_grace_s: float = 10.0
    shutdown_grace_s: float = 30.0
    max_prompt_chars: int = 100_000
    max_line_bytes: int = 64 * 1024 * 1024
    telegram_token: Secret | None = None
    slack_bot_token: Secret | None = None
    slack_app_token: Secret | None = None
    telegram_api_base_url: str | None = None  # a self-hosted Bot API server (or a test fake)
    telegram_admin_ids: tuple[str, ...] = ()  # seeded as admins at start
    invite_ttl_s: float = 3600.0
    telegram_webhook_url: str | None = None  # public HTTPS URL: webhook mode instead of polling
    telegram_webhook_listen: str = "0.0.0.0"  # noqa: S104 - behind the operator's proxy
    telegram_webhook_port: int = 8443
    telegram_webhook_secret: Secret | None = None  # checked on every call; random if unset
    status_card_interval_s: float = 2.0
    console: bool | None = None  # None: on when stdin is a terminal
    log_level: str = "INFO"
    config_file: Path | None = None
    policy_file: Path | None = None
    approval_reminder_s: float = 300.0
    approval_timeout_s: float = 900.0
    approval_on_timeout: str = "deny"
    gcs_bucket: str | None = None
    gcs_project: str | None = None
    storage_emulator_host: str | None = None
    kill_poll_s: float = 10.0
    max_agents: int = 100
    max_depth: int = 3
    max_children: int = 20
    session_ttl_s: float = 4 * 3600.0
    ttl_warn_s: float = 600.0
    agent_budget_usd: float | None = None
    global_budget_usd: float | None = None
    spawns_per_minute: int = 30
    commands_per_minute: int = 120
    messages_per_minute: int = 60
    memory_refuse_pct: float = 85.0
    memory_warn_pct: float = 75.0
    stall_s: float = 900.0
    crash_loop_max: int = 3
    crash_loop_window_s: float = 600.0
    cgroup_dir: Path | None = None  # where memory.current/memory.max live (auto-detected)
    watchdog_interval_s: float = 5.0
    # The sandbox (supervisor/sandbox.py): bwrap to use (default: found on PATH), whether agents
    # may run without one when the host cannot isolate, the uid/gid agents run as when we are
    # root (default: user switchboard-agent, else 61000), and extra paths agents must not see.
    bwrap_path: Path | None = None
    allow_unisolated_agents: bool = False
    sandbox_uid: int | None = None
    sandbox_gid: int | None = None
    sandbox_hide: tuple[Path, ...] = ()
    gcs_credentials_file: Path | None = None  # GOOGLE_APPLICATION_CREDENTIALS: hidden, protected
    # Secrets found in our own environment at load (AWS_SECRET_ACCESS_KEY, the service account
    # key file's private key, ...): never used, only kept out of logs and audit rows.
    env_secrets: tuple[Secret, ...] = field(default=(), repr=False)

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
    def agents_dir(self) -> Path:
        return self.home / "agents"

    @property
    def log_path(self) -> Path:
        return self.home / "switchboard.log"

    @property
    def instance_id(self) -> str:
        """Names this data directory in agent tags, so two supervisors never sweep each other."""
        return hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:12]

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
        """Every secret this process knows: for the log and audit redactor, nothing else."""
        values = [getattr(self, f.name).value for f in fields(self)
                  if isinstance(getattr(self, f.name), Secret)]
        values += [v for k, v in self.agent_env.items() if looks_secret(k)]
        values += [s.value for s in self.env_secrets]
        return tuple(dict.fromkeys(v for v in values if v))

    def gcs_client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"project": self.gcs_project or "switchboard"}
        if self.storage_emulator_host:
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
        return kwargs

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        home = Path(env.get("SWITCHBOARD_HOME") or Path(env.get("HOME", ".")) / ".switchboard")
        home = home.expanduser()
        cfg_path = Path(env.get("SWITCHBOARD_CONFIG") or home / "switchboard.toml").expanduser()
        file: dict[str, Any] = {}
        if cfg_path.exists():
            try:
                file = tomllib.loads(cfg_path.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read {cfg_path}: {exc}") from exc
        elif env.get("SWITCHBOARD_CONFIG"):
            raise ConfigError(f"SWITCHBOARD_CONFIG points at {cfg_path}, which does not exist")

        def pick(key: str, env_key: str, default: Any = None) -> Any:
            if env_key in env and env[env_key] != "":
                return env[env_key]
            return file.get(key, default)

        def secret(key: str, env_key: str) -> Secret | None:
            value = pick(key, env_key)
            return Secret(str(value)) if value else None

        def optional(key: str, env_key: str) -> float | None:
            raw = pick(key, env_key)
            return None if raw in (None, "", "none") else number(key, env_key, 0.0)

        def number(key: str, env_key: str, default: float) -> float:
            raw = pick(key, env_key, default)
            try:
                value = float(raw)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{env_key} / {key} must be a number, got {raw!r}") from exc
            if value < 0:
                raise ConfigError(f"{env_key} / {key} must not be negative, got {raw!r}")
            return value

        def boolean(key: str, env_key: str, default: bool) -> bool:
            raw = pick(key, env_key, default)
            if isinstance(raw, bool):
                return raw
            word = str(raw).strip().lower()
            if word in ("1", "true", "yes", "on"):
                return True
            if word in ("0", "false", "no", "off"):
                return False
            raise ConfigError(f"{env_key} / {key} must be true or false, got {raw!r}")

        def whole(key: str, env_key: str) -> int | None:
            raw = pick(key, env_key)
            if raw in (None, ""):
                return None
            try:
                return int(str(raw))
            except ValueError as exc:
                raise ConfigError(f"{env_key} / {key} must be a whole number, got {raw!r}") \
                    from exc

        mode = str(pick("permission_mode", "SWITCHBOARD_PERMISSION_MODE", "default"))
        if mode not in PERMISSION_MODES:
            raise ConfigError(f"permission_mode must be one of {', '.join(PERMISSION_MODES)}")
        console_raw = pick("console", "SWITCHBOARD_CONSOLE")
        console = None if console_raw is None else str(console_raw).lower() in ("1", "true", "yes")
        agent_env = file.get("agent_env", {})
        if not isinstance(agent_env, dict):
            raise ConfigError("[agent_env] in the config file must be a table of strings")
        passthrough = _passthrough(
            pick("agent_env_passthrough", "SWITCHBOARD_AGENT_ENV_PASSTHROUGH", ()))
        on_timeout = str(pick("approval_on_timeout", "SWITCHBOARD_APPROVAL_ON_TIMEOUT", "deny"))
        if on_timeout not in ON_TIMEOUT:
            raise ConfigError("approval_on_timeout must be 'deny' or 'pause'")
        policy = pick("policy_file", "SWITCHBOARD_POLICY")
        cli = pick("claude_cli", "SWITCHBOARD_CLAUDE_CLI")
        config_dir = pick("claude_config_dir", "CLAUDE_CONFIG_DIR")
        return cls(
            home=home,
            claude_cli=Path(cli).expanduser().absolute() if cli else None,
            default_model=pick("model", "SWITCHBOARD_MODEL"),
            permission_mode=mode,
            anthropic_api_key=secret("anthropic_api_key", "ANTHROPIC_API_KEY"),
            anthropic_auth_token=secret("anthropic_auth_token", "ANTHROPIC_AUTH_TOKEN"),
            anthropic_base_url=pick("anthropic_base_url", "ANTHROPIC_BASE_URL"),
            claude_oauth_token=secret("claude_oauth_token", "CLAUDE_CODE_OAUTH_TOKEN"),
            claude_config_dir=Path(config_dir).expanduser() if config_dir else None,
            agent_env={str(k): str(v) for k, v in agent_env.items()},
            agent_env_passthrough=tuple(passthrough),
            kill_grace_s=number("kill_grace_s", "SWITCHBOARD_KILL_GRACE_S", 5.0),
            stop_grace_s=number("stop_grace_s", "SWITCHBOARD_STOP_GRACE_S", 10.0),
            shutdown_grace_s=number("shutdown_grace_s", "SWITCHBOARD_SHUTDOWN_GRACE_S", 30.0),
            max_prompt_chars=int(number("max_prompt_chars", "SWITCHBOARD_MAX_PROMPT_CHARS", 1e5)),
            telegram_token=secret("telegram_bot_token", "TELEGRAM_BOT_TOKEN"),
            telegram_api_base_url=pick("telegram_api_base_url", "TELEGRAM_API_BASE_URL"),
            telegram_admin_ids=_id_list(pick("telegram_admin_ids", "TELEGRAM_ADMIN_IDS", ())),
            invite_ttl_s=number("invite_ttl_s", "SWITCHBOARD_INVITE_TTL_S", 3600.0),
            telegram_webhook_url=pick("telegram_webhook_url", "TELEGRAM_WEBHOOK_URL"),
            telegram_webhook_listen=str(pick("telegram_webhook_listen", "TELEGRAM_WEBHOOK_LISTEN",
                                             "0.0.0.0")),  # noqa: S104
            telegram_webhook_port=int(number("telegram_webhook_port", "TELEGRAM_WEBHOOK_PORT",
                                             8443)),
            telegram_webhook_secret=secret("telegram_webhook_secret", "TELEGRAM_WEBHOOK_SECRET"),
            status_card_interval_s=number("status_card_interval_s",
                                          "SWITCHBOARD_STATUS_CARD_INTERVAL_S", 2.0),
            slack_bot_token=secret("slack_bot_token", "SLACK_BOT_TOKEN"),
            slack_app_token=secret("slack_app_token", "SLACK_APP_TOKEN"),
            console=console,
            log_level=str(pick("log_level", "SWITCHBOARD_LOG_LEVEL", "INFO")).upper(),
            config_file=cfg_path if cfg_path.exists() else None,
            policy_file=Path(policy).expanduser() if policy else None,
            approval_reminder_s=number("approval_reminder_s", "SWITCHBOARD_APPROVAL_REMINDER_S",
                                       300.0),
            approval_timeout_s=number("approval_timeout_s", "SWITCHBOARD_APPROVAL_TIMEOUT_S",
                                      900.0),
            approval_on_timeout=on_timeout,
            gcs_bucket=pick("gcs_bucket", "SWITCHBOARD_GCS_BUCKET"),
            gcs_project=pick("gcs_project", "GOOGLE_CLOUD_PROJECT"),
            storage_emulator_host=env.get("STORAGE_EMULATOR_HOST"),
            kill_poll_s=number("kill_poll_s", "SWITCHBOARD_KILL_POLL_S", 10.0),
            bwrap_path=Path(b).expanduser() if (b := pick("bwrap_path", "SWITCHBOARD_BWRAP"))
            else None,
            allow_unisolated_agents=boolean("allow_unisolated_agents",
                                            "SWITCHBOARD_ALLOW_UNISOLATED_AGENTS", False),
            sandbox_uid=whole("sandbox_uid", "SWITCHBOARD_SANDBOX_UID"),
            sandbox_gid=whole("sandbox_gid", "SWITCHBOARD_SANDBOX_GID"),
            sandbox_hide=tuple(Path(p).expanduser() for p in _passthrough_paths(
                pick("sandbox_hide", "SWITCHBOARD_SANDBOX_HIDE", ()))),
            env_secrets=_env_secrets(env),
            gcs_credentials_file=Path(c).expanduser() if (c := env.get(
                "GOOGLE_APPLICATION_CREDENTIALS")) else None,
            **_limits(number, optional),
        )

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
        env.update(self.agent_env)
        return env


# Guardrail settings: (field, TOML key = field, environment variable, default; None = optional).
LIMIT_FIELDS: tuple[tuple[str, str, float | None, type], ...] = (
    ("max_agents", "SWITCHBOARD_MAX_AGENTS", 100, int),
    ("max_depth", "SWITCHBOARD_MAX_DEPTH", 3, int),
    ("max_children", "SWITCHBOARD_MAX_CHILDREN", 20, int),
    ("session_ttl_s", "SWITCHBOARD_SESSION_TTL_S", 4 * 3600.0, float),
    ("ttl_warn_s", "SWITCHBOARD_TTL_WARN_S", 600.0, float),
    ("agent_budget_usd", "SWITCHBOARD_AGENT_BUDGET_USD", None, float),
    ("global_budget_usd", "SWITCHBOARD_GLOBAL_BUDGET_USD", None, float),
    ("spawns_per_minute", "SWITCHBOARD_SPAWNS_PER_MINUTE", 30, int),
    ("commands_per_minute", "SWITCHBOARD_COMMANDS_PER_MINUTE", 120, int),
    ("messages_per_minute", "SWITCHBOARD_MESSAGES_PER_MINUTE", 60, int),
    ("memory_refuse_pct", "SWITCHBOARD_MEMORY_REFUSE_PCT", 85.0, float),
    ("memory_warn_pct", "SWITCHBOARD_MEMORY_WARN_PCT", 75.0, float),
    ("stall_s", "SWITCHBOARD_STALL_S", 900.0, float),
    ("crash_loop_max", "SWITCHBOARD_CRASH_LOOP_MAX", 3, int),
    ("crash_loop_window_s", "SWITCHBOARD_CRASH_LOOP_WINDOW_S", 600.0, float),
    ("watchdog_interval_s", "SWITCHBOARD_WATCHDOG_INTERVAL_S", 5.0, float),
)


def _limits(number: Any, optional: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, env_key, default, kind in LIMIT_FIELDS:
        value = optional(name, env_key) if default is None else number(name, env_key, default)
        out[name] = value if value is None else kind(value)
    return out


def _passthrough(raw: Any) -> tuple[str, ...]:
    names = tuple(p for p in raw.split(",") if p) if isinstance(raw, str) else tuple(raw)
    leaked = [p for p in names if p.upper().startswith(WITHHELD_PREFIXES)]
    if leaked:
        raise ConfigError(
            f"agent_env_passthrough may not name {', '.join(leaked)}: chat tokens, cloud "
            "credentials and Switchboard's own settings never reach an agent"
        )
    return names


def _passthrough_paths(raw: Any) -> tuple[str, ...]:
    return tuple(p for p in raw.split(":") if p) if isinstance(raw, str) else tuple(raw)
def _env_secrets(env: Mapping[str, str]) -> tuple[Secret, ...]:
    values = [v for k, v in env.items() if v and looks_secret(k)]
    # The key file's path is harmless; the private key inside it is not. google-auth does not
    # log it, but an error that quotes the file must not carry it either.
    key_file = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if key_file:
        try:
            info = json.loads(Path(key_file).expanduser().read_text())
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict):
            for name in ("private_key", "private_key_id", "client_secret", "refresh_token"):
                if isinstance(info.get(name), str):
                    values.append(info[name])
                    values += [line for line in info[name].splitlines() if len(line) >= 16
                               and "PRIVATE KEY" not in line]
    return tuple(Secret(v) for v in dict.fromkeys(values))


def _id_list(raw: Any) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    ids = tuple(str(i).strip() for i in items if str(i).strip())
    bad = [i for i in ids if not i.lstrip("-").isdigit()]
    if bad:
        raise ConfigError(f"telegram_admin_ids must be numeric Telegram user ids, got {bad}")
    return ids
