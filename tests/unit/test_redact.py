"""Redaction: known values in every printed form, the generic secret shapes, the formatter that
redacts whole formatted records (arguments and tracebacks), the entry point's handlers, and the
settings' list of what is secret."""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import pytest

from supervisor.config import Settings
from supervisor.config_types import Secret, looks_secret
from supervisor.redact import MASK, RedactingFormatter, Redactor, install

TOKEN = "7391048265:AAH9kq-Zt0kenSecretPart_ForTestsOnly42"


def test_known_values_in_every_form_they_are_printed_in():
    r = Redactor(["pa ss/wo:rd'\"x"])
    for text in ("pa ss/wo:rd'\"x", "pa%20ss%2Fwo%3Ard%27%22x", "pa%20ss/wo%3Ard%27%22x",
                 json.dumps("pa ss/wo:rd'\"x"), repr("pa ss/wo:rd'\"x")):
        assert "wo" not in r(f"before {text} after"), text


def test_longest_value_first_and_short_values_ignored():
    r = Redactor(["abcdef", "abcdefghij", "1", "true"])
    assert r("x abcdefghij y abcdef z") == f"x {MASK} y {MASK} z"
    assert r("1 true") == "1 true"  # masking these would wreck the log, and protect nothing


def test_values_added_later_are_redacted_too():
    r = Redactor()
    assert r("code QWERTYUPAS") == "code QWERTYUPAS"
    r.add("QWERTYUPAS", None, "")
    assert r("code QWERTYUPAS") == f"code {MASK}"


@pytest.mark.parametrize("text,kept", [
    (f'HTTP Request: POST https://api.telegram.org/bot{TOKEN}/getUpdates "HTTP/1.1 200 OK"',
     "/bot***/getUpdates"),
    (f"GET https://api.telegram.org/file/bot{TOKEN.replace(':', '%3A')}/photos/x.jpg",
     "/file/bot***/photos"),
    ("GET http://127.0.0.1:8081/bot1:wrong/getMe", "/bot***/getMe"),
    (f"token {TOKEN} in prose", "token"),
    ("slack xoxb-1111-2222-abcdefABCDEF and xoxp-9-8-7-abcdef", "xoxb-***"),
    ("app token xapp-1-A0123-456-abcdef0123", "xapp-***"),
    ("key sk-ant-api03-abcdefghijklmnop_QRST-uv", "sk-ant-***"),
    ("Authorization: Bearer abc.def.ghi-123", "Authorization: Bearer ***"),
    ("{'Authorization': 'Bearer xyzxyzxyz', 'Accept': '*/*'}", "'Accept'"),
    ("authorization=Basic dXNlcjpwYXNz", "authorization=Basic ***"),
    ("headers x-api-key: k-1234567890", "x-api-key: ***"),
    ("{'url': 'https://h/hook', 'secret_token': 'wh-secret-value'}", "'url'"),
    ("X-Telegram-Bot-Api-Secret-Token: wh-secret-value", "X-Telegram-Bot-Api-Secret-Token"),
    ("refresh_token=1//0abcdefghijklmnop&x=1", "&x=1"),
    ("proxy https://user:hunter22@proxy.example:3128/", "https://user:***@proxy.example"),
    ("'text': '<pre>/start QWERTYUPAS</pre>'", "<pre>/start ***</pre>"),
    ("text='/start@sb_bot QWERTYUPAS'", "/start@sb_bot ***"),
    ("https://t.me/sb_bot?start=QWERTYUPAS", "?start=***"),
    ('"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n'
     '-----END PRIVATE KEY-----\\n"', "-----BEGIN PRIVATE KEY-----***"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASC", "RSA PRIVATE KEY"),
])
def test_generic_shapes(text, kept):
    out = Redactor()(text)
    assert kept in out, out
    for secret in ("AAH9kq", "1:wrong", "abcdefABCDEF", "A0123-456", "abcdefghijklmnop",
                   "abc.def", "xyzxyzxyz", "dXNlcjpwYXNz", "k-1234567890", "wh-secret",
                   "0abcdefghij", "hunter22", "QWERTYUPAS", "MIIEvQ"):
        assert secret not in out, (secret, out)


@pytest.mark.parametrize("text", [
    "agent state agent=bp4n7w name=w old=idle new=killed",
    "turn finished input_tokens=1200 output_tokens=35 cost_usd=0.0123",
    "Usage: /start <code> — then send /help",
    "GET http://127.0.0.1:8081/bottles/list", "authorization failed for telegram:42",
    "supervisor started home=/srv/sb resumed=0 swept=0",
])
def test_ordinary_lines_are_left_alone(text):
    assert Redactor(["s3cret-token-value"])(text) == text


def _record(msg, *args, exc_info=None):
    return logging.LogRecord("httpx", logging.INFO, __file__, 1, msg, args, exc_info)


def test_the_formatter_redacts_arguments_and_tracebacks():
    fmt = RedactingFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"),
                             Redactor(["AWSSECRETvalue123"]))
    line = fmt.format(_record("HTTP Request: %s %s", "POST",
                              f"https://api.telegram.org/bot{TOKEN}/getUpdates"))
    assert line == "INFO httpx HTTP Request: POST https://api.telegram.org/bot***/getUpdates"
    try:
        raise ConnectionError(f"GET https://api.telegram.org/bot{TOKEN}/getMe failed, "
                              "key AWSSECRETvalue123")
    except ConnectionError:
        line = fmt.format(_record("request failed", exc_info=sys.exc_info()))
    assert "Traceback" in line and "ConnectionError" in line
    assert TOKEN.split(":")[1] not in line and "AWSSECRETvalue123" not in line
    stack = _record("here")
    stack.stack_info = f"Stack (most recent call last):\n  bot{TOKEN}"
    assert "AAH9kq" not in fmt.format(stack)


