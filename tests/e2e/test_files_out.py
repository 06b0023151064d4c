"""Files out of an agent (issue 28, acceptance 2): the agent's `send_file` tool, called by the
real CLI on the mock API, delivers a workspace file to Telegram (sendDocument) and Slack (the
files upload flow) at once; a hostile agent's paths out of its workspace (`..`, an absolute path,
symbolic links it made) are refused and nothing is sent. `/file` fetches a file for the
operator under the same rules."""

from __future__ import annotations

import json

import pytest

from bot.telegram.front import TelegramFrontend
from supervisor.api import FileRefused
from supervisor.config_types import Secret
from tests.conftest import PERMISSIVE_POLICY, make_settings, wait_for
from tests.e2e.test_slack import ADMIN, card_of, recorded, slack_settings, start, stop
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.fake_telegram import FakeTelegram

pytestmark = [pytest.mark.timeout(180), pytest.mark.real_cli]

TG_ADMIN = 100


class Who:
    id, name, platform = "telegram:100", "alice", "telegram"


@pytest.fixture
def fake_slack():
    with FakeSlack() as fake:
        fake.add_user(ADMIN, "alice")
        yield fake
        assert fake.errors == []


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        fake.add_chat(TG_ADMIN, first_name="alice", username="alice")
        yield fake


@pytest.fixture
async def two_fronts(short_home, mock_api, fake_slack, fake_tg):
    """The real CLI (every tool allowed: the agent is the hostile one here), Slack and Telegram
    on one Switchboard."""
    (short_home / "t").mkdir(exist_ok=True)
    settings = slack_settings(make_settings(short_home, mock_api,
                                            policy_file=PERMISSIVE_POLICY), fake_slack).with_(
        telegram_token=Secret(fake_tg.token), telegram_api_base_url=fake_tg.url,
        telegram_admin_ids=(str(TG_ADMIN),), status_card_interval_s=0.2,
        send_file_max_bytes=10_000)
    app, front = await start(settings, fake_slack)
    tg = TelegramFrontend(app.telegram_context(), poll_timeout_s=1)
    await tg.start()
    yield app, fake_slack, fake_tg
    await tg.stop()
    await stop(app, front)


def send_file(path, caption=""):
    return "TOOL mcp__switchboard__send_file " + json.dumps({"path": path, "caption": caption})


async def turn(app, r, line):
    """One turn of `r` on `line`; its final text (the mock answers a tool's result with
    `TOOL RESULT: <the result>`)."""
    before = len(await app.store.turns.recent(r.id, 100))
    await app.api.ask(r.id, line)

    async def done():  # the new turn's row, ended (its row exists while it runs)
        rows = await app.store.turns.recent(r.id, 100)
        return len(rows) > before and rows[0].status != "running"

    await wait_for(done, 60, f"the turn on {line[:40]!r}")
    return (await app.store.turns.recent(r.id, 1))[0].result_text or ""


async def test_send_file_reaches_telegram_and_slack_and_paths_out_are_refused(
        two_fronts, tmp_path):
    app, slack, tg = two_fronts
    work = tmp_path / "w"
    work.mkdir()
    report = "line one\n" + "é" * 100 + "\n"
    (work / "out").mkdir()
    (work / "out" / "report.md").write_text(report)
    await slack.slash(ADMIN, f"spawn writer --cwd {work} TEXT: ready")
    card = await card_of(slack, "writer")
    r = await app.pool.fleet.get("writer")
    await wait_for(lambda: r.state == "idle", 60, "the first turn")
    await recorded(app, "writer", card)

    said = await turn(app, r, send_file("out/report.md", "the weekly report"))
    assert "Sent report.md" in said

    def on_slack():
        return [f for f in slack.files if f["filename"] == "report.md"]

    await slack.wait_for(on_slack, 30, what="the file on Slack")
    assert on_slack()[0]["content"] == report.encode()
    assert on_slack()[0]["thread_ts"] == card["ts"]  # in the agent's thread

    def on_tg():
        return [d for d in tg.documents if d["filename"] == "report.md"]

    await tg.wait_for(on_tg, 30, what="the file on Telegram")
    assert on_tg()[0]["bytes"] == report.encode() and on_tg()[0]["chat_id"] == TG_ADMIN
    assert "writer sent report.md" in on_tg()[0]["caption"]

    # The hostile part: links the agent makes itself, then every way out.
    made = await turn(app, r, "BASH: ln -s /etc/passwd leak && ln -s /etc etc && "
                              "ln -s out inside && echo made")
    assert "made" in made
    refused = {
        "../w/out/report.md": "'..' may not be used",
        "/etc/passwd": "outside the agent's workspace",
        "leak": "symbolic link",
        "etc/passwd": "symbolic link",
        "inside/report.md": "symbolic link",  # a link inside is not followed either
        f"{work}/leak": "symbolic link",
        "out": "not a regular file",
        "missing.txt": "There is no file",
    }
    for path, why in refused.items():
        said = await turn(app, r, send_file(path))
        assert "error:" in said and why in said, (path, said)
    (work / "big.bin").write_bytes(b"x" * 10_001)
    said = await turn(app, r, send_file("big.bin"))
    assert "too big" in said and "send_file_max_bytes" in said
    sent = {f["filename"] for f in slack.files} | {d["filename"] for d in tg.documents}
    assert sent == {"report.md"}

    # Files in: the agent makes attachments/ a link out; the operator's file is refused there
    # and nothing is written through it.
    outside = tmp_path / "outside"
    outside.mkdir()
    made = await turn(app, r, f"BASH: ln -s {outside} attachments && echo linked")
    assert "linked" in made
    with pytest.raises(FileRefused, match="not a directory"):
        await app.api.files.attach("writer", "notes.txt", b"hello", by=Who())
    assert list(outside.iterdir()) == []


async def test_the_operator_fetches_a_workspace_file_with_file(two_fronts, tmp_path):
    app, slack, tg = two_fronts
    work = tmp_path / "w"
    work.mkdir()
    (work / "notes.txt").write_bytes(b"\x00binary\xffnotes")
    (work / "link").symlink_to("/etc/hostname")
    tg.user_sends(TG_ADMIN, f"/spawn keeper --cwd {work} TEXT: ready")
    await tg.wait_for(lambda: any("turns:" in (m.get("text") or "")
                                  for m in tg.sent(TG_ADMIN)), 30, what="the card")
    tg.user_sends(TG_ADMIN, "/file keeper notes.txt")
    await tg.wait_for(lambda: [d for d in tg.documents if d["filename"] == "notes.txt"], 30,
                      what="the file")
    doc = next(d for d in tg.documents if d["filename"] == "notes.txt")
    assert doc["bytes"] == b"\x00binary\xffnotes"
    for path, why in (("link", "symbolic link"), ("../../etc/passwd", "'..' may not be used"),
                      ("/etc/passwd", "outside the agent's workspace")):
        tg.user_sends(TG_ADMIN, f"/file keeper {path}")
        await tg.wait_for(lambda why=why: any(why in (m.get("text") or "")
                                              for m in tg.sent(TG_ADMIN)), 30, what=why)
    assert {d["filename"] for d in tg.documents} == {"notes.txt"}
