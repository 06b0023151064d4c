"""The Slack front end end to end: the real slack-bolt and slack-sdk against a fake Slack (Web
API, Socket Mode, signed HTTP requests), with real agents (the fake claude CLI, or the real CLI
on the mock Anthropic API where a tool must run or the model must read an answer)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time

import pytest

from bot.app import Switchboard
from bot.kit import Pace
from bot.slack.front import SlackFrontend
from supervisor.config_types import Secret
from tests.conftest import free_port, make_settings, processes_with_tag, wait_for
from tests.fakes.fake_slack import (
    APP_TOKEN,
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    FakeSlack,
    labels,
    text_of,
)

pytestmark = pytest.mark.timeout(120)

ADMIN, OPERATOR, VIEWER, STRANGER = "UALICE", "UBOB", "UVIC", "UEVE"


@pytest.fixture
def fake_slack():
    with FakeSlack() as fake:
        for uid, name in ((ADMIN, "alice"), (OPERATOR, "bob"), (VIEWER, "vic"),
                          (STRANGER, "eve"), ("UCAROL", "carol")):
            fake.add_user(uid, name)
        yield fake
        # Acceptance 3: nothing the app sent broke a Block Kit limit or was refused, in any test.
        assert fake.errors == []


def slack_settings(base, fake, mode="socket"):
    return base.with_(slack_bot_token=Secret(BOT_TOKEN), slack_app_token=Secret(APP_TOKEN),
                      slack_api_url=fake.url, slack_channel=CHANNEL, slack_admin_ids=(ADMIN,),
                      slack_card_interval_s=0.2, slack_mode=mode,
                      slack_signing_secret=Secret(SIGNING_SECRET),
                      slack_http_listen="127.0.0.1", slack_http_port=free_port())


async def start(settings, fake):
    app = Switchboard(settings)
    await app.__aenter__()
    await app.store.operators.upsert("slack", OPERATOR, "bob", "operator", "test")
    await app.store.operators.upsert("slack", VIEWER, "vic", "viewer", "test")
    # Slack's own pace (1 a second) would make every test wait; the pace is tested in the unit
    # tests and measured by bench/slack_outbox.py.
    front = SlackFrontend(app.slack_context(), ping_interval_s=1,
                          pace=Pace(per_s=50.0, burst=10))
    await front.start()
    await front.connect()
    if settings.slack_mode == "http":
        fake.http_target = f"http://127.0.0.1:{front.http_port}/slack/events"
    return app, front


async def stop(app, front):
    await front.stop()
    await app.aclose()


@pytest.fixture(params=["socket", "http"])
async def both_modes(request, fake_settings, fake_slack):
    app, front = await start(slack_settings(fake_settings, fake_slack, request.param),
                             fake_slack)
    yield app, fake_slack
    await stop(app, front)


@pytest.fixture
async def fake_slack_app(fake_settings, fake_slack):
    app, front = await start(slack_settings(fake_settings, fake_slack), fake_slack)
    yield app, fake_slack
    await stop(app, front)


@pytest.fixture
async def http_app(fake_settings, fake_slack):
    app, front = await start(slack_settings(fake_settings, fake_slack, "http"), fake_slack)
    yield app, fake_slack
    await stop(app, front)


@pytest.fixture(params=["socket", "http"])
async def real_slack_app(request, short_home, mock_api, fake_slack):
    """The real CLI on the mock API, over Socket Mode and over HTTP mode."""
    (short_home / "t").mkdir(exist_ok=True)
    app, front = await start(slack_settings(make_settings(short_home, mock_api), fake_slack,
                                            request.param), fake_slack)
    yield app, fake_slack
    await stop(app, front)


def told(fake, user, needle):
    return [m for m in fake.to(user) if needle in m["text"]]


async def said_to(fake, user, needle, timeout=15.0):
    hits = await fake.wait_for(lambda: told(fake, user, needle), timeout,
                               what=f"{needle!r} told to {user}")
    return hits[-1]


async def card_of(fake, name, timeout=20.0):
    """The agent's live card: the top message of its thread in the channel."""
    def find():
        return next((m for m in fake.top() if f"{name} " in m["text"] and "turns:" in m["text"]),
                    None)

    return copy.deepcopy(await fake.wait_for(find, timeout, what=f"the card of {name}"))


