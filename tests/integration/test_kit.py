"""The front-end kit driven through a fake chat platform, on a real Switchboard (fake claude):
strangers refused once and audited, invites, escalations fanned out to every operator, the
first answer winning, and every copy edited, also for an escalation that expires while the
front ends start."""

from __future__ import annotations

import asyncio
import re

import pytest

from bot.app import Switchboard
from bot.kit import FrontDesk, Incoming, MessageId, Sender, Tap, TapId
from bot.kit.ports import ChatId
from supervisor.guard.escalations import Kind
from supervisor.guard.gate import PERMISSION_OPTIONS
from tests.conftest import ADMIN, wait_for
from tests.fakes.fake_chat import FakeChat, FakeClock

pytestmark = pytest.mark.timeout(60)

PLATFORM = "fake"
ALICE, BOB, VIC, EVE, MAL = (Sender("100", "alice"), Sender("200", "bob"), Sender("300", "vic"),
                             Sender("999", "eve"), Sender("998", "mallory"))


def dm(who: Sender) -> ChatId:
    return ChatId(f"dm-{who.user_id}")


async def open_desk(app: Switchboard, chat: FakeChat) -> FrontDesk:
    desk = FrontDesk(chat, app.fleet, app.run_command, clock=FakeClock(),
                     admin_ids=(ALICE.user_id,), kill_label="KILL")
    await desk.start()
    return desk


async def add_staff(app: Switchboard) -> None:
    await app.store.operators.upsert(PLATFORM, BOB.user_id, "bob", "operator", "test")
    await app.store.operators.upsert(PLATFORM, VIC.user_id, "vic", "viewer", "test")


async def says(desk: FrontDesk, who: Sender, text: str,
               reply_to: MessageId | None = None) -> None:
    await desk.on_message(Incoming(dm(who), who, text, reply_to))
    await desk.flush(5)


async def taps(desk: FrontDesk, who: Sender, message, action: str) -> None:
    await desk.on_tap(Tap(TapId(f"tap-{who.user_id}-{message.id}"), dm(who), message.id, who,
                          action))
    await desk.flush(5)


async def ask(app: Switchboard, command: str = "rm -rf build"):
    return await app.pool.escalations.open(
        agent_id=None, kind=Kind.PERMISSION, title="w wants to use Bash",
        body="Why asked: Bash: no rule decides it", tool_name="Bash",
        tool_input={"command": command}, options=PERMISSION_OPTIONS, detail=command,
        detail_name="command.sh")


async def copies_of(app: Switchboard, esc_id: str, n: int):
    async def recorded():
        return len(await app.store.operators.copies(esc_id, PLATFORM)) == n

    await wait_for(recorded, 10, f"{n} copies of {esc_id}")


# -- who may talk ----------------------------------------------------------------------------------


async def test_a_stranger_is_refused_once_audited_every_time_then_silent(kit, chat):
    app, desk = kit
    for text in ("/agents", "/spawn evil rm everything", "hello?"):
        await says(desk, EVE, text)
    assert len(chat.texts(dm(EVE))) == 1 and "private Switchboard bot" in chat.texts(dm(EVE))[0]
    refused = [a for a in await app.store.audit.recent(20) if a.action == "refused"]
    assert [a.args for a in reversed(refused)] == ["/agents", "/spawn evil rm everything",
                                                   "hello?"]
    assert all(a.platform == PLATFORM and a.user_id == EVE.user_id for a in refused)
    assert app.pool.fleet.everyone() == []
    # A tap from a stranger (an old message forwarded, say): refused and audited too.
    await desk.on_tap(Tap(TapId("t"), dm(EVE), MessageId("1"), EVE, "/killall"))
    assert chat.tap_answers[-1]["alert"] and "not an operator" in chat.tap_answers[-1]["text"]
    assert len([a for a in await app.store.audit.recent(20) if a.action == "refused"]) == 4
    assert not app.pool.killswitch.halted


