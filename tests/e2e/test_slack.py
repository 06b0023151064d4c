"""The Slack front end end to end: the real slack-bolt and slack-sdk against a fake Slack (Web
API, Socket Mode, signed HTTP requests), with real agents (the fake claude CLI, or the real CLI
on the mock Anthropic API where a tool must run or the model must read an answer)."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from bot.app import Switchboard
from bot.slack import SlackFrontend
from supervisor.config import Secret
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
    front = SlackFrontend(app, ping_interval_s=1)
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


@pytest.fixture
async def real_slack_app(short_home, mock_api, fake_slack):
    (short_home / "t").mkdir(exist_ok=True)
    app, front = await start(slack_settings(make_settings(short_home, mock_api), fake_slack),
                             fake_slack)
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

    return await fake.wait_for(find, timeout, what=f"the card of {name}")


async def in_thread(fake, card, needle, timeout=30.0):
    def find():
        hits = [m for m in fake.thread(card["ts"]) if needle in m["text"]]
        return hits[-1] if hits else None

    return await fake.wait_for(find, timeout, what=f"{needle!r} in the thread")


async def recorded(app, name, card):
    """The card is the agent's thread once recorded (at the cards' next tick)."""
    r = await app.pool.get(name)

    async def found():
        return await app.store.operators.card("slack", r.id, CHANNEL) == card["ts"]

    await wait_for(found, 10, "the thread recorded")


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


async def test_a_stranger_is_refused_once_and_audited(fake_slack_app):
    app, fake = fake_slack_app
    await fake.slash(STRANGER, "agents")
    await said_to(fake, STRANGER, "private Switchboard")
    await fake.slash(STRANGER, "spawn evil rm everything")

    async def audited():
        rows = [a for a in await app.store.audit.recent(20) if a.action == "refused"]
        return len(rows) >= 2

    await wait_for(audited, 10, "two audit rows")
    assert len(fake.to(STRANGER)) == 1 and fake.to(STRANGER)[0]["channel"] == CHANNEL
    assert app.pool.runners(include_dead=True) == []


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


async def test_a_duplicate_delivery_acts_once(fake_slack_app):
    app, fake = fake_slack_app
    await fake.slash(ADMIN, "spawn dup hello")
    card = await card_of(fake, "dup")
    await recorded(app, "dup", card)
    event = fake.message_event(ADMIN, "only once", thread_ts=card["ts"])
    await fake.event(event, event_id="EvSAME")
    await fake.event(event, event_id="EvSAME", retry=1)  # Slack's retry of the same event
    mention = {**event, "type": "app_mention", "text": "<@UBOT> only once"}
    await fake.event(mention, event_id="EvOTHER")  # the same message as a mention
    await fake.wait_for(lambda: "turns: 2" in now_text(fake, card), 20, what="turn two")
    r = await app.pool.get("dup")
    await wait_for(lambda: r.state == "idle", 20)
    # A marker after them: once its turn is done, any duplicate turn would be done too.
    await fake.event(fake.message_event(ADMIN, "marker", thread_ts=card["ts"]))
    await fake.wait_for(lambda: "ECHO: marker" in now_text(fake, card), 20, what="the marker")
    assert len(await app.store.turns.recent(r.id, 10)) == 3
