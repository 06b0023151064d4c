"""Files into an agent from Telegram (issue 28, acceptance 1): the real python-telegram-bot
against the fake Bot API (getFile and the file download as Telegram serves them), the real CLI
on the mock API, so the image the operator sent is seen by the model in the next request."""

from __future__ import annotations

import re
import struct
import zlib

import pytest

from tests.conftest import make_settings, wait_for
from tests.e2e.test_telegram import ADMIN, OPERATOR, said, start, stop, tg_settings
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.mock_anthropic import directive_of, image_blocks

pytestmark = [pytest.mark.timeout(180), pytest.mark.real_cli]

VIEWER = 400
LIMIT = 4096


def png(width: int = 4, height: int = 3) -> bytes:
    """A real PNG (red pixels), so the CLI's Read tool takes it as an image."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                              0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def read_what_was_sent(body):
    """The model's side: a turn announcing a file makes it Read the file (the full path)."""
    text = directive_of(body)
    m = re.search(r"full path (\S+?)\)\.", text)
    if "[Switchboard]" in text and m:
        return {"tool": "Read", "input": {"file_path": m.group(1)}}
    return None


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        for uid, name in ((ADMIN, "alice"), (OPERATOR, "bob"), (VIEWER, "vera")):
            fake.add_chat(uid, first_name=name, username=name)
        yield fake
        assert [e for e in fake.errors if not e.get("injected")
                and "not modified" not in str(e.get("description", ""))] == []


@pytest.fixture
async def app_tg(short_home, mock_api, fake_tg):
    (short_home / "t").mkdir(exist_ok=True)
    settings = tg_settings(make_settings(short_home, mock_api), fake_tg).with_(
        attachment_max_bytes=LIMIT)
    app, front = await start(settings, fake_tg, operators=(OPERATOR,))
    await app.store.operators.upsert("telegram", str(VIEWER), "", "viewer", "test")
    yield app, fake_tg
    await stop(app, front)


async def _at_least(rows, n):
    return len(await rows) >= n


def hits(fake, chat, needle):
    return [m for m in fake.sent(chat) if needle in (m.get("text") or "")]


async def card_of(app, fake, chat, name):
    """The agent's status card in `chat`, once its first turn is over and it is recorded."""
    card = await said(fake, chat, "turns:")
    assert name in card["text"]
    r = await app.pool.fleet.get(name)
    await wait_for(lambda: r.state == "idle", 60, "the first turn ends")
    return card


async def test_a_photo_and_a_document_land_safely_and_the_model_sees_the_image(
        app_tg, tmp_path, mock_api):
    app, fake = app_tg
    mock_api.on_request = read_what_was_sent
    work = tmp_path / "w"
    work.mkdir()
    fake.user_sends(ADMIN, f"/spawn looker --cwd {work} TEXT: ready")
    card = await card_of(app, fake, ADMIN, "looker")
    r = await app.pool.fleet.get("looker")
    before = len(mock_api.requests)

    image = png()
    fake.user_sends_file(ADMIN, image, photo=True, caption="what is wrong on this page?",
                         reply_to_message_id=card["message_id"])
    saved = await said(fake, ADMIN, "Saved for looker")
    stored = re.search(r"as (attachments/\S+?);", saved["text"]).group(1)
    assert re.fullmatch(r"attachments/photo-[\w-]+\.png", stored)
    assert (work / stored).read_bytes() == image

    def image_seen():
        return [b for body in mock_api.requests[before:] for b in image_blocks(body)]

    await wait_for(image_seen, 60, "the model sees the image")
    seen = image_seen()[0]
    assert seen["source"]["media_type"] == "image/png"
    announced = [directive_of(b) for b in mock_api.requests[before:]
                 if "[Switchboard]" in directive_of(b)]
    assert announced and stored in announced[0] and "what is wrong on this page?" in announced[0]
    assert "It is an image" in announced[0]
    await wait_for(lambda: r.state == "idle", 60, "the turn ends")

    # A document, twice under the same name: the second never overwrites the first.
    for content in (b"first log\n", b"second log\n"):
        fake.user_sends_file(ADMIN, content, filename="server.log", mime_type="text/plain",
                             reply_to_message_id=card["message_id"])
        await wait_for(lambda c=content: any(
            p.read_bytes() == c for p in (work / "attachments").glob("server*.log")), 30,
            "the log stored")
    assert (work / "attachments" / "server.log").read_bytes() == b"first log\n"
    assert (work / "attachments" / "server-1.log").read_bytes() == b"second log\n"
    owner = work.stat()
    assert (work / "attachments" / "server.log").stat().st_uid == owner.st_uid


async def test_refusals_say_why_and_write_nothing(app_tg, tmp_path):
    app, fake = app_tg
    work = tmp_path / "w"
    work.mkdir()
    fake.user_sends(ADMIN, f"/spawn guarded --cwd {work} TEXT: ready")
    card = await card_of(app, fake, ADMIN, "guarded")
    asked = len(await app.store.turns.recent((await app.pool.fleet.get("guarded")).id, 50))

    fake.user_sends_file(ADMIN, b"x" * (LIMIT + 1), filename="big.bin",
                         reply_to_message_id=card["message_id"])
    msg = await said(fake, ADMIN, "too big")
    assert "4,097 bytes" in msg["text"] and "attachment_max_bytes" in msg["text"]

    names = ("../../etc/cron.d/evil", "..\\..\\evil.bat", "sub/dir.txt", "..")
    for n, name in enumerate(names, 1):
        fake.user_sends_file(ADMIN, b"#!/bin/sh\n", filename=name,
                             reply_to_message_id=card["message_id"])
        await fake.wait_for(lambda n=n: len(hits(fake, ADMIN, "is a path, not a name")) >= n,
                            30, what=f"refusal {n}")
    assert all("Rename the file" in m["text"] for m in hits(fake, ADMIN, "not a name"))

    fake.user_sends_file(ADMIN, b"hello", filename="note.txt")  # a reply to nothing
    await said(fake, ADMIN, "I do not know which agent that file is for")

    viewer_card = await card_of(app, fake, VIEWER, "guarded")
    fake.user_sends_file(VIEWER, b"hello", filename="note.txt",
                         reply_to_message_id=viewer_card["message_id"])
    await said(fake, VIEWER, "Viewers cannot send files")

    # A killed agent takes no file, and says so, also once the kill is done and its card says
    # so (the card of an ended agent still names it).
    await app.api.kill("guarded")
    r = await app.pool.fleet.get("guarded")
    await wait_for(lambda: r.state == "killed", 30, "guarded killed")
    await fake.wait_for(lambda: "killed" in (fake.message(ADMIN, card["message_id"]) or {})
                        .get("text", ""), 30, what="the card showing the kill")
    fake.user_sends_file(ADMIN, b"late", filename="late.txt",
                         reply_to_message_id=card["message_id"])
    # Its card still names it (regression: "I do not know which agent that file is for").
    await said(fake, ADMIN, "is killed")

    assert not (work / "attachments").exists() or list((work / "attachments").iterdir()) == []
    assert not (tmp_path / "etc").exists()
    r = await app.pool.fleet.get("guarded")
    assert len(await app.store.turns.recent(r.id, 50)) == asked  # no turn for a refused file
    async def audited():  # the audit row is written after the reply is on its way
        return [a for a in await app.store.audit.recent(50) if a.action == "file"]

    await wait_for(lambda: _at_least(audited(), 8), 10, "eight file audit rows")
    assert not any(a.ok for a in await audited())