async def test_an_invite_works_once_and_the_admin_is_seeded(kit, chat):
    app, desk = kit
    await says(desk, ALICE, "/invite")
    code = re.search(r"/start (\w+)", chat.texts(dm(ALICE))[-1]).group(1)
    await says(desk, EVE, f"/start {code}")
    assert "you are operator" in chat.texts(dm(EVE))[-1]
    await says(desk, MAL, f"/start {code}")
    assert "not valid" in chat.texts(dm(MAL))[-1]
    assert await app.store.operators.get(PLATFORM, MAL.user_id) is None
    joined = await app.store.operators.get(PLATFORM, EVE.user_id)
    assert (joined.role, joined.name, joined.added_by) == ("operator", "eve", "invite")
    starts = [(a.user_id, a.ok) for a in await app.store.audit.recent(20) if a.action == "start"]
    assert sorted(starts) == [(MAL.user_id, False), (EVE.user_id, True)]
    await says(desk, EVE, "/agents")
    assert "No agents running" in chat.texts(dm(EVE))[-1]
    # The admin from the settings got the kill control with the welcome; an operator not.
    await says(desk, ALICE, "/start")
    welcome = chat.find(dm(ALICE), "you are admin")
    assert welcome.offer_kill and "KILL" in welcome.text
    assert not chat.find(dm(EVE), "you are operator").offer_kill


# -- escalations ---------------------------------------------------------------------------------


async def test_fan_out_first_answer_wins_and_every_copy_is_edited(kit, chat):
    app, desk = kit
    row = await ask(app)
    await copies_of(app, row.id, 2)
    await desk.flush(5)
    alice, bob = chat.find(dm(ALICE), "w wants to use Bash"), chat.find(dm(BOB), row.id)
    assert chat.find(dm(VIC), row.id) is None  # a viewer may not answer: no copy
    assert "rm -rf build" in alice.text and "Why asked" in alice.text
    assert [label for r in alice.buttons for label, _ in r] == [
        "✅ Allow", "❌ Deny", "🔁 Allow for session", "🔎 Details"]
    bobs_deny = chat.action(bob, "Deny")  # what bob's phone still shows
    await taps(desk, ALICE, alice, chat.action(alice, "Allow"))
    assert chat.tap_answers[-1] == {"tap": f"tap-100-{alice.id}", "text": "Done.",
                                    "alert": False}
    # Bob taps the Deny he saw before his copy was edited: the first tap has already won.
    await taps(desk, BOB, bob, bobs_deny)
    assert chat.tap_answers[-1]["alert"] and "alice" in chat.tap_answers[-1]["text"]
    assert (await app.pool.escalations.get(row.id)).answer["decision"] == "allow"

    def edited():
        return all("Allowed by alice" in m.text and not m.buttons for m in (alice, bob))

    await wait_for(edited, 10, "both copies edited")
    assert alice.edits == bob.edits == 1
    assert await app.fleet.unsettled(PLATFORM) == []


async def test_a_reply_to_a_question_answers_it(kit, chat):
    app, desk = kit
    row = await app.pool.escalations.open(agent_id=None, kind=Kind.QUESTION,
                                          title="Which port?", body="Which port?",
                                          free_text=True)
    await copies_of(app, row.id, 2)
    await desk.flush(5)
    asked = chat.find(dm(BOB), "Which port?")
    assert "Reply to this message" in asked.text
    await says(desk, BOB, "use 8080", reply_to=asked.id)
    assert (await app.pool.escalations.get(row.id)).answer["text"] == "use 8080"
    await says(desk, BOB, "and this?", reply_to=MessageId("12345"))
    assert "not a question I asked" in chat.texts(dm(BOB))[-1]


async def test_a_reply_to_an_agents_status_card_is_a_message_to_the_agent(kit, chat):
    """The rule Slack's threads use (bot/kit/replies.py), for every platform."""
    app, desk = kit
    await app.fleet.record_card(PLATFORM, "a1", dm(BOB), MessageId("77"))
    await says(desk, BOB, "carry on", reply_to=MessageId("77"))
    assert "not a question I asked" not in chat.texts(dm(BOB))[-1]
    rows = [r for r in await app.store.audit.recent(5) if r.user_name == BOB.name]
    assert rows[0].action == "ask" and rows[0].args.startswith("a1 carry on"), rows


async def test_a_long_call_goes_whole_as_a_file_right_above_its_card(kit, chat):
    app, desk = kit
    command = "echo " + "x" * 1600 + "; git push --force origin main"
    row = await ask(app, command)
    await copies_of(app, row.id, 2)
    await desk.flush(5)
    for who in (ALICE, BOB):
        (doc,) = [m for m in chat.sent(dm(who)) if m.document]
        card = chat.find(dm(who), row.id)
        assert doc.document.content.decode() == command
        assert card.reply_to == doc.id and "Cut short" in card.text
        assert "git push --force" not in card.text


