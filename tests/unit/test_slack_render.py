"""Slack rendering and parsing without a network: Block Kit under every limit (checked by the
fake Slack's own validator) whatever the agent wrote, mrkdwn escaping and mentions disarmed,
buttons with native confirms, the routes of the kit's chat ids, de-duplication, the reconnect
backoff, modal validation, and the fake's signatures checked by slack-sdk's own verifier."""

from __future__ import annotations

import time

import pytest
from slack_sdk.signature import SignatureVerifier

from bot.slack.base import Route, dm, ephemeral, is_ts
from bot.slack.events import Seen, as_command, clean
from bot.slack.front import reconnect_s
from bot.slack.render import MESSAGE_CHARS, blocks_of, escape, fallback, layout, message
from bot.slack.views import command_of, home_view
from commands.base import Button, Reply, Text
from tests.fakes.fake_slack import sign
from tests.fakes.fake_slack.blocks import check_blocks

NASTY = "<!channel> <!here|here> <@U123> @everyone & *b* _i_ ~s~ `t` ```f``` > q <https://x|y>\n"
CASES = {
    "ampersands": (Text("&" * 20_000),),
    "angles in code": (Text("<" * 5_000 + ">" * 5_000, "code"),),
    "nasty lines": (Text((NASTY * 400)[:20_000]),),
    "a hundred blocks": tuple(Text(f"line {i} {NASTY}", "title") for i in range(100)),
    "one long word": (Text("x" * 30_000, "code", "out.txt"),),
    "empty": (Text(""),),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_message_of_a_layout_keeps_every_block_kit_limit(name):
    reply = Reply(blocks=CASES[name], buttons=((Button("✅ Allow", "/approve ab12"),
                                                Button("❌ Deny", "/deny ab12")),))
    out = layout(reply)
    assert out.messages
    for part in out.messages:
        body = message(part)
        errors, size = check_blocks(body["blocks"])
        assert errors == [] and size <= MESSAGE_CHARS
        assert body["text"] and len(body["text"]) <= 3000  # the fallback is always there
        for b in body["blocks"]:
            shown = str(b)
            assert "<!channel>" not in shown and "<@U123>" not in shown
    assert out.messages[-1].buttons  # the buttons are on the last message
    assert "did not fit" not in str([message(m) for m in out.messages])  # nothing cut


def test_an_edit_that_cannot_fit_is_cut_with_a_note_never_refused():
    body = blocks_of(Reply(blocks=tuple(Text("&" * 3000) for _ in range(40))))
    errors, size = check_blocks(body)
    assert errors == [] and size <= MESSAGE_CHARS and "did not fit" in str(body[-1])


def test_escaping_disarms_mentions_and_links():
    assert escape("a < b > c & d") == "a &lt; b &gt; c &amp; d"
    assert escape("<!channel> <@U1>") == "&lt;!channel&gt; &lt;@U1&gt;"
    assert "@channel" not in escape("hey @channel") and "channel" in escape("hey @channel")
    assert escape("&lt;") == "&amp;lt;"  # typed entities show as typed


def test_code_keeps_backticks_inside_the_block():
    (section, *_rest) = blocks_of(Reply(blocks=(Text("a ``` b", "code"),)))
    text = section["text"]["text"]
    assert text.startswith("```") and text.endswith("```") and text.count("```") == 2


def test_buttons_confirm_natively_and_cards_that_deny_offer_a_reason():
    reply = Reply(blocks=(Text("x"),), buttons=(
        (Button("✅ Allow", "/approve e1"), Button("❌ Deny", "/deny e1")),
        (Button("💀 Kill", "/kill a1", confirm=True),)))
    actions = [b for b in blocks_of(reply) if b["type"] == "actions"]
    elements = [e for a in actions for e in a["elements"]]
    assert [e["text"]["text"] for e in elements] == ["✅ Allow", "❌ Deny", "✍️ Deny with reason",
                                                     "💀 Kill"]
    assert elements[0]["style"] == "primary" and elements[3]["style"] == "danger"
    assert elements[3]["value"] == "/kill a1" and elements[3]["confirm"]["confirm"]["text"]
    assert elements[2]["value"] == "e1"
    assert fallback(reply) == "x"


def test_routes_of_the_kits_chat_ids():
    assert Route.of(ephemeral("C1", "U1", "1.2")) == Route("C1", "U1", "1.2", True)
    assert Route.of(ephemeral("C1", "U1")) == Route("C1", "U1", None, True)
    assert Route.of(dm("U1")) == Route("U1", "U1")
    assert Route.of("C1") == Route("C1")  # type: ignore[arg-type]
    assert is_ts("1700000000.000100") and not is_ts("F0123") and not is_ts(None)


def test_a_delivery_is_seen_once_by_any_of_its_keys_and_memory_is_bounded():
    seen = Seen(size=3)
    assert seen.first("Ev1", "msg:C:1.1")
    assert not seen.first("Ev1", "msg:C:1.1")  # a retry
    assert not seen.first("Ev2", "msg:C:1.1")  # the same message as app_mention
    assert seen.first("Ev3", "msg:C:1.2")
    assert seen.first("Ev4") and seen.first("Ev5")
    assert seen.first("Ev1")  # forgotten: only the newest are kept


def test_reconnects_back_off_from_2_s_to_30_s():
    assert [reconnect_s(n) for n in range(7)] == [2, 4, 8, 16, 30, 30, 30]


def test_text_typed_in_slack():
    assert clean("<@UBOT> status &lt;x&gt; &amp;") == "status <x> &"
    assert as_command("!status x") == "/status x" and as_command("agents") == "/agents"


def _view(callback, **values):
    return {"callback_id": callback, "private_metadata": "e1",
            "state": {"values": {k: {"v": {"value": v}} for k, v in values.items()}}}


def test_modals_validate_and_become_one_command_line():
    assert command_of(_view("sb_spawn", name="9x", prompt=""))[1].keys() == {"name", "prompt"}
    line, errors = command_of(_view("sb_spawn", name="fixer", prompt="fix it", model="sonnet",
                                    cwd='/tmp/a "b"'))
    assert errors == {} and line == '/spawn fixer --model "sonnet" --cwd "/tmp/a \\"b\\"" fix it'
    assert command_of(_view("sb_deny_reason", reason="no")) == ("/deny e1 no", {})
    assert command_of(_view("sb_deny_reason", reason=""))[1] == {
        "reason": "Say why, or use the Deny button."}


def test_app_home_keeps_the_view_limits():
    from types import SimpleNamespace

    recent = [SimpleNamespace(ok=1, user_name="alice", user_id="U1", action="spawn",
                              args=NASTY * 10)] * 8
    view = home_view(rows=(), agents=(), recent=recent, halt=None, role=None)
    assert check_blocks(view["blocks"], view=True)[0] == []
    from commands.base import Role

    view = home_view(rows=(), agents=(), recent=recent, halt=None, role=Role.ADMIN)
    assert check_blocks(view["blocks"], view=True)[0] == [] and "KILL ALL" in str(view)


def test_the_fake_signs_as_slack_does():
    """Checked by slack-sdk's own verifier, so the HTTP tests' requests are Slack's."""
    body, now = "payload=%7B%7D", int(time.time())
    verifier = SignatureVerifier("s3cret")
    assert verifier.is_valid(body, now, sign("s3cret", now, body))
    assert not verifier.is_valid(body, now, sign("other", now, body))
