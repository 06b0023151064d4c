"""Settings: environment and TOML sources, precedence, validation, secrets, agent environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config import AGENT_ENV_DEFAULTS, PERMISSION_MODES, Settings
from supervisor.config_types import Secret
from supervisor.errors import ConfigError, SupervisorError

CHAT_AND_CLOUD_SECRETS = {
    "TELEGRAM_BOT_TOKEN": "123456:telegram-secret",
    "SLACK_BOT_TOKEN": "xoxb-slack-secret",
    "SLACK_APP_TOKEN": "xapp-slack-secret",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secrets/gcp.json",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "GITHUB_TOKEN": "ghp_secret",
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A minimal environment whose HOME (and so the data dir) is the test's tmp dir."""
    return {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}


def write_toml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- sources -----------------------------------------------------------------------------------


def test_defaults_from_an_almost_empty_environment(env, tmp_path):
    s = Settings.load(env)
    assert s.home == tmp_path / ".switchboard"
    assert s.db_path == s.home / "switchboard.db"
    assert s.workspaces == s.home / "workspaces"
    assert s.run_dir == s.home / "run"
    assert (s.claude_cli, s.default_model, s.permission_mode) == (None, None, "default")
    assert (s.kill_grace_s, s.stop_grace_s, s.shutdown_grace_s) == (5.0, 10.0, 30.0)
    assert s.max_prompt_chars == 100_000 and isinstance(s.max_prompt_chars, int)
    assert (s.telegram_token, s.slack_bot_token, s.anthropic_api_key) == (None, None, None)
    assert s.console is None
    assert s.log_level == "INFO"
    assert s.config_file is None
    assert s.credential_source == "claude login"


def test_load_from_environment(env, tmp_path):
    env.update({
        "SWITCHBOARD_HOME": str(tmp_path / "sb"),
        "SWITCHBOARD_CLAUDE_CLI": "~/bin/claude",
        "SWITCHBOARD_MODEL": "sonnet",
        "SWITCHBOARD_PERMISSION_MODE": "acceptEdits",
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9999",
        "CLAUDE_CONFIG_DIR": "~/claude-cfg",
        "SWITCHBOARD_KILL_GRACE_S": "2.5",
        "SWITCHBOARD_STOP_GRACE_S": "0",
        "SWITCHBOARD_SHUTDOWN_GRACE_S": "12",
        "SWITCHBOARD_MAX_PROMPT_CHARS": "5000",
        "TELEGRAM_BOT_TOKEN": "123:tg",
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_APP_TOKEN": "xapp-1",
        "SWITCHBOARD_CONSOLE": "yes",
        "SWITCHBOARD_LOG_LEVEL": "debug",
        "SWITCHBOARD_AGENT_ENV_PASSTHROUGH": "GOPATH,,CARGO_HOME",
    })
    s = Settings.load(env)
    assert s.home == tmp_path / "sb"
    # `~` expands against the process's HOME (Path.expanduser), not the HOME of the given dict.
    assert s.claude_cli == Path("~/bin/claude").expanduser()
    assert s.default_model == "sonnet"
    assert s.permission_mode == "acceptEdits"
    assert s.anthropic_api_key == Secret("sk-ant-secret")
    assert s.anthropic_base_url == "http://127.0.0.1:9999"
    assert s.claude_config_dir is not None and s.claude_config_dir.name == "claude-cfg"
    assert (s.kill_grace_s, s.stop_grace_s, s.shutdown_grace_s) == (2.5, 0.0, 12.0)
    assert s.max_prompt_chars == 5000
    assert s.telegram_token == Secret("123:tg")
    assert s.slack_bot_token == Secret("xoxb-1") and s.slack_app_token == Secret("xapp-1")
    assert s.console is True
    assert s.log_level == "DEBUG"
    assert s.agent_env_passthrough == ("GOPATH", "CARGO_HOME")
    assert s.credential_source == "ANTHROPIC_API_KEY"


@pytest.mark.parametrize("raw,expected", [("1", True), ("true", True), ("YES", True),
                                          ("0", False), ("no", False), ("off", False)])
def test_console_flag(env, raw, expected):
    env["SWITCHBOARD_CONSOLE"] = raw
    assert Settings.load(env).console is expected


def test_load_from_the_toml_file_in_the_data_dir(env, tmp_path):
    cfg = write_toml(tmp_path / ".switchboard" / "switchboard.toml", """
model = "opus"
permission_mode = "plan"
kill_grace_s = 1.5
max_prompt_chars = 777
telegram_bot_token = "999:from-file"
console = false
log_level = "warning"
agent_env_passthrough = ["GOPATH"]

[agent_env]
FOO = "bar"
NUMBER = 3
""")
    s = Settings.load(env)
    assert s.config_file == cfg
    assert (s.default_model, s.permission_mode) == ("opus", "plan")
    assert (s.kill_grace_s, s.max_prompt_chars) == (1.5, 777)
    assert s.telegram_token == Secret("999:from-file")
    assert s.console is False
    assert s.log_level == "WARNING"
    assert s.agent_env_passthrough == ("GOPATH",)
    assert dict(s.agent_env) == {"FOO": "bar", "NUMBER": "3"}