async def in_thread(fake, card, needle, timeout=30.0):
    def find():
        hits = [m for m in fake.thread(card["ts"]) if needle in m["text"]]
        return hits[-1] if hits else None

    # A snapshot: the message as it was shown then (fake.find gives it as it is now).
    return copy.deepcopy(await fake.wait_for(find, timeout, what=f"{needle!r} in the thread"))


async def in_thread_or_channel(fake, card, needle, timeout=30.0):
    """A message under the agent's card, or in the channel itself when it was raised before
    the card was posted (an agent that asks at once, on a loaded machine)."""
    def find():
        hits = [m for m in [*fake.thread(card["ts"]), *fake.top()] if needle in m["text"]]
        return hits[-1] if hits else None

    return copy.deepcopy(await fake.wait_for(find, timeout, what=f"{needle!r} in the channel"))


async def recorded(app, name, card):
    """The card is the agent's thread once recorded (at the cards' next tick)."""
    r = await app.pool.fleet.get(name)

    async def found():
        return await app.store.operators.card("slack", r.id, CHANNEL) == card["ts"]

    await wait_for(found, 30, "the thread recorded")


def now_text(fake, msg):
    return fake.find(msg["channel"], msg["ts"])["text"]


# -- access ------------------------------------------------------------------------------------


async def test_a_forged_signature_and_a_stale_timestamp_are_refused(http_app):
    app, fake = http_app
    body = "command=%2Fsb&text=agents&user_id=UALICE&channel_id=C0AGENTS&team_id=T0FAKE"
    form = "application/x-www-form-urlencoded"
    assert (await fake.post(body, form, secret="not-the-secret"))[0] == 401
    assert (await fake.post(body, form, timestamp=int(time.time()) - 6 * 60))[0] == 401
    assert fake.to(ADMIN) == []  # neither reached the command
    assert (await fake.post(body, form))[0] == 200
    await said_to(fake, ADMIN, "No agents")


async def test_a_stranger_is_refused_once_and_audited(both_modes):
    app, fake = both_modes
    await fake.slash(STRANGER, "agents")
    await said_to(fake, STRANGER, "private Switchboard")
    await fake.slash(STRANGER, "spawn evil rm everything")

    async def audited():
        rows = [a for a in await app.store.audit.recent(20) if a.action == "refused"]
        return len(rows) >= 2

    await wait_for(audited, 10, "two audit rows")
    assert len(fake.to(STRANGER)) == 1 and fake.to(STRANGER)[0]["channel"] == CHANNEL
    assert app.pool.fleet.everyone() == []


async def test_an_invite_code_works_in_slack(fake_slack_app):
    app, fake = fake_slack_app
    await fake.slash(ADMIN, "invite")
    reply = await said_to(fake, ADMIN, "Invite code")
    code = re.search(r"/start (\w+)", reply["text"]).group(1)
    await fake.slash("UCAROL", f"start {code}")
    await said_to(fake, "UCAROL", "you are operator")
    await fake.slash("UCAROL", "agents")
    await said_to(fake, "UCAROL", "No agents")


async def test_bots_and_ourselves_are_ignored(fake_slack_app):
    app, fake = fake_slack_app
    await fake.event(fake.message_event(ADMIN, "<@UBOT> agents", kind="app_mention",
                                        bot_id="B0OTHER"))
    await fake.event(fake.message_event("UBOT", "<@UBOT> agents", kind="app_mention"))
    await fake.event(fake.message_event(ADMIN, "<@UBOT> agents", kind="app_mention"))
    await said_to(fake, ADMIN, "No agents")
    assert len(fake.to(ADMIN)) == 1


# -- the thread per agent, over both transports --------------------------------------------------


