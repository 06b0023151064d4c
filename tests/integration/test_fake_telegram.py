"""Prove the fake Telegram Bot API (tests/fakes/fake_telegram.py) against the REAL
python-telegram-bot v22: an Application pointed at the fake with ``base_url``, embedded the
way the bot embeds it (initialize / updater.start_polling / start, never run_polling).

Also covers the fake's own contract with raw HTTP (encodings, long polling, 409, faults)
and its entity parsers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from telegram import (
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    KeyboardButton,
    ReplyKeyboardMarkup,
    Update,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TimedOut
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    BaseHandler,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
)
from telegram.request import HTTPXRequest

from tests.fakes.fake_telegram import (
    NOT_MODIFIED,
    ApiError,
    FakeTelegram,
    parse_html,
    parse_markdown,
    parse_markdown_v2,
)

CHAT = 4242
OTHER_CHAT = 5151

pytestmark = pytest.mark.timeout(60)


# ---------------------------------------------------------------------------------------
# fixtures and helpers
# ---------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opt in to PTB's timedelta time periods.

    PTB 22.x warns (PTBDeprecationWarning) whenever an int time period is read, and
    ``RetryAfter.__init__`` reads its own ``retry_after``: without the opt-in, every 429
    turns into a warning, which pytest's ``filterwarnings=error`` makes an exception inside
    PTB's request path (so AIORateLimiter could never retry).
    """
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as f:
        f.add_chat(CHAT, first_name="Ada", username="ada")
        yield f
    assert f.internal_errors == []


def build_app(fake: FakeTelegram, *, token: str | None = None,
              rate_limiter: AIORateLimiter | None = None) -> Application:
    builder = (
        ApplicationBuilder()
        .token(token or fake.token)
        .base_url(f"{fake.url}/bot")
        .base_file_url(f"{fake.url}/file/bot")
    )
    if rate_limiter is not None:
        builder = builder.rate_limiter(rate_limiter)
    return builder.build()


@contextlib.asynccontextmanager
async def running(fake: FakeTelegram, handlers: Sequence[BaseHandler[Any, Any, Any]] = (), *,
                  rate_limiter: AIORateLimiter | None = None) -> AsyncIterator[Application]:
    """An Application embedded the way the bot embeds it (no run_polling)."""
    app = build_app(fake, rate_limiter=rate_limiter)
    for handler in handlers:
        app.add_handler(handler)
    await app.initialize()
    await app.updater.start_polling(poll_interval=0, timeout=1)
    await app.start()
    try:
        yield app
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()


def api(fake: FakeTelegram, method: str, params: dict[str, Any] | None = None, *,
        encoding: str = "json", token: str | None = None,
        timeout: float = 10) -> tuple[int, dict[str, Any]]:
    """A raw Bot API call with urllib: (HTTP status, decoded body)."""
    url = f"{fake.url}/bot{token or fake.token}/{method}"
    params = params or {}
    if encoding == "json":
        data: bytes | None = json.dumps(params).encode()
        headers = {"Content-Type": "application/json"}
    elif encoding == "form":
        data = urllib.parse.urlencode(
            {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
        ).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
    elif encoding == "query":
        url += "?" + urllib.parse.urlencode(
            {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()})
        data, headers = None, {}
    else:
        raise ValueError(encoding)
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def multipart_api(fake: FakeTelegram, method: str, fields: dict[str, str],
                  files: dict[str, tuple[str, bytes, str]]) -> tuple[int, dict[str, Any]]:
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     .encode() + value.encode() + b"\r\n")
    for name, (filename, content, ctype) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                     f'filename="{filename}"\r\nContent-Type: {ctype}\r\n\r\n'.encode()
                     + content + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        f"{fake.url}/bot{fake.token}/{method}", data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def descriptions(fake: FakeTelegram) -> list[str]:
    return [e["description"] for e in fake.errors]


# ---------------------------------------------------------------------------------------
# the real PTB against the fake
# ---------------------------------------------------------------------------------------