def test_config_file_named_by_switchboard_config(env, tmp_path):
    cfg = write_toml(tmp_path / "etc" / "sb.toml", 'model = "haiku"\n')
    env["SWITCHBOARD_CONFIG"] = str(cfg)
    s = Settings.load(env)
    assert (s.config_file, s.default_model) == (cfg, "haiku")


def test_environment_overrides_the_file(env, tmp_path):
    write_toml(tmp_path / ".switchboard" / "switchboard.toml",
               'model = "opus"\nkill_grace_s = 1.5\npermission_mode = "plan"\n'
               'telegram_bot_token = "file-token"\n')
    env.update({"SWITCHBOARD_MODEL": "sonnet", "SWITCHBOARD_KILL_GRACE_S": "7",
                "TELEGRAM_BOT_TOKEN": "env-token"})
    s = Settings.load(env)
    assert (s.default_model, s.kill_grace_s) == ("sonnet", 7.0)
    assert s.telegram_token == Secret("env-token")
    assert s.permission_mode == "plan"  # not overridden: the file's value stands


def test_an_empty_environment_value_does_not_override_the_file(env, tmp_path):
    write_toml(tmp_path / ".switchboard" / "switchboard.toml", 'model = "opus"\n')
    env["SWITCHBOARD_MODEL"] = ""
    assert Settings.load(env).default_model == "opus"


def test_load_reads_os_environ_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHBOARD_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("SWITCHBOARD_MODEL", "from-os-environ")
    monkeypatch.delenv("SWITCHBOARD_CONFIG", raising=False)
    s = Settings.load()
    assert (s.home, s.default_model) == (tmp_path / "h", "from-os-environ")


# -- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("env_key,file_key,kind", [
    ("SWITCHBOARD_KILL_GRACE_S", "kill_grace_s", "a number"),
    ("SWITCHBOARD_STOP_GRACE_S", "stop_grace_s", "a number"),
    ("SWITCHBOARD_SHUTDOWN_GRACE_S", "shutdown_grace_s", "a number"),
    ("SWITCHBOARD_MAX_PROMPT_CHARS", "max_prompt_chars", "a whole number"),
])
@pytest.mark.parametrize("raw", ["ten", "5s", "1,5"])
def test_bad_number_in_the_environment_names_the_key(env, env_key, file_key, kind, raw):
    env[env_key] = raw
    with pytest.raises(ConfigError) as info:
        Settings.load(env)
    text = str(info.value)
    assert env_key in text and file_key in text
    assert f"must be {kind}" in text and repr(raw) in text
    assert isinstance(info.value, SupervisorError)


def test_bad_number_in_the_file_names_the_key(env, tmp_path):
    write_toml(tmp_path / ".switchboard" / "switchboard.toml", 'stop_grace_s = "soon"\n')
    with pytest.raises(ConfigError, match=r"stop_grace_s must be a number, got 'soon'"):
        Settings.load(env)


def test_negative_number_is_refused(env):
    env["SWITCHBOARD_KILL_GRACE_S"] = "-1"
    with pytest.raises(ConfigError, match=r"SWITCHBOARD_KILL_GRACE_S / kill_grace_s must not be "
                                          r"negative, got '-1'"):
        Settings.load(env)


@pytest.mark.parametrize("mode", ["yolo", "DEFAULT", "accept_edits"])
def test_bad_permission_mode(env, mode):
    env["SWITCHBOARD_PERMISSION_MODE"] = mode
    with pytest.raises(ConfigError) as info:
        Settings.load(env)
    assert "permission_mode must be one of" in str(info.value)
    for valid in PERMISSION_MODES:
        assert valid in str(info.value)


def test_bad_permission_mode_in_the_file(env, tmp_path):
    write_toml(tmp_path / ".switchboard" / "switchboard.toml", 'permission_mode = "yolo"\n')
    with pytest.raises(ConfigError, match="permission_mode must be one of"):
        Settings.load(env)


@pytest.mark.parametrize("mode", PERMISSION_MODES)
def test_every_documented_permission_mode_loads(env, mode):
    env["SWITCHBOARD_PERMISSION_MODE"] = mode
    assert Settings.load(env).permission_mode == mode


def test_switchboard_config_pointing_nowhere(env, tmp_path):
    env["SWITCHBOARD_CONFIG"] = str(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="SWITCHBOARD_CONFIG points at .*missing.toml, which "
                                          "does not exist"):
        Settings.load(env)


def test_invalid_toml(env, tmp_path):
    cfg = write_toml(tmp_path / ".switchboard" / "switchboard.toml", "model = \n[[[")
    with pytest.raises(ConfigError, match=f"cannot read {cfg}"):
        Settings.load(env)


def test_agent_env_must_be_a_table(env, tmp_path):
    write_toml(tmp_path / ".switchboard" / "switchboard.toml", 'agent_env = "FOO=bar"\n')
    with pytest.raises(ConfigError, match=r"\[agent_env\] .* must be a table"):
        Settings.load(env)


