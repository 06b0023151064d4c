"""A fake Telegram Bot API server for end-to-end tests of bots on REAL python-telegram-bot v22.

Standard library only: an ``http.server.ThreadingHTTPServer`` in a daemon thread, so it
works from sync and async tests alike (whatever the event loop) and from subprocesses.

Point PTB at it::

    with FakeTelegram() as fake:
        fake.add_chat(42, first_name="Ada")
        app = (ApplicationBuilder().token(fake.token)
               .base_url(f"{fake.url}/bot").base_file_url(f"{fake.url}/file/bot").build())
        await app.initialize()
        await app.updater.start_polling(poll_interval=0, timeout=1)
        await app.start()
        fake.user_sends(42, "/start")
        msg = await fake.wait_for(lambda: fake.last_sent(42))

What it serves (``/bot<token>/<method>``, GET or POST; JSON, form-encoded and
multipart/form-data bodies, plus query strings; method names are case-insensitive as on
the real server): getMe, logOut, close, getUpdates (long polling), setWebhook,
deleteWebhook, getWebhookInfo, sendMessage, editMessageText, editMessageCaption,
editMessageReplyMarkup, deleteMessage, deleteMessages, answerCallbackQuery, sendDocument,
getFile, setMyCommands, getMyCommands, deleteMyCommands, sendChatAction, getChat; and
``/file/bot<token>/<file_path>`` for downloads. Anything else: 404 ``Not Found`` (which PTB,
like for the real server, turns into ``InvalidToken``).

Behaviour follows the real Bot API (see the shared chat-apis reference): every answer is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N, "description": ...}``;
messages come back as full Message objects whose ``text`` is the text *after* entity
parsing (markup removed, ``entities`` filled in), with per-chat message ids shared by the
user and the bot. The limits and error texts are the real ones (message too long after
entity parsing, empty text, caption too long, ``BUTTON_DATA_INVALID``, ``chat not found``,
``message is not modified``, HTML / MarkdownV2 / Markdown parse errors as tdlib words them,
keyboard validation, 429 flood control with ``parameters.retry_after``, 409 for a second
poller, 401 for a wrong token). See ``FakeTelegram`` for the test-facing API.

How PTB 22.8 (HTTPXRequest) talks to a Bot API server, which the fake accepts:

* never JSON: parameters go form-encoded (``application/x-www-form-urlencoded``), and as
  ``multipart/form-data`` text parts as soon as one file is uploaded; a call without
  parameters (getMe) has no body at all. Every non-string value is JSON-dumped into a
  string (``chat_id=4242``, ``show_alert=true``, ``reply_markup={"inline_keyboard":...}``),
  strings are sent raw, so the server must know each parameter's type: the fake decodes
  ``_JSON_PARAMS``/``_INT_PARAMS``/``_BOOL_PARAMS`` (in ``decoding``) and never touches
  ``text``/``caption``.
* time periods (``timeout``) are sent as whole seconds when they are whole.
* downloads GET ``base_file_url + token + "/" + file_path`` with the path percent-encoded,
  the token's ':' included (``%3A``).
* 401 and 404 both become ``InvalidToken``; 400 ``BadRequest`` (message: "Bad Request: "
  stripped, then ``str.capitalize()``, which lower-cases the rest); 403 ``Forbidden``; 409
  ``Conflict``; 429 ``RetryAfter``; anything else (5xx, HTML bodies) ``NetworkError``.
* ``RetryAfter.__init__`` reads its own int ``retry_after`` and so emits a
  PTBDeprecationWarning unless ``PTB_TIMEDELTA=true`` is set: under
  ``filterwarnings=error`` every 429 then becomes an exception inside PTB (and
  ``AIORateLimiter`` cannot retry). Tests that meet 429s should set the variable.
"""


from __future__ import annotations

from tests.fakes.fake_telegram.api import (
    CALLBACK_ANSWER_TIMEOUT,
    CONFLICT_POLLER,
    CONFLICT_WEBHOOK,
    DEFAULT_TOKEN,
    MAX_CALLBACK_ANSWER_LENGTH,
    MAX_CALLBACK_DATA_BYTES,
    MAX_CAPTION_LENGTH,
    MAX_COMMANDS,
    MAX_COPY_TEXT_LENGTH,
    MAX_MESSAGE_LENGTH,
    MAX_UPLOAD_BYTES,
    NOT_MODIFIED,
    QUERY_TOO_OLD,
    ApiError,
)
from tests.fakes.fake_telegram.decoding import Upload
from tests.fakes.fake_telegram.entities import parse_entities
from tests.fakes.fake_telegram.fake import FakeTelegram
from tests.fakes.fake_telegram.html_parser import parse_html
from tests.fakes.fake_telegram.markdown_parser import parse_markdown
from tests.fakes.fake_telegram.markdown_v2_parser import parse_markdown_v2
from tests.fakes.fake_telegram.text import utf16_len

__all__ = [
    "CALLBACK_ANSWER_TIMEOUT",
    "CONFLICT_POLLER",
    "CONFLICT_WEBHOOK",
    "DEFAULT_TOKEN",
    "MAX_CALLBACK_ANSWER_LENGTH",
    "MAX_CALLBACK_DATA_BYTES",
    "MAX_CAPTION_LENGTH",
    "MAX_COMMANDS",
    "MAX_COPY_TEXT_LENGTH",
    "MAX_MESSAGE_LENGTH",
    "MAX_UPLOAD_BYTES",
    "NOT_MODIFIED",
    "QUERY_TOO_OLD",
    "ApiError",
    "FakeTelegram",
    "Upload",
    "parse_entities",
    "parse_html",
    "parse_markdown",
    "parse_markdown_v2",
    "utf16_len",
]