async def test_start_command_round_trip(fake: FakeTelegram) -> None:
    seen: list[Update] = []

    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        seen.append(update)
        assert update.effective_message is not None
        await update.effective_message.reply_text(
            f"Hello, <b>{update.effective_user.first_name}</b> &amp; welcome!",  # type: ignore[union-attr]
            parse_mode=ParseMode.HTML,
            do_quote=True,
        )

    async with running(fake, [CommandHandler("start", start)]) as app:
        assert app.bot.username == "switchboard_test_bot"
        update = fake.user_sends(CHAT, "/start")
        assert update["message"]["entities"] == [{"type": "bot_command", "offset": 0, "length": 6}]
        reply = await fake.wait_for(lambda: fake.last_sent(CHAT), what="the /start reply")

    assert reply["text"] == "Hello, Ada & welcome!"  # entities parsed out, as the real API does
    assert reply["entities"] == [{"type": "bold", "offset": 7, "length": 3}]
    assert reply["from"]["is_bot"] is True and reply["chat"]["id"] == CHAT
    assert reply["message_id"] == update["message"]["message_id"] + 1  # per-chat ids, shared
    assert reply["reply_to_message"]["message_id"] == update["message"]["message_id"]
    assert reply["_raw_text"].startswith("Hello, <b>Ada</b>")
    assert seen[0].message is not None and seen[0].message.text == "/start"
    methods = [c["method"] for c in fake.calls()]
    assert methods[:2] == ["getMe", "deleteWebhook"]
    assert "getUpdates" in methods and "sendMessage" in methods
    assert fake.pending_updates() == 0  # confirmed by the next getUpdates offset
    assert fake.errors == []