async def test_spawn_makes_the_thread_and_its_live_card(both_modes):
    app, fake = both_modes
    await fake.slash(ADMIN, "spawn fixer hello there")
    await said_to(fake, ADMIN, "Spawned fixer")
    card = await card_of(fake, "fixer")
    assert card["thread_ts"] is None and "⏹ Stop" in labels(card["blocks"])
    await recorded(app, "fixer", card)
    await fake.wait_for(lambda: "turns: 1" in now_text(fake, card), 20, what="the card edited")
    # A plain reply in the thread is a message to its agent; !verb is a command.
    await fake.event(fake.message_event(ADMIN, "second message", thread_ts=card["ts"]))
    await fake.wait_for(lambda: "turns: 2" in now_text(fake, card), 20, what="turn two")
    await fake.event(fake.message_event(ADMIN, "!status fixer", thread_ts=card["ts"]))
    await said_to(fake, ADMIN, "fixer")
    assert len(fake.top()) == 1  # everything else went under the card or to alice alone


async def test_a_reply_in_the_thread_before_the_card_is_recorded_reaches_the_agent(fake_settings,
                                                                                   fake_slack):
    """Issue 25: a reply in a new agent's thread within a card tick of its card was run as a
    command ("Unknown command"): the thread was recorded only at the card's next update."""
    # A long tick: the card is posted at once (its request goes under it), recorded only later.
    settings = slack_settings(fake_settings, fake_slack).with_(slack_card_interval_s=60.0)
    app, front = await start(settings, fake_slack)
    try:
        tool = json.dumps({"command": "touch /etc/issue25"})
        await fake_slack.slash(ADMIN, f"spawn quick ASKTOOL Bash {tool}")
        card = await card_of(fake_slack, "quick")
        await in_thread_or_channel(fake_slack, card, "wants to use Bash")
        r = await app.pool.fleet.get("quick")
        assert await app.store.operators.card("slack", r.id, CHANNEL) is None  # not yet
        await fake_slack.event(fake_slack.message_event(ADMIN, "also look at the README",
                                                        thread_ts=card["ts"]))

        async def delivered() -> bool:
            return any(m.body == "also look at the README"
                       for m in await app.store.bus.recent(r.id, 20))

        await wait_for(delivered, 15, "the reply queued for the agent")
        assert not told(fake_slack, ADMIN, "Unknown command")
    finally:
        await stop(app, front)


async def test_a_duplicate_delivery_acts_once(both_modes):
    app, fake = both_modes
    await fake.slash(ADMIN, "spawn dup hello")
    card = await card_of(fake, "dup")
    await recorded(app, "dup", card)
    event = fake.message_event(ADMIN, "only once", thread_ts=card["ts"])
    await fake.event(event, event_id="EvSAME")
    await fake.event(event, event_id="EvSAME", retry=1)  # Slack's retry of the same event
    mention = {**event, "type": "app_mention", "text": "<@UBOT> only once"}
    await fake.event(mention, event_id="EvOTHER")  # the same message as a mention
    await fake.wait_for(lambda: "turns: 2" in now_text(fake, card), 20, what="turn two")
    r = await app.pool.fleet.get("dup")
    await wait_for(lambda: r.state == "idle", 20)
    # A marker after them: once its turn is done, any duplicate turn would be done too.
    await fake.event(fake.message_event(ADMIN, "marker", thread_ts=card["ts"]))
    await fake.wait_for(lambda: "ECHO: marker" in now_text(fake, card), 20, what="the marker")
    assert len(await app.store.turns.recent(r.id, 10)) == 3


# -- approvals, denials with a reason, questions: the real CLI, and Telegram at the same time ---

TG_ADMIN = 100


@pytest.fixture
def fake_tg():
    from tests.fakes.fake_telegram import FakeTelegram

    with FakeTelegram() as fake:
        fake.add_chat(TG_ADMIN, first_name="tina", username="tina")
        yield fake


@pytest.fixture
async def two_fronts(short_home, mock_api, fake_slack, fake_tg):
    """The real CLI, with Slack and Telegram front ends on one Switchboard."""
    from bot.telegram.front import TelegramFrontend

    (short_home / "t").mkdir(exist_ok=True)
    settings = slack_settings(make_settings(short_home, mock_api), fake_slack).with_(
        telegram_token=Secret(fake_tg.token), telegram_api_base_url=fake_tg.url,
        telegram_admin_ids=(str(TG_ADMIN),), status_card_interval_s=0.2)
    app, front = await start(settings, fake_slack)
    tg = TelegramFrontend(app.telegram_context(), poll_timeout_s=1)
    await tg.start()
    yield app, fake_slack, fake_tg
    await tg.stop()
    await stop(app, front)