def test_install_wraps_the_handlers_formatter_once():
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(message)s]"))
    first, second = Redactor(["first-secret"]), Redactor(["second-secret"])
    install(handler, first)
    install(handler, second)
    assert isinstance(handler.formatter, RedactingFormatter)
    assert not isinstance(handler.formatter.inner, RedactingFormatter)
    assert handler.format(_record("%s first-secret", "second-secret")) == "[*** first-secret]"


# -- what the settings say is secret ----------------------------------------------------------


def test_looks_secret():
    for name in ("AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN", "DB_PASSWORD",
                 "GPG_PASSPHRASE", "MY_PRIVATE_THING", "github_token"):
        assert looks_secret(name), name
    for name in ("SWITCHBOARD_HOME", "TELEGRAM_ADMIN_IDS", "GOOGLE_APPLICATION_CREDENTIALS",
                 "STORAGE_EMULATOR_HOST", "PATH", "ANTHROPIC_BASE_URL"):
        assert not looks_secret(name), name


def test_settings_list_every_secret_they_know(tmp_path):
    key = tmp_path / "sa.json"
    key.write_text(json.dumps({"type": "service_account", "private_key_id": "kid-0123456789",
                               "private_key": "-----BEGIN PRIVATE KEY-----\n"
                                              "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
                                              "-----END PRIVATE KEY-----\n"}))
    (tmp_path / "switchboard.toml").write_text(
        'telegram_webhook_secret = "webhook-secret-1"\n'
        '[agent_env]\nSERVICE_API_TOKEN = "agent-env-token-1"\nSOME_FLAG = "not-a-secret-1"\n')
    env = {"SWITCHBOARD_HOME": str(tmp_path), "TELEGRAM_BOT_TOKEN": TOKEN,
           "SLACK_BOT_TOKEN": "xoxb-slack-bot-1", "SLACK_APP_TOKEN": "xapp-slack-app-1",
           "ANTHROPIC_API_KEY": "sk-ant-key-1", "ANTHROPIC_AUTH_TOKEN": "auth-token-1",
           "CLAUDE_CODE_OAUTH_TOKEN": "oauth-token-1", "AWS_SECRET_ACCESS_KEY": "aws-secret-1",
           "ACME_DEPLOY_PASSWORD": "deploy-password-1", "GOOGLE_APPLICATION_CREDENTIALS": str(key),
           "TELEGRAM_ADMIN_IDS": "100", "PATH": "/usr/bin"}
    settings = Settings.load(env)
    values = set(settings.secret_values())
    assert {TOKEN, "xoxb-slack-bot-1", "xapp-slack-app-1", "sk-ant-key-1", "auth-token-1",
            "oauth-token-1", "webhook-secret-1", "agent-env-token-1", "aws-secret-1",
            "deploy-password-1", "kid-0123456789", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"} <= values
    assert not values & {"not-a-secret-1", "100", "/usr/bin", str(key), str(tmp_path)}
    shown = repr(settings) + str(settings)
    assert [v for v in values if v in shown] == []


def test_an_unreadable_key_file_is_no_error(tmp_path):
    for content in (None, "not json", "[1, 2]"):
        key = tmp_path / "sa.json"
        if content is not None:
            key.write_text(content)
        Settings.load({"SWITCHBOARD_HOME": str(tmp_path),
                       "GOOGLE_APPLICATION_CREDENTIALS": str(key)}).secret_values()


def test_a_secret_never_shows_in_formatting():
    s = Secret("hunter2-hunter2")
    assert "hunter2" not in f"{s} {s!r} {s!s} {[s]} {({'k': s})}"


# -- the entry point's logging ----------------------------------------------------------------


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, threading.excepthook)
    levels = {n: logging.getLogger(n).level for n in ("httpx", "httpcore", "aiosqlite")}
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    threading.excepthook = saved[2]
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_configure_logging_redacts_every_handler_and_thread_crashes(tmp_path, restore_logging,
                                                                    capsys):
    from bot.cli import configure_logging

    settings = Settings(home=tmp_path / "home", telegram_token=Secret(TOKEN),
                        agent_env={"SERVICE_API_TOKEN": "agent-env-token-2"}, log_level="INFO")
    configure_logging(settings, to_stderr=True)
    root = logging.getLogger()
    assert len(root.handlers) == 2
    assert all(isinstance(h.formatter, RedactingFormatter) for h in root.handlers)
    logging.getLogger("httpx").warning("HTTP Request: POST %s",
                                       f"http://127.0.0.1:1/bot{TOKEN}/getUpdates")
    logging.getLogger("bot.x").error("agent said %s", "agent-env-token-2")
    logging.getLogger("httpx").info("an INFO line from httpx is noise at INFO")

    def crash():
        raise RuntimeError(f"GET https://api.telegram.org/bot{TOKEN}/getMe failed")

    thread = threading.Thread(target=crash, name="doomed")
    thread.start()
    thread.join()
    for handler in root.handlers:
        handler.flush()
    log = Path(settings.log_path).read_text()
    err = capsys.readouterr().err
    for text in (log, err):
        assert "/bot***/getUpdates" in text and "agent said ***" in text
        assert "thread crashed thread=doomed" in text and "RuntimeError" in text
        assert TOKEN.split(":")[1] not in text and "agent-env-token-2" not in text
        assert "noise at INFO" not in text
    assert logging.getLogger("aiosqlite").getEffectiveLevel() >= logging.INFO


def test_a_crash_in_run_goes_through_the_redacting_log(tmp_path, restore_logging, monkeypatch,
                                                      capsys):
    import bot.cli as cli

    async def crashing_serve(settings, *, console):
        raise RuntimeError(f"POST https://api.telegram.org/bot{TOKEN}/getMe: connection reset")

    monkeypatch.setattr(cli, "serve", crashing_serve)
    monkeypatch.setattr(cli, "make_undumpable", lambda: None)  # not the test runner itself
    monkeypatch.setattr(logging, "shutdown", lambda: None)  # pytest's handlers stay usable
    settings = Settings(home=tmp_path / "home", telegram_token=Secret(TOKEN))
    assert cli.cmd_run(settings, console=False) == 1
    err = capsys.readouterr().err
    log = Path(settings.log_path).read_text()
    assert "crashed (RuntimeError: POST https://api.telegram.org/bot***/getMe" in err
    assert "switchboard run crashed" in log and "Traceback" in log
    assert TOKEN.split(":")[1] not in err + log
