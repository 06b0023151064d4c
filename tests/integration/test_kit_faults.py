"""Faults and bad input at the front desk (issue 9), through the fake chat platform on a real
Switchboard (fake claude): bad input answered and audited within a second, a refused message
retried in another form or reported and never acknowledged, phone ergonomics."""

from __future__ import annotations

import logging
import time

import pytest

from bot.app import Switchboard
from bot.kit import MessageId, Tap, TapId
from tests.conftest import wait_for
from tests.integration.test_kit import (
    ALICE,
    BOB,
    PLATFORM,
    ask,
    copies_of,
    dm,
    open_desk,
    says,
    taps,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def alone(fake_settings, chat):
    """Only the admin: every escalation has exactly one chat to go to."""
    async with Switchboard(fake_settings) as app:
        desk = await open_desk(app, chat)
        try:
            yield app, desk
        finally:
            await desk.stop()


async def newest_audit(app: Switchboard):
    return (await app.store.audit.recent(1))[0]


BAD_INPUT = [
    # (what is sent, the reply says, the audit row's action, what its args hold)
    ("/status a\ud800b", "removed from your message", "status", "a\ufffdb"),
    ("/status nosuch\x1b]52;c;ZXZpbA==\x07\x1b[2J", "no agent 'nosuch'", "status", "nosuch"),
    ("/ask a " + "x" * 200_001, "too long", "input", "200,008 characters"),
    ("hello there", "Commands start with '/'", "text", "hello there"),
]


@pytest.mark.parametrize(("text", "says_", "action", "args"), BAD_INPUT,
                         ids=["surrogate", "escapes", "oversize", "plain-text"])
async def test_bad_input_gets_a_clear_reply_and_an_audit_row_within_a_second(
        kit, chat, text, says_, action, args):
    """Regression (issue 9): a lone surrogate got no reply and no audit row (the store and
    the chat API cannot encode it), plain text was not audited."""
    app, desk = kit
    started = time.monotonic()
    await says(desk, ALICE, text)
    row = await newest_audit(app)
    took = time.monotonic() - started
    assert says_ in chat.texts(dm(ALICE))[-1]
    assert (row.action, row.args) == (action, args)
    assert row.user_id.endswith(ALICE.user_id) and not row.ok
    assert took < 1.0
    if "\x1b" in text:
        assert "\x1b" not in chat.texts(dm(ALICE))[-1]
        assert "removed from your message" in chat.texts(dm(ALICE))[-1]


async def test_a_reply_to_no_question_and_a_forged_button_are_answered_and_audited(kit, chat):
    app, desk = kit
    await says(desk, BOB, "yes please", reply_to=MessageId("12345"))
    assert "not a question I asked" in chat.texts(dm(BOB))[-1]
    assert (await newest_audit(app)).action == "input"
    await desk.on_tap(Tap(TapId("t1"), dm(BOB), MessageId("1"), BOB, "/agents\x1b[2J"))
    assert chat.tap_answers[-1]["alert"] and "not one of mine" in chat.tap_answers[-1]["text"]
    row = await newest_audit(app)
    assert (row.action, row.ok, row.args) == ("tap", 0, "/agents")


async def test_a_failing_handler_is_answered_and_audited(kit, chat, monkeypatch):
    app, desk = kit

    async def broken(caller, text):
        raise RuntimeError("boom")

    monkeypatch.setattr(desk, "commands", broken)
    await says(desk, ALICE, "/agents")
    assert "Something went wrong handling your message (ref" in chat.texts(dm(ALICE))[-1]
    row = await newest_audit(app)
    assert (row.action, row.args, row.ok) == ("message", "/agents", 0)
    assert row.result.startswith("failed ref ")
    await taps(desk, ALICE, chat.find(dm(ALICE), "went wrong"), "/agents")
    assert chat.tap_answers[-1]["alert"]
    assert "handling your button press (ref" in chat.texts(dm(ALICE))[-1]
    assert (await newest_audit(app)).action == "tap"


# -- a message the chat refuses ------------------------------------------------------------------


async def test_a_refused_permission_request_goes_out_in_another_form(alone, chat):
    """Regression (issue 9): the platform refusing a permission request's card (400) lost it,
    and its outbox row was acknowledged anyway."""
    app, desk = alone
    chat.refuse_next("Bad Request: can't parse entities: Unsupported start tag")
    row = await ask(app)
    await copies_of(app, row.id, 1)
    card = chat.find(dm(ALICE), row.id)
    assert "rm -rf build" in card.text and chat.action(card, "Allow") == f"/approve {row.id}"

    async def acknowledged():
        return row.id not in {r.id for r in await app.store.escalations.undelivered(PLATFORM)}

    await wait_for(acknowledged, 5, "the row acknowledged")


async def test_a_permission_request_refused_in_every_form_is_reported_not_acknowledged(
        alone, chat, caplog):
    app, desk = alone
    for _ in range(4):  # the card, plain, shorter, as a file
        chat.refuse_next("Forbidden: bot was blocked by the user")
    with caplog.at_level(logging.ERROR):
        row = await ask(app)
        await wait_for(lambda: chat.find(dm(ALICE), f"Could not show {row.id}"), 5,
                       "the report")
    report = chat.find(dm(ALICE), f"Could not show {row.id}")
    assert "bot was blocked" in report.text and f"/approve {row.id}" in report.text
    assert row.id in {r.id for r in await app.store.escalations.undelivered(PLATFORM)}
    assert f"escalation not delivered platform={PLATFORM} id={row.id}" in caplog.text
    assert await app.store.operators.copies(row.id, PLATFORM) == []


# -- phone ergonomics ----------------------------------------------------------------------------


async def test_replying_to_a_permission_request_denies_it_with_the_reason(kit, chat):
    """Regression (issue 9): the reply was answered "use /answer"."""
    app, desk = kit
    row = await ask(app)
    await copies_of(app, row.id, 2)
    await desk.flush(5)
    card = chat.find(dm(BOB), row.id)
    await says(desk, BOB, "use the staging bucket", reply_to=card.id)
    closed = await app.pool.escalations.get(row.id)
    assert closed.answer == {"decision": "deny", "text": "use the staging bucket"}
    assert "Denied" in chat.texts(dm(BOB))[-1]


async def test_kill_all_is_two_taps_and_says_so_once(kit, chat):
    """Regression (issue 9): KILL ALL asked twice, and its report came twice (the reply and
    the notice)."""
    app, desk = kit
    await says(desk, ALICE, "/killall")
    ask_msg = chat.find(dm(ALICE), "kills all")
    await taps(desk, ALICE, ask_msg, chat.action(ask_msg, "Yes, kill everything"))
    assert app.pool.killswitch.halted  # the second tap did it
    assert chat.find(dm(ALICE), "Are you sure?") is None
    await wait_for(lambda: chat.find(dm(ALICE), "Kill switch on"), 5, "the notice")
    await desk.flush(5)
    assert len([t for t in chat.texts(dm(ALICE)) if "Kill switch on" in t]) == 1
    await says(desk, ALICE, "/killswitch off confirm")
    await wait_for(lambda: chat.find(dm(ALICE), "Kill switch off"), 5, "the notice")
    await desk.flush(5)
    assert len([t for t in chat.texts(dm(ALICE)) if "Kill switch off" in t]) == 1


async def test_a_finished_answer_has_one_header_whatever_its_length(kit, chat):
    """Regression (issue 9): a long final answer lost the card's mark."""
    app, desk = kit
    await app.pool.escalations.notify(None, "talker finished", "short answer")
    await app.pool.escalations.notify(None, "talker finished", "long answer " * 400)
    await wait_for(lambda: len([t for t in chat.texts(dm(ALICE)) if "talker finished" in t])
                   == 2, 5, "both answers")
    heads = {t.split("\n")[0] for t in chat.texts(dm(ALICE)) if "talker finished" in t}
    assert heads == {"ℹ️ talker finished"}