async def tg_said(fake_tg, needle):
    def find():
        hits = [m for m in fake_tg.sent(TG_ADMIN) if needle in (m.get("text") or "")]
        return hits[-1] if hits else None

    return await fake_tg.wait_for(find, 30, what=f"{needle!r} on Telegram")


def tg_button(message, label):
    for row in (message.get("reply_markup") or {}).get("inline_keyboard", []):
        for b in row:
            if label in b["text"]:
                return b["callback_data"]
    raise AssertionError(f"no button {label!r}")


async def test_allowed_from_slack_runs_the_tool_and_telegram_is_told_who(two_fronts, tmp_path):
    app, fake, fake_tg = two_fronts
    await fake.slash(ADMIN, f"spawn toucher --cwd {tmp_path} BASH: touch from-slack.txt")
    card = await card_of(fake, "toucher")
    ask = await in_thread(fake, card, "toucher wants to use Bash")
    assert "touch from-slack.txt" in ask["text"]
    assert labels(ask["blocks"]) == ["✅ Allow", "❌ Deny", "✍️ Deny with reason",
                                     "🔁 Allow for session", "🔎 Details"]
    on_tg = await tg_said(fake_tg, "toucher wants to use Bash")  # one escalation, both fronts
    await fake.click(ADMIN, ask, "Details")
    details = await fake.wait_for(lambda: next((m for m in fake.modals if m["view"][
        "callback_id"] == "sb_details"), None), what="the details modal")
    assert "touch from-slack.txt" in text_of(details["view"]["blocks"])
    await fake.click(VIEWER, ask, "Allow")  # a viewer may not answer
    await said_to(fake, VIEWER, "operator")
    assert not (tmp_path / "from-slack.txt").exists() and labels(fake.find(
        CHANNEL, ask["ts"])["blocks"])  # the card is untouched
    await fake.click(ADMIN, ask, "Allow")
    await wait_for(lambda: (tmp_path / "from-slack.txt").exists(), 60, "the command ran")
    await fake.wait_for(lambda: "Allowed by alice" in now_text(fake, ask), 15,
                        what="the Slack card settled")
    assert labels(fake.find(CHANNEL, ask["ts"])["blocks"]) == []

    def tg_settled():
        msg = fake_tg.message(TG_ADMIN, on_tg["message_id"])
        return msg and "Allowed" in msg["text"] and "alice" in msg["text"] \
            and not msg.get("reply_markup")

    await fake_tg.wait_for(tg_settled, 15, what="the Telegram copy settled, no buttons")
    # A late tap on the Telegram copy is told who answered first.
    fake_tg.user_taps(TG_ADMIN, on_tg["message_id"], tg_button(on_tg, "Deny"), strict=False)
    await fake_tg.wait_for(lambda: [a for a in fake_tg.callback_answers
                                    if "alice" in (a.get("text") or "")], 10,
                           what="told who answered first")


async def test_answered_on_telegram_the_slack_card_shows_who(two_fronts, tmp_path):
    app, fake, fake_tg = two_fronts
    await fake.slash(ADMIN, f"spawn other --cwd {tmp_path} BASH: touch from-phone.txt")
    ask = await in_thread(fake, await card_of(fake, "other"), "other wants to use Bash")
    on_tg = await tg_said(fake_tg, "other wants to use Bash")
    fake_tg.user_taps(TG_ADMIN, on_tg["message_id"], tg_button(on_tg, "Allow"))
    await wait_for(lambda: (tmp_path / "from-phone.txt").exists(), 60, "the command ran")
    await fake.wait_for(lambda: "Allowed by tina via telegram" in now_text(fake, ask), 15,
                        what="the Slack card settled")
    assert labels(fake.find(CHANNEL, ask["ts"])["blocks"]) == []
    await fake.click(ADMIN, ask, "Deny")  # the buttons as they were before the answer
    await said_to(fake, ADMIN, "tina")  # the late press is told who answered first


