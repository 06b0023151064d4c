"""Secrets stay out of the log, the terminal and the database: a real `switchboard run
--headless` at DEBUG, with every kind of secret configured, driven through the fake Bot API and
the GCS emulator; afterwards the whole log, the output and the database are searched."""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.fakes.fake_telegram import FakeTelegram
from tests.subproc import Supervisor, write_config

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
ADMIN, NEWCOMER, LATE, STRANGER = 100, 300, 301, 999

TELEGRAM_TOKEN = "7391048265:AAH9kq-Zt0kenSecretPart_ForTestsOnly42"
PRIVATE_KEY = ("-----BEGIN PRIVATE KEY-----\n"
               "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDfAkePrIvAtEkEy0001\n"
               "q8Zz3FaKeKeYmAtErIaLnOtReAlAtAlLjUsTfOrTeStInGsWiTcHbOaRd0000000002\n"
               "-----END PRIVATE KEY-----\n")
SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-1111111111-2222222222-SlackBotSecretValue",
    "SLACK_APP_TOKEN": "xapp-1-A0SLACKAPP-3333333333-SlackAppSecretValue",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYAWSSECRETKEY",
    "ACME_DEPLOY_PASSWORD": "custom-deploy-password-4242",
    "ANTHROPIC_API_KEY": "sk-ant-api03-FakeAnthropicKeyForTestsOnly-xyz",
}
AGENT_ENV_SECRET = "agent-env-service-token-7777"


def key_file(path: Path) -> Path:
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "sb-test",
        "private_key_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0deadbeef",
        "private_key": PRIVATE_KEY, "client_email": "sb@sb-test.iam.gserviceaccount.com",
        "client_id": "123456789012345678901", "token_uri": "https://oauth2.googleapis.com/token",
    }))
    return path


def forbidden_values() -> dict[str, str]:
    values = {**SECRETS, "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
              "telegram token (secret part)": TELEGRAM_TOKEN.split(":", 1)[1],
              "telegram token (url-quoted)": quote(TELEGRAM_TOKEN, safe=""),
              "agent_env SERVICE_API_TOKEN": AGENT_ENV_SECRET,
              "private_key_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0deadbeef"}
    for i, line in enumerate(PRIVATE_KEY.splitlines()[1:-1]):
        values[f"private key line {i}"] = line
    return values


def leaks(text: str, values: dict[str, str]) -> list[str]:
    return [name for name, value in values.items() if value in text]


@pytest.fixture
def fake_tg():
    with FakeTelegram(TELEGRAM_TOKEN) as fake:
        for uid, name in ((ADMIN, "alice"), (NEWCOMER, "carol"), (LATE, "mallory"),
                          (STRANGER, "eve")):
            fake.add_chat(uid, first_name=name, username=name)
        yield fake


def said(fake, chat, needle, timeout=60.0):
    def find():
        hits = [m for m in fake.sent(chat) if needle in (m.get("text") or "")]
        return hits[-1] if hits else None

    return fake.wait_for_sync(find, timeout, what=f"{needle!r} in chat {chat}")


