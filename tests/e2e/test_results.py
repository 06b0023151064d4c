"""Results with a confidence grade (issue 28, acceptance 4): the real CLI calls the agent's
`report_result` tool (mock API); on Telegram (the fake Bot API) the finished-turn notice shows
the grade, a low one is pushed as needing review with its evidence and a high one is not, and
/results lists them lowest first."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make_settings, wait_for
from tests.e2e.test_telegram import ADMIN, start, stop, tg_settings
from tests.fakes.fake_telegram import FakeTelegram

pytestmark = [pytest.mark.timeout(180), pytest.mark.real_cli]

VIEWER = 400


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        for uid, name in ((ADMIN, "alice"), (VIEWER, "vera")):
            fake.add_chat(uid, first_name=name, username=name)
        yield fake


@pytest.fixture
async def app_tg(short_home, mock_api, fake_tg):
    (short_home / "t").mkdir(exist_ok=True)
    settings = tg_settings(make_settings(short_home, mock_api), fake_tg).with_(
        review_below_confidence=60)
    app, front = await start(settings, fake_tg)
    await app.store.operators.upsert("telegram", str(VIEWER), "", "viewer", "test")
    yield app, fake_tg
    await stop(app, front)


def report(summary, confidence, evidence):
    return "TOOL mcp__switchboard__report_result " + json.dumps(
        {"summary": summary, "confidence": confidence, "evidence": evidence})


def hits(fake, chat, needle):
    return [m for m in fake.sent(chat) if needle in (m.get("text") or "")]


async def turns_done(app, r, n):
    async def done():
        rows = await app.store.turns.recent(r.id, 50)  # n turns, the newest ended
        return len(rows) >= n and rows[0].status != "running"
    await wait_for(done, 60, f"{n} turns")


async def test_low_confidence_is_pushed_for_review_with_evidence_and_high_is_plain(
        app_tg, tmp_path):
    app, fake = app_tg
    fake.user_sends(ADMIN, f"/spawn grader --cwd {tmp_path} "
                    + report("fixed the login bug", 92, "pytest: 12 passed"))
    await fake.wait_for(lambda: hits(fake, ADMIN, "grader finished · confidence 92%"), 60,
                        what="the finished notice with its grade")
    r = await app.pool.fleet.get("grader")
    await turns_done(app, r, 1)
    done = hits(fake, ADMIN, "grader finished · confidence 92%")[-1]["text"]
    assert "fixed the login bug" in done
    assert hits(fake, ADMIN, "needs review") == []  # a high grade is a plain notice

    await app.api.ask(r.id, report("maybe fixed the export", 35,
                                   "could not reproduce locally; no test covers it"))
    review = await fake.wait_for(lambda: hits(fake, ADMIN, "grader: needs review"), 60,
                                 what="the review push")
    text = review[-1]["text"]
    assert "confidence 35%" in text and "maybe fixed the export" in text
    assert "could not reproduce locally; no test covers it" in text  # with its evidence
    # Every front-end reader sees it (each chat in its own time).
    await fake.wait_for(lambda: hits(fake, VIEWER, "grader: needs review"), 30,
                        what="the review push to the viewer")
    await fake.wait_for(lambda: hits(fake, ADMIN, "grader finished · confidence 35%"), 60,
                        what="the finished notice of the low one")
    await turns_done(app, r, 2)

    # A grade out of range is refused to the agent; nothing is recorded.
    await app.api.ask(r.id, report("sure", 150, ""))
    await turns_done(app, r, 3)
    last = (await app.store.turns.recent(r.id, 1))[0].result_text or ""
    # (The tool's schema says 0-100, so it is refused before the tool runs.)
    assert "greater than the maximum of 100" in last

    fake.user_sends(VIEWER, "/results")
    listed = await fake.wait_for(lambda: hits(fake, VIEWER, "lowest confidence first"), 30,
                                 what="/results")
    body = listed[-1]["text"]
    assert body.index("35%") < body.index("92%")
    assert "needs review" in body and "maybe fixed the export" in body
    rows = await app.store.results.recent()
    assert [(x.confidence, x.needs_review) for x in rows] == [(35, True), (92, False)]