async def test_denied_with_a_reason_from_the_modal_reaches_the_model(real_slack_app, tmp_path,
                                                                     mock_api):
    app, fake = real_slack_app
    await fake.slash(ADMIN, f"spawn denier --cwd {tmp_path} BASH: touch nope.txt")
    ask = await in_thread(fake, await card_of(fake, "denier"), "denier wants to use Bash")
    await fake.click(ADMIN, ask, "Deny with reason")
    modal = await fake.wait_for(lambda: next((m for m in fake.modals
                                              if m["view"]["callback_id"] == "sb_deny_reason"),
                                             None), what="the modal")
    assert (await fake.submit(ADMIN, modal, {"reason": ""}))["response_action"] == "errors"
    await fake.submit(ADMIN, modal, {"reason": "not on a Friday"})
    r = await app.pool.fleet.get("denier")
    await wait_for(lambda: r.state == "idle" and len(mock_api.requests) >= 2, 60)
    assert "not on a Friday" in json.dumps(mock_api.requests[-1]["messages"])
    assert not (tmp_path / "nope.txt").exists()
    await fake.wait_for(lambda: "Denied by alice" in now_text(fake, ask), 15, what="settled")


async def test_a_question_by_button_and_by_thread_reply(real_slack_app, tmp_path, mock_api):
    app, fake = real_slack_app
    q = {"questions": [{"question": "Which colour?", "header": "Colour", "multiSelect": False,
                        "options": [{"label": "Red", "description": "warm"},
                                    {"label": "Blue", "description": "cool"}]}]}
    await fake.slash(ADMIN, f"spawn asker --cwd {tmp_path} TOOL AskUserQuestion {json.dumps(q)}")
    card = await card_of(fake, "asker")
    asked = await in_thread_or_channel(fake, card, "Which colour?")
    await fake.click(ADMIN, asked, "Blue")
    r = await app.pool.fleet.get("asker")
    await wait_for(lambda: r.state == "idle", 60)
    assert "Blue" in json.dumps(mock_api.requests)
    await recorded(app, "asker", card)
    args = json.dumps({"question": "Which port?"})
    await fake.slash(ADMIN, f"ask asker TOOL mcp__switchboard__ask_operator {args}")
    await in_thread(fake, card, "Which port?")
    await fake.event(fake.message_event(ADMIN, "use 8080", thread_ts=card["ts"]))
    await wait_for(lambda: r.state == "idle" and "use 8080" in json.dumps(
        mock_api.requests[-1]["messages"]), 60, "the answer reached the model")


# -- Stop, the kill switch, App Home ---------------------------------------------------------------


async def test_the_native_stop_button_stops_the_turn(both_modes):
    app, fake = both_modes
    await fake.slash(ADMIN, "spawn sleeper SLEEP 60: done")
    card = await card_of(fake, "sleeper")
    await recorded(app, "sleeper", card)
    r = await app.pool.fleet.get("sleeper")
    await wait_for(lambda: r.state == "working", 20)
    await fake.wait_for(lambda: any(s[2] == card["ts"] and s[3] == "processing"
                                    for s in fake.statuses), what="the session processing")
    await fake.event({"type": "agent_session_stopped", "channel": CHANNEL,
                      "thread_ts": card["ts"], "user": ADMIN})
    await wait_for(lambda: r.state != "working", 20, "the turn stopped")

    async def audited():
        return [a for a in await app.store.audit.recent(10) if a.action == "stop"]

    await wait_for(audited, 10, "the audit row of /stop")
    assert [(a.user_name, a.ok) for a in await audited()] == [("alice", 1)]
    assert "SLEPT" not in json.dumps(fake.messages)


