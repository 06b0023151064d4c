"""The kit's chat outbox against a fake chat: order kept, priorities, superseded edits merged,
retry_after honoured, outages retried, a refusal failing only its own call; nothing lost."""

from __future__ import annotations

import asyncio

import pytest

from bot.kit.outbox import Outbox, Priority
from bot.kit.ports import ChatId, ChatRefused
from commands.base import Attachment, Button, Reply, Text
from tests.fakes.fake_chat import FakeChat, FakeClock

A, B = ChatId("a"), ChatId("b")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture
async def chat():
    return FakeChat()


@pytest.fixture
async def clock():
    return FakeClock(auto=True)


@pytest.fixture
async def outbox(chat, clock):
    box = Outbox(chat, clock)
    yield box
    await box.aclose()


async def test_429s_delay_but_lose_nothing_and_keep_order(chat, clock, outbox):
    chat.flood(times=3, retry_after_s=7)
    futures = [outbox.send(A, Reply.text(f"m{i}")) for i in range(5)]
    await asyncio.gather(*futures)
    assert chat.texts(A) == [f"m{i}" for i in range(5)]
    assert clock.sleeps == [7, 7, 7]  # retry_after, exactly, each time


async def test_an_outage_is_retried_with_backoff_until_it_ends(chat, clock, outbox):
    chat.fail_next(times=6)
    futures = [outbox.send(A, Reply.text(f"m{i}")) for i in range(3)]
    futures.append(outbox.document(A, Attachment("f.txt", b"x")))
    await asyncio.gather(*futures)
    assert chat.texts(A) == ["m0", "m1", "m2"]
    assert clock.sleeps == [1, 2, 4, 8, 16, 30]  # doubling, capped
    assert [m.document.filename for m in chat.sent(A) if m.document] == ["f.txt"]


async def test_a_long_outage_then_a_flood_still_delivers_everything(chat, clock, outbox):
    chat.down = True
    futures = [outbox.send(c, Reply.text(f"{c}{i}")) for i in range(4) for c in (A, B)]

    async def restore():
        while len(clock.sleeps) < 10:
            await asyncio.sleep(0)
        chat.flood(times=2, retry_after_s=3)
        chat.down = False

    await asyncio.gather(restore(), *futures)
    assert chat.texts(A) == ["a0", "a1", "a2", "a3"] and chat.texts(B) == ["b0", "b1", "b2", "b3"]
    assert clock.sleeps.count(3) == 2


async def test_urgent_goes_before_cards_and_replies_order_within_a_priority(chat, outbox):
    chat.gate.clear()  # the platform is slow: everything queues behind the first call
    first = outbox.send(A, Reply.text("first"))
    await settle()  # "first" is on its way, held by the slow platform
    outbox.send(A, Reply.text("card"), priority=Priority.CARD)
    outbox.send(A, Reply.text("reply 1"))
    outbox.send(A, Reply.text("escalation"), priority=Priority.URGENT)
    last = outbox.send(A, Reply.text("reply 2"))
    chat.gate.set()
    await first
    await last
    await outbox.flush(5)
    assert chat.texts(A) == ["first", "escalation", "reply 1", "reply 2", "card"]


async def test_superseded_edits_are_merged_into_one_call_with_the_newest(chat, outbox):
    mid = await outbox.send(A, Reply.text("v0"))
    chat.gate.clear()
    blocker = outbox.send(A, Reply.text("other"))
    edits = [outbox.edit(A, mid, Reply.text(f"v{i}"), priority=Priority.CARD)
             for i in range(1, 6)]
    urgent = outbox.edit(A, mid, Reply.text("v6"), priority=Priority.URGENT)
    chat.gate.set()
    await asyncio.gather(blocker, urgent, *edits)
    assert [c for c in chat.calls if c[0] == "edit"] == [("edit", A)]  # one call for six
    shown = chat.messages[(A, mid)]
    assert shown.text == "v6" and shown.edits == 1


async def test_a_refused_call_fails_alone(chat, outbox):
    for _ in range(4):  # the message, then each of its other forms
        chat.refuse_next()
    bad = outbox.send(A, Reply.text("refused"))
    good = outbox.send(A, Reply.text("fine"))
    with pytest.raises(ChatRefused):
        await bad
    await good
    assert chat.texts(A) == ["fine"]
    assert [c[0] for c in chat.calls] == ["send", "send", "send", "document", "send"]