# -- secrets -----------------------------------------------------------------------------------


def test_secret_repr_and_str_hide_the_value():
    s = Secret("hunter2")
    assert repr(s) == "Secret('***')"
    assert str(s) == "Secret('***')"
    assert f"{s}" == "Secret('***')" and "hunter2" not in f"{s!r} {s!s}"
    assert s.value == "hunter2"


def test_settings_repr_hides_every_secret(env):
    env.update({"ANTHROPIC_API_KEY": "sk-ant-hidden", "ANTHROPIC_AUTH_TOKEN": "auth-hidden",
                "TELEGRAM_BOT_TOKEN": "tg-hidden", "SLACK_BOT_TOKEN": "xoxb-hidden",
                "SLACK_APP_TOKEN": "xapp-hidden"})
    s = Settings.load(env)
    text = repr(s) + str(s)
    for value in ("sk-ant-hidden", "auth-hidden", "tg-hidden", "xoxb-hidden", "xapp-hidden"):
        assert value not in text
    assert "Secret('***')" in text


# Regression: Settings' repr printed agent_env, which may carry ANTHROPIC_API_KEY.
def test_settings_repr_hides_a_key_given_through_agent_env(env, tmp_path):
    write_toml(tmp_path / ".switchboard" / "switchboard.toml",
               '[agent_env]\nANTHROPIC_API_KEY = "sk-ant-in-agent-env"\n')
    s = Settings.load(env)
    assert s.credential_source == "agent_env"
    assert "sk-ant-in-agent-env" not in repr(s)


def test_settings_are_frozen_and_with_makes_a_copy(env):
    s = Settings.load(env)
    with pytest.raises(AttributeError):
        s.default_model = "x"  # type: ignore[misc]
    t = s.with_(default_model="x")
    assert (s.default_model, t.default_model) == (None, "x")


def test_instance_id_is_stable_and_per_data_dir(tmp_path):
    a = Settings(home=tmp_path / "a")
    assert a.instance_id == Settings(home=tmp_path / "a").instance_id
    assert a.instance_id != Settings(home=tmp_path / "b").instance_id
    assert len(a.instance_id) == 12 and int(a.instance_id, 16) >= 0


# -- the agent environment ---------------------------------------------------------------------


def base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "ANTHROPIC_API_KEY": "sk-ant-agent-key",
        "SWITCHBOARD_HOME": str(home / "sb"),
        "GOPATH": "/go",
        **CHAT_AND_CLOUD_SECRETS,
    }


def test_agent_environment_withholds_chat_tokens_and_cloud_credentials(tmp_path):
    base = base_env(tmp_path)
    s = Settings.load(base)
    env = s.agent_environment(base)
    for name, value in CHAT_AND_CLOUD_SECRETS.items():
        assert name not in env
        assert value not in env.values()
    assert "SWITCHBOARD_HOME" not in env
    assert (env["PATH"], env["HOME"], env["LANG"], env["TERM"]) == (
        base["PATH"], base["HOME"], "C.UTF-8", "xterm")
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-agent-key"
    for key, value in AGENT_ENV_DEFAULTS.items():
        assert env[key] == value
    assert "GOPATH" not in env  # not on the allowlist unless passed through


def test_agent_environment_from_os_environ(monkeypatch, tmp_path):
    for name, value in CHAT_AND_CLOUD_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", "/only/this")
    env = Settings(home=tmp_path, anthropic_api_key=Secret("sk-ant-x")).agent_environment()
    assert not set(CHAT_AND_CLOUD_SECRETS) & set(env)
    assert env["PATH"] == "/only/this"
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-x"


def test_agent_environment_claude_settings_passthrough_and_extras(tmp_path):
    base = base_env(tmp_path)
    s = Settings(
        home=tmp_path,
        anthropic_auth_token=Secret("auth-tok"),
        anthropic_base_url="http://127.0.0.1:1",
        claude_config_dir=tmp_path / "cfg",
        agent_env_passthrough=("GOPATH", "NOT_SET_ANYWHERE"),
        agent_env={"EXTRA": "1", "DISABLE_TELEMETRY": "0"},
    )
    env = s.agent_environment(base)
    assert env["ANTHROPIC_AUTH_TOKEN"] == "auth-tok"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1"
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "cfg")
    assert env["GOPATH"] == "/go"
    assert "NOT_SET_ANYWHERE" not in env
    assert env["EXTRA"] == "1"
    assert env["DISABLE_TELEMETRY"] == "0"  # explicit agent_env wins over our defaults
    # The base env's API key is not copied: only the configured credential is given.
    assert "ANTHROPIC_API_KEY" not in env
    assert not set(CHAT_AND_CLOUD_SECRETS) & set(env)
    assert s.credential_source == "ANTHROPIC_AUTH_TOKEN"


def test_credential_source_from_agent_env(tmp_path):
    s = Settings(home=tmp_path, agent_env={"ANTHROPIC_API_KEY": "k"})
    assert s.credential_source == "agent_env"