async def test_inline_keyboard_tap_fires_handler_and_answer_is_recorded(
        fake: FakeTelegram) -> None:
    async def menu(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        keyboard = InlineKeyboardMarkup([
            [InlineKeyboardButton("Approve", callback_data="approve:7"),
             InlineKeyboardButton("Deny", callback_data="deny:7")],
            [InlineKeyboardButton("Docs", url="https://example.com/docs")],
        ])
        await update.effective_chat.send_message("Run `rm`?", reply_markup=keyboard)  # type: ignore[union-attr]

    async def pressed(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None and query.message is not None
        await query.answer(f"got {query.data}")
        await query.edit_message_text(f"Decision: {query.data}")

    handlers = [CommandHandler("menu", menu), CallbackQueryHandler(pressed)]
    async with running(fake, handlers):
        fake.user_sends(CHAT, "/menu")
        prompt = await fake.wait_for(lambda: fake.last_sent(CHAT))
        assert prompt["reply_markup"]["inline_keyboard"][0][1]["callback_data"] == "deny:7"
        with pytest.raises(ValueError, match="no button"):
            fake.user_taps(CHAT, prompt["message_id"], "nope")
        query_id = fake.user_taps(CHAT, prompt["message_id"], "approve:7")
        await fake.wait_for(lambda: fake.sent(CHAT)[-1]["_edits"] == 1, what="the edit")

    assert fake.callback_answers == [{
        "callback_query_id": query_id, "text": "got approve:7", "show_alert": False,
        "url": None, "cache_time": None, "data": "approve:7", "chat_id": CHAT,
        "message_id": prompt["message_id"],
    }]
    edited = fake.sent(CHAT)[-1]
    assert edited["text"] == "Decision: approve:7"
    assert "reply_markup" not in edited  # editMessageText without markup drops the keyboard
    assert "edit_date" in edited
    # answering the same query twice is an error, as on the real server
    status, body = api(fake, "answerCallbackQuery", {"callback_query_id": query_id})
    assert status == 400 and "query is too old" in body["description"]


async def test_edit_message_and_not_modified(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        bot = app.bot
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Stop", callback_data="stop")]])
        sent = await bot.send_message(CHAT, "working…", reply_markup=keyboard)
        edited = await bot.edit_message_text("done", chat_id=CHAT, message_id=sent.message_id,
                                             reply_markup=keyboard)
        assert edited.text == "done" and edited.edit_date is not None
        assert edited.reply_markup == keyboard

        with pytest.raises(BadRequest, match="(?i)message is not modified"):
            await bot.edit_message_text("done", chat_id=CHAT, message_id=sent.message_id,
                                        reply_markup=keyboard)
        # Same rendered text through HTML is still "not modified".
        with pytest.raises(BadRequest, match="(?i)message is not modified"):
            await bot.edit_message_text("<b></b>done", chat_id=CHAT,
                                        message_id=sent.message_id, reply_markup=keyboard,
                                        parse_mode=ParseMode.HTML)
        unmarked = await bot.edit_message_reply_markup(CHAT, sent.message_id, reply_markup=None)
        assert unmarked.reply_markup is None
        with pytest.raises(BadRequest, match="(?i)message to edit not found"):
            await bot.edit_message_text("x", chat_id=CHAT, message_id=999)
        assert await bot.delete_message(CHAT, sent.message_id) is True
        with pytest.raises(BadRequest, match="(?i)message to delete not found"):
            await bot.delete_message(CHAT, sent.message_id)
        with pytest.raises(BadRequest, match="(?i)message to edit not found"):
            await bot.edit_message_text("x", chat_id=CHAT, message_id=sent.message_id)

    record = fake.sent(CHAT)[0]
    assert record["text"] == "done" and record["_edits"] == 2 and record["_deleted"] is True
    assert fake.sent(CHAT, include_deleted=False) == []
    assert descriptions(fake) == [
        f"Bad Request: {NOT_MODIFIED}", f"Bad Request: {NOT_MODIFIED}",
        "Bad Request: message to edit not found", "Bad Request: message to delete not found",
        "Bad Request: message to edit not found",
    ]


async def test_text_limits_count_after_entity_parsing(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        bot = app.bot
        with pytest.raises(BadRequest, match="(?i)^message is too long$"):
            await bot.send_message(CHAT, "x" * 4097)
        ok = await bot.send_message(CHAT, "y" * 4096)
        assert len(ok.text or "") == 4096
        # 4096 characters of text inside markup: fine after parsing ...
        html = await bot.send_message(CHAT, "<b>" + "&lt;" * 4096 + "</b>",
                                      parse_mode=ParseMode.HTML)
        assert html.text == "<" * 4096
        # ... and 4097 is too long however it is written.
        with pytest.raises(BadRequest, match="(?i)message is too long"):
            await bot.send_message(CHAT, "*" + "z" * 4097 + "*", parse_mode=ParseMode.MARKDOWN_V2)
        with pytest.raises(BadRequest, match="(?i)message text is empty"):
            await bot.send_message(CHAT, "")
        with pytest.raises(BadRequest, match="(?i)text must be non-empty"):
            await bot.send_message(CHAT, "  \n ")
        with pytest.raises(BadRequest, match="(?i)chat not found"):
            await bot.send_message(OTHER_CHAT, "hello?")
        with pytest.raises(BadRequest, match="(?i)message caption is too long"):
            await bot.send_document(CHAT, b"data", filename="a.txt", caption="c" * 1025)
        emoji = await bot.send_message(CHAT, "😀" * 4096)  # code points, not UTF-16 units
        assert emoji.text == "😀" * 4096
    assert len(fake.errors) == 6 and all(e["status"] == 400 for e in fake.errors)


async def test_callback_data_over_64_bytes_is_button_data_invalid(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        ok = InlineKeyboardMarkup([[InlineKeyboardButton("ok", callback_data="a" * 64)]])
        await app.bot.send_message(CHAT, "fits", reply_markup=ok)
        for data in ("a" * 65, "é" * 33):  # 65 bytes; 33 characters but 66 bytes
            markup = InlineKeyboardMarkup([[InlineKeyboardButton("big", callback_data=data)]])
            with pytest.raises(BadRequest, match="^Button_data_invalid$"):
                await app.bot.send_message(CHAT, "too big", reply_markup=markup)
    assert descriptions(fake) == ["Bad Request: BUTTON_DATA_INVALID"] * 2
    assert fake.texts(CHAT) == ["fits"]


async def test_429_is_retried_by_aioratelimiter_and_the_message_arrives(
        fake: FakeTelegram) -> None:
    fake.flood(CHAT, times=1, retry_after=1)
    async with running(fake, rate_limiter=AIORateLimiter(max_retries=3)) as app:
        started = time.monotonic()
        msg = await app.bot.send_message(CHAT, "after the flood")
        elapsed = time.monotonic() - started
    assert msg.text == "after the flood"
    assert elapsed >= 1.0  # AIORateLimiter paused retry_after + 0.1 s
    sends = fake.calls("sendMessage")
    assert [c["status"] for c in sends] == [429, 200]
    assert sends[0]["description"] == "Too Many Requests: retry after 1"
    assert fake.texts(CHAT) == ["after the flood"]
    assert [(e["status"], e["injected"]) for e in fake.errors] == [(429, True)]


async def test_429_without_retries_raises_retry_after_and_bucket_limits(
        fake: FakeTelegram) -> None:
    fake.rate_limit(CHAT, per_second=2, burst=1)
    async with running(fake) as app:
        await app.bot.send_message(CHAT, "one")
        with pytest.raises(RetryAfter) as info:
            await app.bot.send_message(CHAT, "two")
        assert info.value.retry_after.total_seconds() == 1  # type: ignore[union-attr]
        await asyncio.sleep(0.55)
        await app.bot.send_message(CHAT, "three")
        # other chats and non-send methods are not limited by a chat's bucket
        await app.bot.send_chat_action(CHAT, "typing")
    assert fake.texts(CHAT) == ["one", "three"]
    assert fake.errors[0]["description"] == "Too Many Requests: retry after 1"


async def test_parse_errors_html_and_markdown_v2(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        bot = app.bot
        with pytest.raises(BadRequest, match='(?i)can\'t parse entities: can\'t find end tag '
                                             'corresponding to start tag "b"'):
            await bot.send_message(CHAT, "<b>unclosed", parse_mode=ParseMode.HTML)
        with pytest.raises(BadRequest, match='(?i)unsupported start tag "blink" at byte offset 4'):
            await bot.send_message(CHAT, "ok: <blink>x</blink>", parse_mode=ParseMode.HTML)
        with pytest.raises(BadRequest, match='(?i)unsupported start tag "" at byte offset 2'):
            await bot.send_message(CHAT, "1 < 2", parse_mode=ParseMode.HTML)
        with pytest.raises(BadRequest, match=r"(?i)character '\.' is reserved"):
            await bot.send_message(CHAT, "Done.", parse_mode=ParseMode.MARKDOWN_V2)
        good = await bot.send_message(CHAT, r"*Done*\. 1 \< 2", parse_mode=ParseMode.MARKDOWN_V2)
        assert good.text == "Done. 1 < 2"
        assert [e.type for e in good.entities] == ["bold"]
    assert descriptions(fake) == [
        'Bad Request: can\'t parse entities: Can\'t find end tag corresponding to start tag "b"',
        'Bad Request: can\'t parse entities: Unsupported start tag "blink" at byte offset 4',
        'Bad Request: can\'t parse entities: Unsupported start tag "" at byte offset 2',
        "Bad Request: can't parse entities: Character '.' is reserved and must be escaped "
        "with the preceding '\\'",
    ]


async def test_send_document_is_recorded_and_downloadable(fake: FakeTelegram) -> None:
    content = b"line 1\nline 2\n\x00\xff binary tail"
    async with running(fake) as app:
        msg = await app.bot.send_document(CHAT, content, filename="transcript.txt",
                                          caption="<i>full</i> transcript",
                                          parse_mode=ParseMode.HTML)
        assert msg.document is not None and msg.document.file_name == "transcript.txt"
        assert msg.caption == "full transcript"
        tg_file = await app.bot.get_file(msg.document.file_id)
        downloaded = await tg_file.download_as_bytearray()
        recaption = await app.bot.edit_message_caption(CHAT, msg.message_id, caption="v2")
        assert recaption.caption == "v2" and recaption.document is not None
        with pytest.raises(BadRequest, match="(?i)there is no text in the message to edit"):
            await app.bot.edit_message_text("nope", chat_id=CHAT, message_id=msg.message_id)
    assert bytes(downloaded) == content
    (doc,) = fake.documents
    assert doc["filename"] == "transcript.txt" and doc["bytes"] == content
    assert doc["caption"] == "full transcript" and doc["mime_type"] == "text/plain"
    (call,) = fake.calls("sendDocument")
    assert call["encoding"] == "multipart"
    assert call["files"]["document"]["filename"] == "transcript.txt"
    assert call["params"]["chat_id"] == CHAT  # decoded from the multipart string field
    assert fake.documents[0]["caption"] == "full transcript"  # the record keeps the original
    assert fake.sent(CHAT)[0]["caption"] == "v2"
    assert descriptions(fake) == ["Bad Request: there is no text in the message to edit"]


async def test_set_get_delete_my_commands(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        commands = [BotCommand("start", "Start"), BotCommand("agents", "List the agents")]
        assert await app.bot.set_my_commands(commands) is True
        assert list(await app.bot.get_my_commands()) == commands
        with pytest.raises(BadRequest, match="(?i)bot_command_invalid"):
            await app.bot.set_my_commands([BotCommand("Bad-Name", "x")])
        assert fake.commands == [{"command": "start", "description": "Start"},
                                 {"command": "agents", "description": "List the agents"}]
        await app.bot.delete_my_commands()
        assert fake.commands == []


async def test_wrong_token_raises_invalid_token(fake: FakeTelegram) -> None:
    requests = [HTTPXRequest(), HTTPXRequest()]
    app = (ApplicationBuilder().token("987654321:WrongSecret").base_url(f"{fake.url}/bot")
           .request(requests[0]).get_updates_request(requests[1]).build())
    try:
        with pytest.raises(InvalidToken):
            await app.initialize()
    finally:
        for request in requests:
            await request.shutdown()
    assert fake.errors[0]["status"] == 401 and fake.errors[0]["method"] == "getMe"


async def test_reply_keyboard_chat_action_and_get_chat(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        keyboard = ReplyKeyboardMarkup([["yes", "no"], [KeyboardButton("maybe")]],
                                       resize_keyboard=True, one_time_keyboard=True)
        msg = await app.bot.send_message(CHAT, "Continue?", reply_markup=keyboard)
        assert msg.reply_markup is None  # Message objects carry inline keyboards only
        with pytest.raises(BadRequest, match="(?i)button_text_invalid"):
            await app.bot.send_message(CHAT, "x", reply_markup=ReplyKeyboardMarkup([[""]]))
        assert await app.bot.send_chat_action(CHAT, "typing") is True
        chat = await app.bot.get_chat(CHAT)
        assert chat.first_name == "Ada" and chat.type == "private" and chat.username == "ada"
    record = fake.last_sent(CHAT)
    assert record is not None
    assert record["_reply_keyboard"]["keyboard"] == [
        [{"text": "yes"}, {"text": "no"}], [{"text": "maybe"}]]


async def test_outages_502_and_hanging_requests(fake: FakeTelegram) -> None:
    async with running(fake) as app:
        fake.fail_next(status=502, method="sendMessage")
        with pytest.raises(NetworkError, match="Bad Gateway"):
            await app.bot.send_message(CHAT, "lost")
        fake.fail_next(status=500)
        with pytest.raises(NetworkError, match="Internal Server Error"):
            await app.bot.send_message(CHAT, "lost too")
        fake.hang_next(method="sendMessage")
        with pytest.raises(TimedOut):
            await app.bot.send_message(CHAT, "into the void", read_timeout=0.3)
        # PTB gave up and closed the connection: the fake notices and lets go of it
        await fake.wait_for(lambda: fake.hung_requests == 0, what="hung request dropped")
        back = await app.bot.send_message(CHAT, "back again")
        assert back.text == "back again"
        fake.outage(503)
        with pytest.raises(NetworkError, match="Service Unavailable"):
            await app.bot.send_message(CHAT, "down")
        fake.outage("hang")
        with pytest.raises(TimedOut):
            await app.bot.send_chat_action(CHAT, "typing", read_timeout=0.3)
        fake.outage(None)
        # polling survives an outage of getUpdates too
        fake.fail_next(times=1, status=502, method="getUpdates")
        fake.user_sends(CHAT, "hello after outage")
        await fake.wait_for(lambda: fake.pending_updates() == 0, timeout=10,
                            what="the update to be fetched after the outage")
    assert fake.texts(CHAT) == ["back again"]
    assert fake.errors == []  # 5xx are not 4xx


# ---------------------------------------------------------------------------------------
# the fake's HTTP contract (raw requests)
# ---------------------------------------------------------------------------------------


def test_encodings_json_form_query_and_multipart(fake: FakeTelegram) -> None:
    markup = {"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]}
    status, body = api(fake, "sendMessage", {"chat_id": CHAT, "text": "123",
                                             "reply_markup": markup})
    assert status == 200 and body["ok"] is True
    assert body["result"]["text"] == "123" and body["result"]["reply_markup"] == markup
    status, body = api(fake, "sendMessage", {"chat_id": str(CHAT), "text": "456",
                                             "reply_markup": markup}, encoding="form")
    assert status == 200 and body["result"]["text"] == "456"  # text is never coerced
    status, body = api(fake, "SENDMESSAGE", {"chat_id": CHAT, "text": "q"}, encoding="query")
    assert status == 200  # method names are case-insensitive
    # httpx writes '"' in a filename as %22 and non-ASCII as raw UTF-8
    status, body = multipart_api(fake, "sendDocument", {"chat_id": str(CHAT), "caption": "c"},
                                 {"document": ("we%22ird-é.bin", b"\x00\x01", "application/x-raw")})
    assert status == 200 and body["result"]["document"]["file_name"] == 'we"ird-é.bin'
    assert body["result"]["caption"] == "c"
    assert [c["encoding"] for c in fake.calls()] == ["json", "form", "query", "multipart"]
    status, body = api(fake, "sendMessage", {"chat_id": CHAT, "text": "x",
                                             "reply_markup": "{not json"}, encoding="form")
    assert (status, body["description"]) == (
        400, "Bad Request: can't parse reply keyboard markup JSON object")


def test_unknown_method_and_tokens(fake: FakeTelegram) -> None:
    assert api(fake, "sendTelepathy", {}) == (
        404, {"ok": False, "error_code": 404, "description": "Not Found"})
    assert api(fake, "getMe", token="1:wrong") == (
        401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    assert api(fake, "getMe", token="not-a-token")[0] == 404
    status, body = api(fake, "getMe")
    assert status == 200 and body["result"]["is_bot"] is True
    assert body["result"]["id"] == int(fake.token.split(":")[0])


@pytest.mark.parametrize(("markup", "description"), [
    ({"inline_keyboard": [[{"text": "x"}]]},
     "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"),
    ({"inline_keyboard": [[{"callback_data": "x"}]]},
     "can't parse inline keyboard button: Can't find field \"text\""),
    ({"inline_keyboard": [[{"text": "x", "callback_data": ""}]]}, "BUTTON_DATA_INVALID"),
    ({"inline_keyboard": [[{"text": "x", "url": "not-a-url"}]]},
     "inline keyboard button URL 'not-a-url' is invalid: Wrong HTTP URL"),
    ({"inline_keyboard": [[{"text": "x", "url": "ftp://example.com"}]]},
     "inline keyboard button URL 'ftp://example.com' is invalid: Unsupported URL protocol"),
    ({"inline_keyboard": "bad"}, 'field "inline_keyboard" must be of type Array'),
    ({"inline_keyboard": [{"text": "x"}]},
     'field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays'),
    ({"keyboard": [[{"text": "A"}]], "resize_keyboard": "yes"},
     'field "resize_keyboard" must be of type Boolean'),
    ({"keyboard": [[42]]}, "can't parse keyboard button: KeyboardButton must be a String or "
                           "an Object"),
    ({"keyboard": [[{"request_contact": True}]]},
     "can't parse keyboard button: Can't find field \"text\""),
    ({"bogus": 1}, "can't parse reply keyboard markup JSON object"),
])
def test_keyboard_validation(fake: FakeTelegram, markup: dict[str, Any],
                             description: str) -> None:
    status, body = api(fake, "sendMessage", {"chat_id": CHAT, "text": "t",
                                             "reply_markup": markup})
    assert (status, body["description"]) == (400, f"Bad Request: {description}")
    assert fake.sent() == []


def test_get_updates_long_poll_offset_and_allowed_updates(fake: FakeTelegram) -> None:
    # Blocks until an update is queued (well before the timeout) ...
    timer = threading.Timer(0.3, lambda: fake.user_sends(CHAT, "ping"))
    timer.start()
    started = time.monotonic()
    status, body = api(fake, "getUpdates", {"timeout": 5})
    assert status == 200 and 0.2 < time.monotonic() - started < 3
    (update,) = body["result"]
    assert update["message"]["text"] == "ping"
    # ... is not confirmed until an offset past it is sent ...
    assert api(fake, "getUpdates", {"timeout": 0})[1]["result"] == [update]
    started = time.monotonic()
    assert api(fake, "getUpdates", {"offset": update["update_id"] + 1, "timeout": 0.4},
               encoding="form")[1]["result"] == []
    assert time.monotonic() - started >= 0.35  # an empty long poll waits out its timeout
    assert fake.pending_updates() == 0
    # ... and allowed_updates filters (and drops) other kinds.
    sent = api(fake, "sendMessage", {"chat_id": CHAT, "text": "pick",
                                     "reply_markup": {"inline_keyboard": [[
                                         {"text": "a", "callback_data": "a"}]]}})[1]["result"]
    fake.user_sends(CHAT, "a message")
    fake.user_taps(CHAT, sent["message_id"], "a")
    result = api(fake, "getUpdates", {"allowed_updates": ["callback_query"]})[1]["result"]
    assert [list(u)[1] for u in result] == ["callback_query"]
    assert result[0]["callback_query"]["message"]["text"] == "pick"


def test_second_poller_gets_409_conflict(fake: FakeTelegram) -> None:
    first: list[tuple[int, dict[str, Any]]] = []
    thread = threading.Thread(target=lambda: first.append(api(fake, "getUpdates",
                                                              {"timeout": 5})))
    thread.start()
    fake.wait_for_sync(lambda: [c for c in fake.calls("getUpdates") if c["status"] is None],
                       what="the first long poll to be waiting")
    started = time.monotonic()
    assert api(fake, "getUpdates", {"timeout": 0}) == (200, {"ok": True, "result": []})
    thread.join(5)
    assert time.monotonic() - started < 2  # the first poll was cut short, not timed out
    assert first == [(409, {"ok": False, "error_code": 409, "description":
                            "Conflict: terminated by other getUpdates request; make sure "
                            "that only one bot instance is running"})]
    assert [e["status"] for e in fake.errors] == [409]


def test_stop_is_fast_with_a_blocked_long_poll() -> None:
    fake = FakeTelegram().start()
    results: list[Any] = []

    def poll() -> None:
        try:
            results.append(api(fake, "getUpdates", {"timeout": 30}, timeout=35))
        except Exception as e:  # noqa: BLE001 - the connection is dropped on stop
            results.append(e)

    thread = threading.Thread(target=poll)
    thread.start()
    fake.wait_for_sync(lambda: fake.calls("getUpdates"))
    time.sleep(0.1)
    started = time.monotonic()
    fake.stop()
    thread.join(5)
    assert time.monotonic() - started < 2
    assert not thread.is_alive() and results


def test_on_request_hook_overrides_answers(fake: FakeTelegram) -> None:
    def hook(method: str, params: dict[str, Any]) -> Any:
        if method == "getChat":
            return ApiError(403, "Forbidden: bot was blocked by the user")
        if method == "sendChatAction":
            return False
        return None

    fake.on_request = hook
    assert api(fake, "getChat", {"chat_id": CHAT}) == (403, {
        "ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"})
    assert api(fake, "sendChatAction", {"chat_id": CHAT, "action": "typing"}) == (
        200, {"ok": True, "result": False})
    assert api(fake, "sendMessage", {"chat_id": CHAT, "text": "normal"})[0] == 200


def test_user_sends_requires_a_registered_chat(fake: FakeTelegram) -> None:
    with pytest.raises(ValueError, match="add_chat"):
        fake.user_sends(OTHER_CHAT, "hi")
    with pytest.raises(ValueError):
        fake.add_chat(OTHER_CHAT, user_id=OTHER_CHAT + 1)


# ---------------------------------------------------------------------------------------
# entity parsers
# ---------------------------------------------------------------------------------------


def test_html_parser() -> None:
    assert parse_html('<a href="https://x.org/?a=1&amp;b=2">l</a> &lt;ok&gt; &#128512;') == (
        "l <ok> 😀", [{"type": "text_link", "offset": 0, "length": 1,
                      "url": "https://x.org/?a=1&b=2"}])
    assert parse_html('<pre><code class="language-py">x</code></pre>')[1] == [
        {"type": "pre", "offset": 0, "length": 1, "language": "py"}]
    assert parse_html("😀<b>x</b>")[1] == [{"type": "bold", "offset": 2, "length": 1}]
    assert parse_html("&nbsp; &unknown;")[0] == "&nbsp; &unknown;"
    for bad, message in [
        ("<b><i>t</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("</b>", "Unexpected end tag at byte offset 0"),
        ("x <b", "Unclosed start tag at byte offset 2"),
        ("<span>s</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("é<u>", 'Can\'t find end tag corresponding to start tag "u"'),
    ]:
        with pytest.raises(ApiError) as info:
            parse_html(bad)
        assert info.value.description == f"Bad Request: can't parse entities: {message}"


def test_markdown_v2_parser() -> None:
    assert parse_markdown_v2(r"*b* _i_ __u__ ~s~ ||p|| `c.()` [l](https://x.org/\))") == (
        "b i u s p c.() l",
        [{"type": "bold", "offset": 0, "length": 1},
         {"type": "italic", "offset": 2, "length": 1},
         {"type": "underline", "offset": 4, "length": 1},
         {"type": "strikethrough", "offset": 6, "length": 1},
         {"type": "spoiler", "offset": 8, "length": 1},
         {"type": "code", "offset": 10, "length": 4},
         {"type": "text_link", "offset": 15, "length": 1, "url": "https://x.org/)"}])
    assert parse_markdown_v2("```python\nx = 1\n```")[1] == [
        {"type": "pre", "offset": 0, "length": 6, "language": "python"}]
    assert parse_markdown_v2(">quoted\n>more\nplain") == (
        "quoted\nmore\nplain", [{"type": "blockquote", "offset": 0, "length": 11}])
    for char in "_*[]()~`>#+-=|{}.!":
        text = f"a{char}" if char not in "_*[~`|" else f"a\\{char}{char}"
        with pytest.raises(ApiError):
            parse_markdown_v2(text)
    with pytest.raises(ApiError, match="Can't find end of Bold entity at byte offset 15"):
        parse_markdown_v2(r"*bold _italic\_*")


def test_markdown_v1_parser() -> None:
    assert parse_markdown("*b* _i_ `c` [t](https://x.org) a.b!") == (
        "b i c t a.b!",
        [{"type": "bold", "offset": 0, "length": 1},
         {"type": "italic", "offset": 2, "length": 1},
         {"type": "code", "offset": 4, "length": 1},
         {"type": "text_link", "offset": 6, "length": 1, "url": "https://x.org"}])
    with pytest.raises(ApiError, match="Can't find end of the entity starting at byte offset 2"):
        parse_markdown("a *b")