async def test_app_home_kill_all_with_confirmation_and_an_admin_turns_it_off(both_modes):
    app, fake = both_modes
    for i in range(2):
        await fake.slash(ADMIN, f"spawn k{i} BG")
        await said_to(fake, ADMIN, f"Spawned k{i}")
    runners = [await app.pool.fleet.get(f"k{i}") for i in range(2)]
    await wait_for(lambda: all(r.state == "idle" for r in runners), 30)
    await fake.open_home(VIEWER)
    await fake.wait_for(lambda: fake.homes.get(VIEWER), what="the viewer's home")
    await fake.open_home(ADMIN)
    home = await fake.wait_for(lambda: fake.homes.get(ADMIN), what="the admin's home")
    kill = next(el for b in home for el in b.get("elements") or []
                if el.get("value") == "/killall confirm")
    assert kill["style"] == "danger" and kill["confirm"]["confirm"]["text"] == "Yes"
    await fake.click(ADMIN, home, "KILL ALL", home=True)
    await wait_for(lambda: all(r.state == "killed" for r in runners), 20)
    assert processes_with_tag(app.settings.instance_id + "/") == []
    on = await fake.wait_for(lambda: "Kill switch ON" in text_of(fake.homes[ADMIN])
                             and fake.homes[ADMIN], 15, what="the home shows the switch on")
    assert "Turn the kill switch off" not in labels(fake.homes[VIEWER])
    await fake.click(ADMIN, on, "Turn the kill switch off", home=True)
    await wait_for(lambda: not app.api.halted, 10, "the switch off")
    await fake.wait_for(lambda: "Kill switch:* off" in text_of(fake.homes[ADMIN]), 15,
                        what="the home shows it off")


async def test_the_spawn_modal_validates_and_spawns(both_modes):
    app, fake = both_modes
    await fake.slash(ADMIN, "spawn")
    modal = await fake.wait_for(lambda: next((m for m in fake.modals
                                              if m["view"]["callback_id"] == "sb_spawn"), None),
                                what="the spawn modal")
    errors = await fake.submit(ADMIN, modal, {"name": "9bad", "prompt": ""})
    assert set(errors["errors"]) == {"name", "prompt"}
    await fake.submit(ADMIN, modal, {"name": "modal-made", "prompt": "hello", "model": "",
                                     "cwd": ""})
    await card_of(fake, "modal-made")


# -- limits: escaping, long answers, a 429 storm ------------------------------------------------

NASTY = "<!channel> <@UALICE> <b>bold?</b> & *stars* _under_ `tick` ```fence``` > quote\n"


async def test_nasty_and_long_output_keeps_every_limit(fake_slack_app):
    app, fake = fake_slack_app
    prompt = (NASTY * 300)[:20_000]
    await fake.slash(ADMIN, f"spawn talker {prompt}")
    card = await card_of(fake, "talker")
    await fake.wait_for(lambda: fake.files, 30, what="the long answer as a file")
    answer = next(f for f in fake.files)
    assert answer["thread_ts"] == card["ts"] and "ECHO: <!channel>" in answer["content"].decode()
    for m in fake.messages + fake.ephemerals:
        for block in m["blocks"]:
            shown = json.dumps(block)
            assert "<!channel>" not in shown and "<@UALICE>" not in shown
    assert "&lt;!channel&gt;" in json.dumps([m["blocks"] for m in fake.messages])
    await fake.slash(ADMIN, "logs talker")  # a long reply: split or a file, never refused
    await said_to(fake, ADMIN, "talker")


async def test_what_you_approve_is_what_runs_a_long_command_and_a_write_whole(fake_slack_app):
    """Issue 27: a 1,600-character command's request shows all of it, as a file in the agent's
    thread beside its card (the card shows its start and says it is cut), and what is unusual
    in it in one line; a Write request shows the content the same way."""
    app, fake = fake_slack_app
    tail = "; git push origin main"
    command = "echo " + "x" * 1600 + tail
    ask = "ASKTOOL Bash " + json.dumps({"command": command})
    await fake.slash(ADMIN, f"spawn longcmd {ask}")
    card = await card_of(fake, "longcmd")
    request = await in_thread_or_channel(fake, card, "longcmd wants to use Bash")
    row = (await app.pool.escalations.pending())[0]
    await fake.wait_for(lambda: [f for f in fake.files if f["filename"].endswith("command.sh")],
                        20, what="the command as a file")
    sent = next(f for f in fake.files if f["filename"] == f"{row.id}-command.sh")
    assert sent["content"].decode() == command
    assert sent["thread_ts"] in (card["ts"], None)
    text = request["text"]
    assert tail not in text and "Cut short" in text and "Why asked" in text
    assert "⚠ Unusual: pushes or publishes (git push origin main)." in text
    await fake.click(ADMIN, request, "Deny")
    r = await app.pool.fleet.get("longcmd")
    await wait_for(lambda: r.state == "idle" and not r.busy, 30, "longcmd idle")

    content = "set -e\n" + "".join(f"echo step {i}\n" for i in range(60)) + "rm -rf ~/\n"
    write = json.dumps({"file_path": "/srv/elsewhere/deploy.sh", "content": content})
    await fake.slash(ADMIN, f"ask longcmd ASKTOOL Write {write}")
    request = await in_thread_or_channel(fake, card, "longcmd wants to use Write")
    row = (await app.pool.escalations.pending())[0]
    await fake.wait_for(lambda: [f for f in fake.files if f["filename"].startswith(row.id)],
                        20, what="the new file's content as a file")
    sent = next(f for f in fake.files if f["filename"].startswith(row.id))
    assert sent["content"].decode() == content and "rm -rf ~/" not in request["text"]
    assert "writes outside its working directory (/srv/elsewhere/deploy.sh)" in request["text"]
    await fake.click(ADMIN, request, "Deny")