async def test_copies_of_an_escalation_that_expires_while_the_front_ends_start_are_edited(
        fake_settings, chat):
    """Regression: an escalation the supervisor expired at start-up (its asker died with the
    previous run) kept its buttons in every chat, because it closed before any front end was
    listening for answers."""
    async with Switchboard(fake_settings) as app:
        await add_staff(app)
        desk = await open_desk(app, chat)
        row = await ask(app)
        await copies_of(app, row.id, 2)
        await desk.stop()
    # The supervisor restarts: the pool expires the question before any front end listens.
    async with Switchboard(fake_settings) as app:
        assert (await app.pool.escalations.get(row.id)).status == "interrupted"
        copies = [chat.messages[(c, m)]
                  for c, m in await app.store.operators.copies(row.id, PLATFORM)]
        assert all(m.buttons for m in copies)  # still asking, until the front end starts
        desk = await open_desk(app, chat)
        try:
            def edited():
                return all("Interrupted" in m.text and not m.buttons for m in copies)

            await wait_for(edited, 10, "every copy marked interrupted")
            assert await app.fleet.unsettled(PLATFORM) == []
            await wait_for(lambda: chat.find(dm(ALICE), f"Interrupted: {row.title}"), 10,
                           "the expiry notice")
        finally:
            await desk.stop()
    # And once settled, a later start leaves those copies alone.
    async with Switchboard(fake_settings) as app:
        desk = await open_desk(app, chat)
        await desk.flush(5)
        await desk.stop()
    assert all(m.edits == 1 for m in copies)


async def test_an_answer_given_while_the_chat_front_end_was_down_reaches_its_copies(
        fake_settings, chat):
    async with Switchboard(fake_settings) as app:
        await add_staff(app)
        desk = await open_desk(app, chat)
        row = await ask(app)
        await copies_of(app, row.id, 2)
        await desk.stop()
        reply = await app.run_command(ADMIN, f"/deny {row.id} not today")
        assert reply.ok
        desk = await open_desk(app, chat)
        try:
            copies = [chat.messages[(c, m)]
                      for c, m in await app.store.operators.copies(row.id, PLATFORM)]
            await wait_for(lambda: all("Denied" in m.text and "not today" in m.text
                                       and not m.buttons for m in copies), 10, "copies denied")
        finally:
            await desk.stop()


# -- causal order ----------------------------------------------------------------------------------


async def test_under_a_429_storm_a_commands_reply_comes_before_what_the_command_caused(kit, chat):
    """Issue 25, defect 7: under a 429 storm an agent's final answer reached the chat before
    the "Spawned …" reply to the /spawn that started it (both queued behind 429s, the answer
    more urgent). The reply's place is taken before the command runs, so it goes first."""
    app, desk = kit
    clock = desk.clock
    assert isinstance(clock, FakeClock)
    chat.flood(times=8, retry_after_s=5)  # every call meets 429s until the clock moves on
    await desk.on_message(Incoming(dm(ALICE), ALICE, "/agents"))  # held by the storm
    await desk.on_message(Incoming(dm(ALICE), ALICE, "/spawn w hello"))
    # The agent's turn ends meanwhile; its final answer is queued (to alice, bob and vic)
    # while the storm still holds alice's chat behind the /agents reply.
    await wait_for(lambda: desk.outbox.depth() >= 5, 30, "the final answer queued")
    while not desk.outbox.idle():
        await clock.advance(5)
        await asyncio.sleep(0.01)
    texts = chat.texts(dm(ALICE))
    spawned = next(i for i, t in enumerate(texts) if t.startswith("Spawned w"))
    finished = next(i for i, t in enumerate(texts) if "w finished" in t)
    assert spawned < finished, texts
    assert "No agents running" in texts[0]


async def test_routine_notices_arrive_silently_and_what_needs_you_rings(kit, chat):
    """Issue 27: a push that needs an answer, and news of trouble, notify the phone; an agent
    finishing (and other routine news) is sent without a notification."""
    app, desk = kit
    row = await ask(app)
    esc = app.pool.escalations
    await esc.notify(None, "w finished", "all done")
    await esc.notify(None, "w ended with an error", "boom")
    await esc.notify(None, "🛑 Kill switch triggered", "by alice")
    await esc.notify(None, "w starts a fresh session", "asked by alice")
    await copies_of(app, row.id, 2)

    def shown(needle):
        return [m for m in chat.sent(dm(ALICE)) if needle in m.text]

    await wait_for(lambda: shown("fresh session"), 10, "the last notice")
    await desk.flush(5)
    assert [m.silent for m in shown("wants to use Bash")] == [False]
    assert [m.silent for m in shown("w finished")] == [True]
    assert [m.silent for m in shown("fresh session")] == [True]
    assert [m.silent for m in shown("ended with an error")] == [False]
    assert [m.silent for m in shown("Kill switch triggered")] == [False]
