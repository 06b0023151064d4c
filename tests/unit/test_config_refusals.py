"""Settings refused at start (issue 10): unknown keys, fractions, unclear booleans; sections."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
from pydantic import ValidationError

from supervisor import launcher
from supervisor.config import Settings
from supervisor.config_sources import key_of, kind_of
from supervisor.config_types import FALSE_WORDS, TRUE_WORDS, Secret
from supervisor.errors import ConfigError


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}


@pytest.fixture
def settings_file(tmp_path: Path) -> Path:
    path = tmp_path / ".switchboard" / "switchboard.toml"
    path.parent.mkdir(parents=True)
    return path


def refusal(env: dict[str, str], path: Path | None = None, text: str = "") -> str:
    if path is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as info:
        Settings.load(env)
    return str(info.value)


def fields_of_kind(name: str) -> list[str]:
    return [f for f, info in Settings.model_fields.items()
            if (k := kind_of(info)) is not None and k.name == name and key_of(info).env]


WHOLE = fields_of_kind("whole number")
NUMBERS = fields_of_kind("number")
FLAGS = fields_of_kind("true or false")


# -- unknown keys --------------------------------------------------------------------------------


# Regression: `max_agent = 5` (misspelt) was ignored and the default of 100 stood.
def test_a_misspelt_key_is_refused_with_a_suggestion(env, settings_file):
    text = refusal(env, settings_file, "max_agent = 5\n")
    assert "max_agent is not a setting (did you mean max_agents?)" in text
    assert str(settings_file) in text


@pytest.mark.parametrize("toml,expected", [
    ("[telegram]\nbot_tokn = 'x'\n", "telegram.bot_tokn is not a setting (did you mean "
                                     "telegram.bot_token?)"),
    ("[telegam]\nbot_token = 'x'\n", "telegam is not a setting (did you mean telegram?)"),
    ("[limits]\nkill_grace_s = 3\n", "limits.kill_grace_s is not a setting (did you mean "
                                     "kill_grace_s?)"),
    ("[gcs]\nmax_agents = 3\n", "gcs.max_agents is not a setting (did you mean "
                                "limits.max_agents?)"),
    ("[telegram.webhook]\nurl = 'x'\n", "telegram.webhook is not a setting"),
    ("bot_token = 'x'\n", "bot_token is not a setting (did you mean telegram.bot_token or "
                          "slack.bot_token?)"),
    ("zzz = 1\n", "zzz is not a setting"),
])
def test_unknown_keys_at_any_level(env, settings_file, toml, expected):
    assert expected in refusal(env, settings_file, toml)


def test_every_unknown_key_is_named_at_once(env, settings_file):
    text = refusal(env, settings_file, "max_agent = 5\nconsol = true\n[limits]\nstal_s = 1\n")
    assert "3 problems" in text
    for key in ("max_agent", "consol", "limits.stal_s"):
        assert f"{key} is not a setting" in text


def test_a_section_must_be_a_table(env, settings_file):
    text = refusal(env, settings_file, 'telegram = "123:secret-token"\n')
    assert "telegram must be a table (a [telegram] section)" in text
    assert "secret-token" not in text


@pytest.mark.parametrize("toml", [
    "max_agents = 3\n[limits]\nmax_agents = 4\n",
    'telegram_bot_token = "a"\n[telegram]\nbot_token = "b"\n',
    'kill_poll_s = 3\ngcs.poll_s = 4\n',
])
def test_a_setting_given_in_its_section_and_under_its_old_name_is_refused(env, settings_file,
                                                                         toml):
    assert "is given twice" in refusal(env, settings_file, toml)


# Regression: a typo in a SWITCHBOARD_ variable was as silent as one in the file.
def test_an_unknown_switchboard_variable_is_refused(env):
    env["SWITCHBOARD_MAX_AGENT"] = "5"
    assert ("SWITCHBOARD_MAX_AGENT is not a setting (did you mean SWITCHBOARD_MAX_AGENTS?)"
            in refusal(env))


def test_variables_switchboard_sets_for_its_agents_are_not_settings_but_not_refused(env):
    for name in (*launcher.CONTROL, launcher.KEYS_VAR):
        env[name] = "1"
    env["TELEGRAM_SOMETHING_ELSE"] = "x"  # only our own prefix is checked
    assert Settings.load(env).max_agents == 100


# -- bad values ----------------------------------------------------------------------------------


# Regression: 2.9 for an integer became 2.
@pytest.mark.parametrize("field", WHOLE)
def test_a_fraction_for_a_whole_number_is_refused_from_the_environment(env, field):
    key = key_of(Settings.model_fields[field])
    env[key.env] = "2.9"
    text = refusal(env)
    assert f"environment: {key.env} / {key.toml} must be a whole number, got '2.9'" in text


@pytest.mark.parametrize("field", WHOLE)
def test_a_fraction_for_a_whole_number_is_refused_from_the_file(env, settings_file, field):
    key = key_of(Settings.model_fields[field])
    text = refusal(env, settings_file, f"{key.toml} = 2.9\n")
    assert f"{settings_file}: {key.env} / {key.toml} must be a whole number, got 2.9" in text


def test_a_whole_number_written_with_a_point_zero_is_that_number(env, settings_file):
    settings_file.write_text("max_prompt_chars = 5000.0\n[limits]\nmax_agents = 7.0\n")
    s = Settings.load(env)
    assert (s.max_prompt_chars, s.max_agents) == (5000, 7)
    assert isinstance(s.max_agents, int)


@pytest.mark.parametrize("field", WHOLE + NUMBERS)
def test_true_is_not_a_number(env, settings_file, field):
    key = key_of(Settings.model_fields[field])
    assert "got True" in refusal(env, settings_file, f"{key.toml} = true\n")


@pytest.mark.parametrize("field", WHOLE + NUMBERS)
def test_negative_values_are_refused(env, field):
    key = key_of(Settings.model_fields[field])
    env[key.env] = "-1"
    text = refusal(env)
    assert key.env in text and "got '-1'" in text
    assert "must not be negative" in text or "must be at least 1" in text or "more than 0" in text


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_not_a_finite_number(env, raw):
    env["SWITCHBOARD_STALL_S"] = raw
    assert "SWITCHBOARD_STALL_S / limits.stall_s must" in refusal(env)


# Regression: console = on (and anything but 1/true/yes) meant off.
@pytest.mark.parametrize("field", FLAGS)
@pytest.mark.parametrize("word", ["maybe", "y", "t", "enabled", "2"])
def test_an_unclear_boolean_word_is_refused(env, field, word):
    key = key_of(Settings.model_fields[field])
    env[key.env] = word
    assert (f"{key.env} / {key.toml} must be true or false (also yes/no/on/off/1/0), "
            f"got {word!r}") in refusal(env)


@pytest.mark.parametrize("field", FLAGS)
@pytest.mark.parametrize("word,expected", [(w, True) for w in TRUE_WORDS]
                         + [(w, False) for w in FALSE_WORDS]
                         + [(" On ", True), ("OFF", False)])
def test_clear_boolean_words(env, field, word, expected):
    env[key_of(Settings.model_fields[field]).env] = word
    assert getattr(Settings.load(env), field) is expected


@pytest.mark.parametrize("toml,expected", [
    ('console = "on"\n', True), ("console = 1\n", True), ("console = false\n", False),
    ('allow_unisolated_agents = "yes"\n', True),
])
def test_boolean_words_in_the_file(env, settings_file, toml, expected):
    settings_file.write_text(toml)
    s = Settings.load(env)
    assert expected in (s.console, s.allow_unisolated_agents)


@pytest.mark.parametrize("env_key,raw,accepted", [
    ("SWITCHBOARD_APPROVAL_ON_TIMEOUT", "later", "deny, pause"),
    ("SWITCHBOARD_LOG_LEVEL", "loud", "DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    ("SWITCHBOARD_PERMISSION_MODE", "yolo", "default, acceptEdits, plan"),
])
def test_an_enumerated_setting_lists_what_it_accepts(env, env_key, raw, accepted):
    env[env_key] = raw
    text = refusal(env)
    assert f"must be one of {accepted}" in text and repr(raw) in text


@pytest.mark.parametrize("env_key,raw,expected", [
    ("SWITCHBOARD_MEMORY_WARN_PCT", "101", "must be at most 100"),
    ("TELEGRAM_WEBHOOK_PORT", "0", "must be at least 1"),
    ("TELEGRAM_WEBHOOK_PORT", "70000", "must be at most 65535"),
    ("SWITCHBOARD_WATCHDOG_INTERVAL_S", "0", "must be more than 0"),
    ("SWITCHBOARD_KILL_POLL_S", "0", "must be more than 0"),
    ("SWITCHBOARD_SANDBOX_UID", "-5", "must not be negative"),
    ("TELEGRAM_ADMIN_IDS", "123,bob", "must be numeric Telegram user ids (not 'bob')"),
    ("SWITCHBOARD_AGENT_BUDGET_USD", "lots", "must be a number (or \"none\")"),
])
def test_out_of_range_values(env, env_key, raw, expected):
    env[env_key] = raw
    text = refusal(env)
    assert env_key in text and expected in text


def test_text_settings_must_be_text(env, settings_file):
    assert "model must be text (a quoted string), got 3" in refusal(env, settings_file,
                                                                    "model = 3\n")


def test_a_list_with_several_bad_items_is_one_problem(env, settings_file):
    text = refusal(env, settings_file, "sandbox_hide = [1, 2]\n")
    assert text == (f"{settings_file}: SWITCHBOARD_SANDBOX_HIDE / sandbox_hide must be a list of "
                    "paths (or a ':'-separated string), got [1, 2]")


def test_every_bad_value_is_named_at_once(env, settings_file):
    env["SWITCHBOARD_CONSOLE"] = "maybe"
    text = refusal(env, settings_file, "kill_grace_s = -1\n[limits]\nmax_agents = 2.9\n")
    assert "3 problems" in text
    for key in ("SWITCHBOARD_CONSOLE / console", "kill_grace_s", "limits.max_agents"):
        assert key in text


def test_a_refused_secret_is_not_shown(env, settings_file):
    text = refusal(env, settings_file,
                   "[telegram]\nbot_token = 123456789\n[agent_env]\nANTHROPIC_API_KEY = "
                   "'sk-ant-hidden'\nNESTED = [1]\n")
    assert "telegram.bot_token must be text (a quoted string), got a number" in text
    assert "123456789" not in text and "sk-ant-hidden" not in text
    assert "NESTED is not" in text


# Regression: the ConfigError was chained to pydantic's error, whose text shows every input.
def test_a_refused_secret_is_not_in_the_traceback_either(env, settings_file):
    settings_file.write_text("[telegram]\nbot_token = 123456789\n")
    with pytest.raises(ConfigError) as info:
        Settings.load(env)
    assert "123456789" not in "".join(traceback.format_exception(info.value))


def test_agent_env_passthrough_still_refuses_withheld_names(env):
    env["SWITCHBOARD_AGENT_ENV_PASSTHROUGH"] = "GOPATH,TELEGRAM_BOT_TOKEN"
    assert "agent_env_passthrough may not name TELEGRAM_BOT_TOKEN" in refusal(env)


# -- accepted values -----------------------------------------------------------------------------


def test_values_from_the_environment_are_typed(env):
    env.update({"SWITCHBOARD_MAX_AGENTS": "5", "SWITCHBOARD_STALL_S": "2",
                "SWITCHBOARD_AGENT_BUDGET_USD": "none", "SWITCHBOARD_GLOBAL_BUDGET_USD": "12.5",
                "TELEGRAM_ADMIN_IDS": " 1, 2 ,", "SWITCHBOARD_SANDBOX_HIDE": "~/a::/b",
                "SWITCHBOARD_SANDBOX_UID": "1000"})
    s = Settings.load(env)
    assert s.max_agents == 5 and isinstance(s.max_agents, int)
    assert s.stall_s == 2.0 and isinstance(s.stall_s, float)
    assert (s.agent_budget_usd, s.global_budget_usd) == (None, 12.5)
    assert s.telegram_admin_ids == ("1", "2")
    assert s.sandbox_hide == (Path("~/a").expanduser(), Path("/b"))
    assert s.sandbox_uid == 1000


def test_paths_are_expanded(env, settings_file):
    settings_file.write_text('policy_file = "~/p.toml"\nbwrap_path = "~/bin/bwrap"\n'
                             'claude_config_dir = "~/c"\nsandbox_hide = ["~/secret"]\n')
    s = Settings.load(env)
    home = Path("~").expanduser()
    assert s.policy_file == home / "p.toml" and s.bwrap_path == home / "bin" / "bwrap"
    assert s.claude_config_dir == home / "c" and s.sandbox_hide == (home / "secret",)


def test_an_empty_string_in_the_file_counts_as_unset(env, settings_file):
    settings_file.write_text('model = ""\n[telegram]\nbot_token = ""\n')
    s = Settings.load(env)
    assert (s.default_model, s.telegram_token) == (None, None)


# -- sections ------------------------------------------------------------------------------------


SECTIONED = """
log_level = "debug"
[telegram]
bot_token = "123:tg"
admin_ids = [111, "222"]
api_base_url = "http://127.0.0.1:1"
webhook_url = "https://example.invalid/hook"
webhook_listen = "127.0.0.1"
webhook_port = 9443
webhook_secret = "hook-secret"
[slack]
bot_token = "xoxb-1"
app_token = "xapp-1"
[limits]
max_agents = 7
agent_budget_usd = 2.5
memory_warn_pct = 50
[gcs]
bucket = "ops"
project = "proj"
poll_s = 2
"""

FLAT = """
log_level = "debug"
telegram_bot_token = "123:tg"
telegram_admin_ids = "111,222"
telegram_api_base_url = "http://127.0.0.1:1"
telegram_webhook_url = "https://example.invalid/hook"
telegram_webhook_listen = "127.0.0.1"
telegram_webhook_port = 9443
telegram_webhook_secret = "hook-secret"
slack_bot_token = "xoxb-1"
slack_app_token = "xapp-1"
max_agents = 7
agent_budget_usd = 2.5
memory_warn_pct = 50
gcs_bucket = "ops"
gcs_project = "proj"
kill_poll_s = 2
"""


@pytest.mark.parametrize("text", [SECTIONED, FLAT], ids=["sections", "old flat names"])
def test_sections_and_old_flat_names_load_the_same(env, settings_file, text):
    settings_file.write_text(text)
    s = Settings.load(env)
    assert s.telegram_token == Secret("123:tg") and s.telegram_admin_ids == ("111", "222")
    assert s.telegram_api_base_url == "http://127.0.0.1:1"
    assert (s.telegram_webhook_url, s.telegram_webhook_listen, s.telegram_webhook_port) == (
        "https://example.invalid/hook", "127.0.0.1", 9443)
    assert s.telegram_webhook_secret == Secret("hook-secret")
    assert (s.slack_bot_token, s.slack_app_token) == (Secret("xoxb-1"), Secret("xapp-1"))
    assert (s.max_agents, s.agent_budget_usd, s.memory_warn_pct) == (7, 2.5, 50.0)
    assert (s.gcs_bucket, s.gcs_project, s.kill_poll_s) == ("ops", "proj", 2.0)
    assert s.log_level == "DEBUG"


def test_dotted_keys_are_the_same_as_sections(env, settings_file):
    settings_file.write_text('telegram.bot_token = "t"\nlimits.max_depth = 5\n')
    s = Settings.load(env)
    assert (s.telegram_token, s.max_depth) == (Secret("t"), 5)


def test_the_environment_overrides_a_section(env, settings_file):
    settings_file.write_text("[limits]\nmax_agents = 7\nmax_depth = 2\n")
    env["SWITCHBOARD_MAX_AGENTS"] = "9"
    s = Settings.load(env)
    assert (s.max_agents, s.max_depth) == (9, 2)


def test_a_bad_value_under_an_old_flat_name_is_named_as_written(env, settings_file):
    text = refusal(env, settings_file, "max_agents = 2.9\n")
    assert "SWITCHBOARD_MAX_AGENTS / max_agents must be a whole number, got 2.9" in text


# -- direct construction -------------------------------------------------------------------------


# Regression guard: Settings(...) in tests must never pick up the runner's environment.
def test_direct_construction_reads_only_its_arguments(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHBOARD_MAX_AGENTS", "1")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "from-env")
    s = Settings(home=tmp_path, max_depth=5)
    assert (s.max_agents, s.max_depth, s.telegram_token) == (100, 5, None)
    assert s.with_(max_agents=3).max_agents == 3


def test_direct_construction_and_with_are_checked_too(tmp_path):
    s = Settings(home=tmp_path)
    with pytest.raises(ValidationError):
        s.with_(max_agents=2.9)
    with pytest.raises(ValidationError):
        s.with_(max_agent=3)
    with pytest.raises(ValidationError):
        Settings(home=tmp_path, permission_mode="yolo")