async def test_a_429_storm_delays_but_loses_nothing_and_merges_card_edits(fake_slack_app):
    app, fake = fake_slack_app
    fake.retry_after_s = 1
    await fake.slash(ADMIN, "spawn stormy hi")
    card = await card_of(fake, "stormy")
    await recorded(app, "stormy", card)
    fake.storm(5)
    for i in range(4):
        await fake.event(fake.message_event(ADMIN, f"msg {i}", thread_ts=card["ts"]))
    r = await app.pool.fleet.get("stormy")

    async def all_handled() -> bool:
        # Every message became (part of) a turn: the bus joins what waits for a busy agent.
        prompts = "\n".join(t.prompt for t in await app.store.turns.recent(r.id, 20))
        return all(f"msg {i}" in prompts for i in range(4)) and r.state == "idle" and \
            not r.busy and not r.queued

    await wait_for(all_handled, 40, "every message handled")
    turns = len(await app.store.turns.recent(r.id, 20))
    # Every turn's answer is in the thread: nothing was lost to a 429. (The card can catch up
    # before the last answer's notice is through the storm.)
    await fake.wait_for(lambda: len([m for m in fake.thread(card["ts"])
                                     if "stormy finished" in m["text"]]) == turns, 20,
                        what="every turn's answer in the thread")
    assert fake.limited >= 5  # the whole storm was met, and waited out
    # Each turn changed the card's state and text 4 times: the edits were merged.
    assert fake.find(CHANNEL, card["ts"])["edits"] < 2 * turns


# -- the connection: refused tokens, Slack's refresh ---------------------------------------------


async def test_a_refused_token_stops_slack_with_a_log_line_and_a_notice(fake_settings, fake_slack,
                                                                         caplog):
    from bot.slack.front import run_slack

    fake_slack.refuse("token_revoked")
    app = Switchboard(slack_settings(fake_settings, fake_slack))
    async with app:
        # It returns: no retrying a revoked token.
        await asyncio.wait_for(run_slack(app.slack_context()), 10)
        notices = [r for r in await app.store.escalations.undelivered("console")
                   if r.title == "Slack front end stopped"]
        assert notices and "token_revoked" in notices[0].body
    assert any("Slack refused the app's token (token_revoked)" in r.getMessage()
               for r in caplog.records)


async def scrape(app, path):
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(app.listener.url + path) as resp:
            return resp.status, await resp.text()


async def test_slack_is_in_readyz_and_metrics_and_a_revoked_token_is_not_ready(fake_settings,
                                                                              fake_slack):
    """Issue 25: with Socket Mode connected /readyz showed no front end and /metrics no
    frontend="slack" series; a revoked token still answered 200 ready."""
    from prometheus_client.parser import text_string_to_metric_families

    from bot.slack.front import run_slack

    settings = slack_settings(fake_settings, fake_slack).with_(http_port=free_port())
    async with Switchboard(settings) as app:
        status, body = await scrape(app, "/readyz")  # configured, not started yet
        assert status == 503 and json.loads(body)["frontends"]["slack"]["state"] == "starting"
        task = asyncio.create_task(run_slack(app.slack_context()))
        link = app.links.link("slack")
        await wait_for(lambda: link.state == "connected", 20, "slack connected")
        status, body = await scrape(app, "/readyz")
        assert status == 200, body
        assert json.loads(body)["frontends"]["slack"]["state"] == "connected"
        await fake_slack.slash(ADMIN, "agents")
        await said_to(fake_slack, ADMIN, "No agents")
        await wait_for(lambda: link.stats.delivered >= 1, 10, "the reply counted")
        got = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families((await scrape(app, "/metrics"))[1])
               for s in f.samples}
        assert got[("switchboard_frontend_connected", (("frontend", "slack"),))] == 1
        assert got[("switchboard_frontend_ready", (("frontend", "slack"),))] == 1
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    fake_slack.refuse("token_revoked")
    async with Switchboard(settings) as app:
        await asyncio.wait_for(run_slack(app.slack_context()), 10)
        status, body = await scrape(app, "/readyz")
        report = json.loads(body)
        assert status == 503 and report["ready"] is False
        assert report["not_ready"] == ["slack: down (Slack refused the app's token "
                                       "(token_revoked))"]