def test_no_secret_or_invite_code_reaches_the_log_the_output_or_the_database(
        short_home, fake_tg, gcs_emulator):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    bucket = storage.Client(project="sb-test", credentials=AnonymousCredentials()).create_bucket(
        "sb-secrets")
    home = short_home / "sb"
    write_config(home, fake=True)
    with (home / "switchboard.toml").open("a") as fh:  # [agent_env] is the file's last table
        fh.write(f'SERVICE_API_TOKEN = "{AGENT_ENV_SECRET}"\n')
    env = {**SECRETS, "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "TELEGRAM_API_BASE_URL": fake_tg.url,
           "TELEGRAM_ADMIN_IDS": str(ADMIN),
           "GOOGLE_APPLICATION_CREDENTIALS": str(key_file(short_home / "sa.json")),
           "SWITCHBOARD_GCS_BUCKET": "sb-secrets", "SWITCHBOARD_KILL_POLL_S": "0.5",
           "SWITCHBOARD_LOG_LEVEL": "DEBUG", "SWITCHBOARD_STATUS_CARD_INTERVAL_S": "0.2"}
    sup = Supervisor(home, console=False, env=env)
    try:
        sup.expect("running headless")
        fake_tg.user_sends(ADMIN, "/start")
        said(fake_tg, ADMIN, "you are admin")
        fake_tg.user_sends(ADMIN, "/spawn w hello")
        said(fake_tg, ADMIN, "w finished")
        fake_tg.user_sends(ADMIN, "/invite")
        code = re.search(r"/start (\w+)", said(fake_tg, ADMIN, "Invite code")["text"]).group(1)
        fake_tg.user_sends(ADMIN, "/invite viewer")
        said(fake_tg, ADMIN, "new viewer")
        unused = re.search(r"/start (\w+)", said(fake_tg, ADMIN, "new viewer")["text"]).group(1)
        fake_tg.user_sends(NEWCOMER, f"/start {code}")
        said(fake_tg, NEWCOMER, "you are operator")
        fake_tg.user_sends(NEWCOMER, "/agents")
        said(fake_tg, NEWCOMER, "agent(s)")
        fake_tg.user_sends(LATE, f"/start {code}")  # already used: refused
        said(fake_tg, LATE, "not valid")
        fake_tg.user_sends(STRANGER, f"/start {unused} please")  # not a redemption: refused
        said(fake_tg, STRANGER, "private Switchboard bot")
        fake_tg.user_sends(STRANGER, unused)
        bucket.blob("kill-switch.json").upload_from_string('{"by": "ops", "reason": "test"}')
        said(fake_tg, ADMIN, "Kill switch triggered")
        time.sleep(1.0)  # a few more polls, at DEBUG
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(60) == 0
    finally:
        sup.close()
    time.sleep(0.2)
    output = "\n".join(sup.seen + list(_drain(sup)))
    log = (home / "switchboard.log").read_text()
    values = {**forbidden_values(), "invite code (redeemed)": code, "invite code (unused)": unused}
    assert leaks(log, values) == [], "in switchboard.log"
    assert leaks(output, values) == [], "in stdout/stderr"
    # The lines that used to leak are still there, redacted: the redactor did this, not quiet.
    assert "/bot***/getUpdates" in log
    assert "Calling Bot API endpoint" in log  # PTB's DEBUG lines were on
    db = sqlite3.connect(home / "switchboard.db")
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        audit = "\n".join(map(repr, db.execute("SELECT * FROM audit")))
        invites = db.execute("SELECT * FROM invites").fetchall()
    finally:
        db.close()
    assert leaks(audit, values) == [], "in the audit table"
    assert "/start ***" in audit and "invite code issued (operator)" in audit
    assert len(invites) == 2 and leaks(repr(invites), values) == []
    raw = b"".join(p.read_bytes() for p in home.glob("switchboard.db*"))
    assert [n for n, v in values.items() if v.encode() in raw] == [], "in the database files"


def _drain(sup: Supervisor) -> list[str]:
    lines = []
    while not sup.lines.empty():
        lines.append(sup.lines.get_nowait())
    return lines


# -- the supervisor's memory and environment --------------------------------------------------


def capabilities_dropper():
    """A preexec_fn. Root may read any process, so when the tests run as root the processes
    below keep uid 0 ("the same user") but lose every capability, for good: the bounding set
    is emptied, so exec does not hand them back. As another user there is nothing to drop."""
    if os.geteuid() != 0:
        return None
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for cap in range(last_cap + 1):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")

    return drop


PR_CAPBSET_DROP = 24
PROBE = """
import sys
try:
    open("/proc/%s/environ" % sys.argv[1], "rb").read()
    print("readable")
except PermissionError:
    print("denied")
"""


def read_environ_as_same_user(pid: int) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, str(pid)], capture_output=True,
                         text=True, timeout=30, preexec_fn=capabilities_dropper())
    return out.stdout.strip() or out.stderr.strip()


def test_the_supervisor_is_not_dumpable_so_its_user_cannot_read_its_environment(short_home):
    home = short_home / "sb"
    write_config(home, fake=True)
    # The control: a process of the same user that was not made non-dumpable is readable.
    control = subprocess.Popen(["sleep", "60"], preexec_fn=capabilities_dropper())
    sup = Supervisor(home, console=False, env={"ACME_DEPLOY_PASSWORD": "not-for-you-1234"},
                     preexec_fn=capabilities_dropper())
    try:
        sup.expect("running headless")
        assert read_environ_as_same_user(control.pid) == "readable"
        assert read_environ_as_same_user(sup.proc.pid) == "denied"
        if os.geteuid() != 0:  # the kernel hands a non-dumpable process's /proc files to root
            assert os.stat(f"/proc/{sup.proc.pid}/environ").st_uid == 0
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(30) == 0
    finally:
        control.kill()
        control.wait(10)
        sup.close()
