"""Invite codes are secrets: stored only as hashes (codes kept in clear by older versions are
revoked and scrubbed by the migration), shown once to the admin, never in an audit row; and the
audit table as a whole is scrubbed of known secrets."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from bot.app import Switchboard
from commands.operators import redact_codes
from store import open_store
from store.migrations import MIGRATIONS
from store.operators import hash_code
from supervisor.config_types import Secret
from supervisor.redact import Redactor
from tests.conftest import make_settings, run


def db_text(path: Path) -> bytes:
    """Every byte of the database, its WAL and shared memory file included."""
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


async def audit_rows(app: Switchboard) -> str:
    return "\n".join(f"{r.action} | {r.args} | {r.result}" for r in await app.store.audit.recent())


async def test_invite_is_stored_hashed_shown_once_and_audited_without_the_code(fake_app):
    reply = await run(fake_app, "/invite viewer")
    code = re.search(r"/start (\w+)", reply.plain()).group(1)
    rows = await fake_app.store.db.fetchall("SELECT * FROM invites")
    assert [r["code_hash"] for r in rows] == [hash_code(code)]
    assert code not in repr([dict(r) for r in rows])
    audit = (await fake_app.store.audit.recent(1))[0]
    assert (audit.action, audit.args, audit.ok) == ("invite", "viewer", 1)
    assert re.fullmatch(r"invite code issued \(viewer\), expires \d\d:\d\d", audit.result)
    assert await fake_app.store.operators.redeem_invite(code.lower(), "telegram:7") is None
    assert await fake_app.store.operators.redeem_invite(code, "telegram:7") == "viewer"
    assert await fake_app.store.operators.redeem_invite(code, "telegram:8") is None
    assert code.encode() not in db_text(fake_app.settings.db_path)  # nor in the WAL


async def test_start_typed_as_a_command_is_audited_without_its_code(fake_app):
    await run(fake_app, "/start QWERTYUPAS")
    audit = (await fake_app.store.audit.recent(1))[0]
    assert (audit.action, audit.args) == ("start", "***")
    assert "QWERTYUPAS" not in audit.result


def test_what_strangers_send_is_audited_without_code_shaped_words():
    assert redact_codes("/start QWERTYUPAS please") == "/start *** please"
    assert redact_codes("QWERTYUPAS") == "***"
    assert redact_codes("my code is qwertyupas!") == "my code is ***!"
    assert redact_codes("/agents all") == "/agents all"
    assert redact_codes("hello there, how are you") == "hello there, how are you"


async def test_the_audit_table_never_holds_a_known_secret(short_home):
    token = "123456789:AAFakeTelegramTokenForTests_0123456789"
    settings = make_settings(short_home, fake=True, telegram_token=Secret(token),
                             anthropic_api_key=Secret("sk-test-audit-key-1"))
    async with Switchboard(settings) as app:
        await run(app, "/status nosuch-sk-test-audit-key-1")
        await run(app, f"/killswitch off {token}")
        text = await audit_rows(app)
    assert "sk-test-audit-key-1" not in text and token not in text
    assert "nosuch-***" in text


async def test_the_audit_repo_redacts_whatever_it_is_given(tmp_path):
    store = await open_store(tmp_path / "db.sqlite", redact=Redactor(["zz-secret-zz"]))
    try:
        await store.audit.record(platform="p", user_id="u", user_name="", action="a",
                                 args="x zz-secret-zz", ok=True, result="Bearer abcdefghij")
        row = (await store.audit.recent(1))[0]
    finally:
        await store.db.close()
    assert (row.args, row.result) == ("x ***", "Bearer ***")


async def test_migration_revokes_and_scrubs_codes_stored_in_clear(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for number, script in enumerate(MIGRATIONS[:4], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;")
    conn.executemany(
        "INSERT INTO invites (code, role, created_by, created_at, expires_at, used_by)"
        " VALUES (?, 'operator', 'telegram:1', 0, 9e12, ?)",
        [("UNUSEDCODE", None), ("USEDCODE22", "telegram:2")])
    conn.close()  # closing checkpoints: the codes are in the main file
    store = await open_store(path)
    try:
        rows = [dict(r) for r in await store.db.fetchall("SELECT * FROM invites ORDER BY rowid")]
        assert [(r["revoked"], r["used_by"]) for r in rows] == [(1, None), (0, "telegram:2")]
        assert await store.operators.redeem_invite("UNUSEDCODE", "telegram:3") is None
        assert await store.operators.revoke_invites() == 0
        await store.operators.create_invite("NEWCODE234", "viewer", "telegram:1", 3600)
        assert await store.operators.redeem_invite("NEWCODE234", "telegram:3") == "viewer"
        # While the supervisor runs, too: no stale page in the main file or the WAL.
        raw = db_text(path)
        assert b"UNUSEDCODE" not in raw and b"USEDCODE22" not in raw and b"NEWCODE234" not in raw
    finally:
        await store.db.close()