async def test_a_refused_message_goes_out_in_a_form_the_chat_takes(chat, outbox):
    """Regression (issue 9): a message the platform refused was dropped, its caller told it
    failed; now it is retried plain, then shorter, then as a file."""
    reply = Reply(blocks=(Text("Title", "title"), Text("x" * 3000, "code")),
                  buttons=((Button("Allow", "/approve ab"),),))
    chat.refuse_next("Bad Request: can't parse entities: Unsupported start tag")
    mid = await outbox.send(A, reply)
    shown = chat.messages[(A, mid)]
    assert shown.text == "Title\n\n" + "x" * 3000 and shown.buttons == [[("Allow", "/approve ab")]]
    for _ in range(2):  # markup and length both refused: the start, with its buttons
        chat.refuse_next("Bad Request: message is too long")
    mid = await outbox.send(A, reply)
    shown = chat.messages[(A, mid)]
    assert shown.text.startswith("Title\nxxx") and "follows as a file" in shown.text
    assert shown.buttons == [[("Allow", "/approve ab")]] and len(shown.text) < 1200
    for _ in range(3):
        chat.refuse_next("Bad Request: BUTTON_DATA_INVALID")
    mid = await outbox.send(A, reply)
    assert chat.messages[(A, mid)].document.content.decode() == "Title\n" + "x" * 3000


async def test_a_reply_goes_out_as_the_platform_lays_it_out(chat, outbox):
    chat.limit = 10
    reply = Reply.text("aaaaaaaa", "bbbbbbbb", "cc")
    await asyncio.gather(*outbox.reply(A, reply))
    assert chat.texts(A) == ["aaaaaaaa", "bbbbbbbb", "cc"]


async def test_close_drains_within_its_grace_then_cancels(chat):
    box = Outbox(chat, FakeClock(auto=True))
    chat.gate.clear()
    futures = [box.send(A, Reply.text(f"m{i}")) for i in range(3)]
    await box.aclose(grace_s=0.05)
    assert all(f.cancelled() or f.done() for f in futures)
    with pytest.raises(ChatRefused, match="closed"):
        await box.send(A, Reply.text("late"))


async def test_a_reserved_reply_goes_before_whatever_was_queued_after_its_place(chat, clock):
    """Causal order (issue 25, defect 7): what is queued after a reply's place, however urgent,
    waits for the reply, through 429s; what was queued before it keeps its priority."""
    outbox = Outbox(chat, clock)
    chat.gate.clear()  # the platform is slow: everything queues behind the first call
    first = outbox.send(A, Reply.text("first"))
    await settle()
    outbox.send(A, Reply.text("card before"), priority=Priority.CARD)
    outbox.send(A, Reply.text("urgent before"), priority=Priority.URGENT)
    slot = outbox.reserve(A)  # the command starts
    outbox.send(A, Reply.text("answer"), priority=Priority.URGENT)  # caused by the command
    outbox.send(A, Reply.text("card after"), priority=Priority.CARD)
    chat.flood(times=4, retry_after_s=3)
    chat.gate.set()
    await first
    await outbox.flush(0.2)
    # Held at the place: what was queued before it is out, nothing after it.
    assert chat.texts(A) == ["first", "urgent before", "card before"]
    assert outbox.depth() == 2
    futures = slot.fill(Reply(blocks=(Text("r" * 3995), Text("reply end"))))
    slot.release()  # after a fill: nothing
    await asyncio.gather(*futures)
    assert await outbox.flush(5)
    assert chat.texts(A)[3:] == ["r" * 3995, "reply end", "answer", "card after"]
    await outbox.aclose()


async def test_a_released_place_lets_the_rest_go_and_a_closed_outbox_refuses_a_fill(chat, clock):
    outbox = Outbox(chat, clock)
    slot = outbox.reserve(A)
    later = outbox.send(A, Reply.text("later"))
    await settle()
    assert chat.texts(A) == [] and not outbox.idle()
    slot.release()
    await later
    assert chat.texts(A) == ["later"] and await outbox.flush(1)
    kept = outbox.reserve(B)
    await outbox.aclose()
    (fut,) = kept.fill(Reply.text("too late"))
    with pytest.raises(ChatRefused):
        await fut