async def test_socket_mode_reconnects_when_slack_asks_for_a_refresh(fake_slack_app):
    app, fake = fake_slack_app
    assert fake.connections == 1
    fake.refresh()
    await fake.wait_for(lambda: fake.connections == 2, 10, what="a second connection")
    await fake.slash(ADMIN, "agents")
    await said_to(fake, ADMIN, "No agents")


async def test_only_the_configured_workspace_is_heard(fake_settings, fake_slack):
    settings = slack_settings(fake_settings, fake_slack).with_(slack_team_id="T0THERS")
    app, front = await start(settings, fake_slack)
    try:
        fake_slack.add_user("UOUT", "outsider", team="T0FAKE")
        fake_slack.add_user("UIN", "insider", team="T0THERS")
        await app.store.operators.upsert("slack", "UIN", "insider", "admin", "test")
        await fake_slack.slash(ADMIN, "agents")  # alice's workspace is not the configured one
        await fake_slack.slash("UOUT", "agents")
        await fake_slack.slash("UIN", "agents")
        await said_to(fake_slack, "UIN", "No agents")  # after the two before it
        assert fake_slack.to(ADMIN) == [] and fake_slack.to("UOUT") == []
        assert {a.user_id for a in await app.store.audit.recent(5)} == {"slack:UIN"}
    finally:
        await stop(app, front)


async def test_the_send_to_agent_shortcut_picks_the_agent_from_a_menu(fake_slack_app):
    app, fake = fake_slack_app
    await fake.slash(ADMIN, "spawn helper hi")
    card = await card_of(fake, "helper")
    await fake.send("interactive", {
        "type": "message_action", "callback_id": "sb_send_to_agent", "trigger_id": "trig-x",
        "user": {"id": ADMIN, "name": "alice"}, "team": {"id": "T0FAKE"},
        "channel": {"id": CHANNEL}, "message": {"ts": "1.2", "text": "look at &lt;this&gt;"},
        "response_url": "http://x/respond"})
    modal = await fake.wait_for(lambda: next((m for m in fake.modals
                                              if m["view"]["callback_id"] == "sb_send"), None),
                                what="the modal")
    picker = modal["view"]["blocks"][0]["element"]
    agent = picker["options"][0]["value"]
    assert modal["view"]["blocks"][1]["element"]["initial_value"] == "look at <this>"
    await fake.submit(ADMIN, modal, {"agent": agent, "text": "look at <this>"})
    # The agent got the text as typed; the card shows it escaped.
    await fake.wait_for(lambda: "ECHO: look at &lt;this&gt;" in now_text(fake, card), 20,
                        what="the message reached the agent")


async def test_without_agent_sessions_the_thread_status_is_the_fallback(fake_slack_app):
    app, fake = fake_slack_app
    fake.agent_sessions = False
    await fake.slash(ADMIN, "spawn plain SLEEP 1: hi")
    card = await card_of(fake, "plain")
    await fake.wait_for(lambda: [s for s in fake.statuses
                                 if s[0] == "assistant.threads.setStatus" and s[2] == card["ts"]
                                 and s[3] == "is working…"], 20, what="the status line")
    await fake.wait_for(lambda: any(s[2] == card["ts"] and s[3] == "" for s in fake.statuses),
                        20, what="the status cleared once idle")
