"""Files into an agent from Slack (issue 28, acceptance 1): the real slack-bolt over Socket Mode
against the fake Slack, which delivers `file_share` events and serves the files only with the
bot token; the real CLI on the mock API sees the image in the next request."""

from __future__ import annotations

import pytest

from tests.conftest import make_settings, wait_for
from tests.e2e.test_files_telegram import png, read_what_was_sent
from tests.e2e.test_slack import (
    ADMIN,
    VIEWER,
    card_of,
    recorded,
    said_to,
    slack_settings,
    start,
    stop,
    told,
)
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.mock_anthropic import directive_of, image_blocks

pytestmark = [pytest.mark.timeout(180), pytest.mark.real_cli]

LIMIT = 4096


@pytest.fixture
def fake_slack():
    with FakeSlack() as fake:
        for uid, name in ((ADMIN, "alice"), (VIEWER, "vic"), ("UBOB", "bob")):
            fake.add_user(uid, name)
        yield fake
        assert fake.errors == []


@pytest.fixture
async def app_slack(short_home, mock_api, fake_slack):
    (short_home / "t").mkdir(exist_ok=True)
    settings = slack_settings(make_settings(short_home, mock_api), fake_slack).with_(
        attachment_max_bytes=LIMIT)
    app, front = await start(settings, fake_slack)
    yield app, fake_slack
    await stop(app, front)


async def agent_thread(app, fake, name, work):
    await fake.slash(ADMIN, f"spawn {name} --cwd {work} TEXT: ready")
    card = await card_of(fake, name)
    r = await app.pool.fleet.get(name)
    await wait_for(lambda: r.state == "idle", 60, "the first turn ends")
    await recorded(app, name, card)
    return card, r


async def test_a_photo_and_a_document_in_the_thread_land_and_the_model_sees_the_image(
        app_slack, tmp_path, mock_api):
    app, fake = app_slack
    mock_api.on_request = read_what_was_sent
    work = tmp_path / "w"
    work.mkdir()
    card, r = await agent_thread(app, fake, "looker", work)
    before = len(mock_api.requests)

    image = png()
    shot = fake.user_file(ADMIN, image, "screen shot.png", "image/png")
    await fake.event(fake.file_share_event(ADMIN, "the page looks like this", [shot],
                                           thread_ts=card["ts"]))
    await said_to(fake, ADMIN, "Saved for looker as attachments/screen_shot.png")
    assert (work / "attachments" / "screen_shot.png").read_bytes() == image
    assert fake.downloads == [(shot["id"], True)]  # with the bot token, once

    def image_seen():
        return [b for body in mock_api.requests[before:] for b in image_blocks(body)]

    await wait_for(image_seen, 60, "the model sees the image")
    assert image_seen()[0]["source"]["media_type"] == "image/png"
    announced = [directive_of(b) for b in mock_api.requests[before:]
                 if "[Switchboard]" in directive_of(b)]
    assert "the page looks like this" in announced[0] and "screen_shot.png" in announced[0]
    await wait_for(lambda: r.state == "idle", 60, "the turn ends")

    spec = fake.user_file(ADMIN, b"%PDF-1.4 spec", "spec.pdf", "application/pdf")
    again = fake.user_file(ADMIN, b"%PDF-1.4 spec v2", "spec.pdf", "application/pdf")
    await fake.event(fake.file_share_event(ADMIN, "", [spec, again], thread_ts=card["ts"]))
    await wait_for(lambda: (work / "attachments" / "spec-1.pdf").exists(), 30, "both stored")
    assert (work / "attachments" / "spec.pdf").read_bytes() == b"%PDF-1.4 spec"
    assert (work / "attachments" / "spec-1.pdf").read_bytes() == b"%PDF-1.4 spec v2"


async def test_refusals_in_slack_say_why_and_write_nothing(app_slack, tmp_path):
    app, fake = app_slack
    work = tmp_path / "w"
    work.mkdir()
    card, _ = await agent_thread(app, fake, "guarded", work)

    big = fake.user_file(ADMIN, b"x" * (LIMIT + 1), "big.log", "text/plain")
    await fake.event(fake.file_share_event(ADMIN, "", [big], thread_ts=card["ts"]))
    refusal = await said_to(fake, ADMIN, "too big")
    assert "attachment_max_bytes" in refusal["text"]

    evil = fake.user_file(ADMIN, b"#!/bin/sh\n", "../../.bashrc", "text/plain")
    await fake.event(fake.file_share_event(ADMIN, "", [evil], thread_ts=card["ts"]))
    await said_to(fake, ADMIN, "is a path, not a name")

    loose = fake.user_file(ADMIN, b"hello", "note.txt", "text/plain")
    # In the app's direct messages, not in an agent's thread (in the channel, outside a thread,
    # it is chatter the app does not read).
    await fake.event(fake.file_share_event(ADMIN, "for whom?", [loose], channel="DALICE",
                                           channel_type="im"))
    await said_to(fake, ADMIN, "I do not know which agent that file is for")

    seen = fake.user_file(VIEWER, b"hello", "note.txt", "text/plain")
    await fake.event(fake.file_share_event(VIEWER, "", [seen], thread_ts=card["ts"]))
    await said_to(fake, VIEWER, "Viewers cannot send files")

    assert not (work / "attachments").exists() or list((work / "attachments").iterdir()) == []
    # The oversized file was never fetched (Slack said its size); the viewer's and the one for
    # no agent neither. (The odd name is judged by the supervisor, after the download.)
    assert [fid for fid, _ in fake.downloads] == [evil["id"]]
    assert told(fake, ADMIN, "Saved for") == []
