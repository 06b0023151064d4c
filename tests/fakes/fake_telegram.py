"""A fake Telegram Bot API server, for end-to-end tests of bots built on the REAL
python-telegram-bot (PTB) v22.

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
  ``_JSON_PARAMS``/``_INT_PARAMS``/``_BOOL_PARAMS`` and never touches ``text``/``caption``.
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

import asyncio
import contextlib
import copy
import itertools
import json
import math
import mimetypes
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "ApiError",
    "FakeTelegram",
    "parse_entities",
    "parse_html",
    "parse_markdown",
    "parse_markdown_v2",
    "utf16_len",
]

DEFAULT_TOKEN = "123456789:AAFakeTelegramTokenForTests_0123456789"
MAX_MESSAGE_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
MAX_CALLBACK_DATA_BYTES = 64
MAX_CALLBACK_ANSWER_LENGTH = 200
MAX_COPY_TEXT_LENGTH = 256
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
CALLBACK_ANSWER_TIMEOUT = 15.0
MAX_COMMANDS = 100

NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "query is too old and response timeout expired or query ID is invalid"
CONFLICT_POLLER = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
    "delete the webhook first"
)

_UPDATE_TYPES_DEFAULT_EXCLUDED = {"chat_member", "message_reaction", "message_reaction_count"}
_CHAT_ACTIONS = {
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
}
# Methods that put (or change) a message in a chat: subject to flood control.
_FLOOD_METHODS = {
    "sendmessage", "senddocument", "sendphoto", "editmessagetext", "editmessagecaption",
    "editmessagereplymarkup", "copymessage", "forwardmessage",
}

# Form-encoded / multipart values are all strings; these parameters are decoded.
_JSON_PARAMS = {
    "reply_markup", "allowed_updates", "commands", "scope", "entities", "caption_entities",
    "link_preview_options", "reply_parameters", "media", "message_ids",
}
_INT_PARAMS = {
    "chat_id", "from_chat_id", "message_id", "offset", "limit", "reply_to_message_id",
    "user_id", "message_thread_id", "cache_time", "max_connections",
}
_FLOAT_PARAMS = {"timeout"}
_BOOL_PARAMS = {
    "show_alert", "disable_notification", "protect_content", "drop_pending_updates",
    "allow_sending_without_reply", "disable_web_page_preview",
    "disable_content_type_detection", "allow_paid_broadcast", "show_caption_above_media",
}
_INT_RE = re.compile(r"-?\d+")


class ApiError(Exception):
    """An error answer of the Bot API (raised inside method handlers)."""

    def __init__(self, status: int, description: str,
                 parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters
        self.injected = False  # caused by fault injection (flood / rate_limit)

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": False, "error_code": self.status, "description": self.description,
        }
        if self.parameters:
            out["parameters"] = self.parameters
        return out


def _bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


def _entities_error(description: str) -> ApiError:
    return _bad(f"can't parse entities: {description}")


class _ClientGone(Exception):
    """The HTTP client went away, or the server is stopping: drop the connection."""


# ---------------------------------------------------------------------------------------
# Text and entities (ports of tdlib's parsers, which the Bot API server uses)
# ---------------------------------------------------------------------------------------


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: the unit of entity offsets and lengths."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _u16(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _byte_offset(text: str, i: int) -> int:
    return len(text[:i].encode("utf-8", "surrogatepass"))


def _sorted_entities(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        (e for e in entities if e["length"] > 0), key=lambda e: (e["offset"], -e["length"])
    )


def _valid_http_url(url: str) -> str | None:
    """None if ``url`` is acceptable as a link, else the reason as tdlib words it."""
    if not url:
        return "URL host is empty"
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if m:
        scheme = m.group(1).lower()
        rest = url[m.end():]
        if scheme == "tg":
            return None if rest else "Wrong HTTP URL"
        if scheme not in ("http", "https", "ton"):
            return "Unsupported URL protocol"
    else:
        rest = url
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    if not host:
        return "URL host is empty"
    if "." not in host and host.lower() != "localhost":
        return "Wrong HTTP URL"
    if not re.fullmatch(r"[\w.-]+", host):
        return "Wrong HTTP URL"
    return None


def _link_entity(offset: int, length: int, url: str) -> dict[str, Any] | None:
    m = re.fullmatch(r"tg://user\?id=(\d+)", url)
    if m:
        return {"type": "text_mention", "offset": offset, "length": length,
                "user": {"id": int(m.group(1)), "is_bot": False, "first_name": ""}}
    if _valid_http_url(url) is not None:
        return None  # tdlib silently drops links with an invalid URL
    return {"type": "text_link", "offset": offset, "length": length, "url": url}


# -- HTML -------------------------------------------------------------------------------

_HTML_TAGS = {
    "a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins", "tg-spoiler",
    "tg-emoji", "span", "pre", "code", "blockquote",
}
_HTML_SIMPLE = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "s": "strikethrough",
    "strike": "strikethrough", "del": "strikethrough", "u": "underline", "ins": "underline",
    "tg-spoiler": "spoiler", "span": "spoiler",
}
_HTML_SPACE = " \t\r\n\x0b\x0c"
_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def _decode_html_entity(text: str, pos: int) -> tuple[str, int] | None:
    """tdlib's decode_html_entity: ``text[pos] == '&'``; the ';' is optional."""
    n = len(text)
    end = pos + 1
    if end < n and text[end] == "#":
        end += 1
        base, digits = 10, "0123456789"
        if end < n and text[end] == "x":
            end += 1
            base, digits = 16, "0123456789abcdefABCDEF"
        start = end
        while end < n and text[end] in digits:
            end += 1
        value = int(text[start:end], base) if end > start else 0
        if value == 0 or value >= 0x10FFFF or end - pos >= 10 or 0xD800 <= value <= 0xDFFF:
            return None
        ch = chr(value)
    else:
        while end < n and text[end].isascii() and text[end].isalpha():
            end += 1
        named = _HTML_NAMED.get(text[pos + 1:end])
        if named is None:
            return None
        ch = named
    if end < n and text[end] == ";":
        end += 1
    return ch, end


class _HtmlParser:
    """A port of tdlib's parse_html (the Bot API's ``parse_mode=HTML``)."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.i = 0
        self.out: list[str] = []
        self.u16 = 0
        self.entities: list[dict[str, Any]] = []
        self.stack: list[dict[str, Any]] = []

    def error(self, message: str) -> ApiError:
        return _entities_error(message)

    def at(self, k: int) -> str:
        return self.text[k] if k < self.n else ""

    def emit(self, ch: str) -> None:
        self.out.append(ch)
        self.u16 += _u16(ch)

    def parse(self) -> tuple[str, list[dict[str, Any]]]:
        text = self.text
        while self.i < self.n:
            c = text[self.i]
            if c == "&":
                decoded = _decode_html_entity(text, self.i)
                if decoded is not None:
                    self.emit(decoded[0])
                    self.i = decoded[1]
                    continue
            if c != "<":
                self.emit(c)
                self.i += 1
            elif self.at(self.i + 1) == "/":
                self.end_tag()
            else:
                self.start_tag()
        if self.stack:
            raise self.error(
                f'Can\'t find end tag corresponding to start tag "{self.stack[-1]["tag"]}"')
        for e in self.entities:
            e.pop("_language", None)
        return "".join(self.out), _sorted_entities(self.entities)

    def skip_space(self) -> None:
        while self.i < self.n and self.text[self.i] in _HTML_SPACE:
            self.i += 1

    def end_tag(self) -> None:
        begin = self.i
        offset = _byte_offset(self.text, begin)
        if not self.stack:
            raise self.error(f"Unexpected end tag at byte offset {offset}")
        self.i += 2
        name_start = self.i
        while self.i < self.n and self.text[self.i] not in _HTML_SPACE + ">":
            self.i += 1
        end_name = self.text[name_start:self.i].lower()
        self.skip_space()
        if self.at(self.i) != ">":
            raise self.error(f"Unclosed end tag at byte offset {offset}")
        self.i += 1
        top = self.stack.pop()
        if end_name and end_name != top["tag"]:
            raise self.error(f'Unmatched end tag at byte offset {offset}, expected '
                             f'"</{top["tag"]}>", found "</{end_name}>"')
        self.close(top)

    def start_tag(self) -> None:
        begin = self.i
        offset = _byte_offset(self.text, begin)
        self.i += 1
        name_start = self.i
        while self.i < self.n and self.text[self.i] not in _HTML_SPACE + ">":
            self.i += 1
        if self.i >= self.n:
            raise self.error(f"Unclosed start tag at byte offset {offset}")
        tag = self.text[name_start:self.i].lower()
        if tag not in _HTML_TAGS:
            raise self.error(f'Unsupported start tag "{tag}" at byte offset {offset}')
        argument = ""
        while self.i < self.n and self.text[self.i] != ">":
            self.skip_space()
            if self.at(self.i) == ">":
                break
            attr, value = self.attribute(tag, offset)
            argument = self.tag_argument(tag, attr, value, argument)
        if self.i >= self.n:
            raise self.error(f'Unclosed start tag "{tag}" at byte offset {offset}')
        if tag == "span" and argument != "spoiler":
            raise self.error(f'Tag "span" must have class "tg-spoiler" at byte offset {offset}')
        self.i += 1  # the '>'
        self.stack.append({"tag": tag, "arg": argument, "offset": self.u16,
                           "pos": len(self.out)})

    def attribute(self, tag: str, offset: int) -> tuple[str, str]:
        text = self.text
        attr_start = self.i
        while self.i < self.n and text[self.i] not in _HTML_SPACE + "=>":
            self.i += 1
        attr = text[attr_start:self.i].lower()
        if not attr:
            raise self.error(f'Empty attribute name in the tag "{tag}" at byte offset {offset}')
        self.skip_space()
        if self.at(self.i) != "=":
            if attr != "expandable":
                raise self.error('Expected equal sign in declaration of an attribute of the tag '
                                 f'"{tag}" at byte offset {offset}')
            return attr, ""
        self.i += 1
        self.skip_space()
        if self.i >= self.n:
            raise self.error(f'Unclosed start tag "{tag}" at byte offset {offset}')
        if text[self.i] not in "'\"":
            token_start = self.i
            while self.i < self.n and (text[self.i].isalnum() or text[self.i] in ".-"):
                self.i += 1
            if self.i < self.n and text[self.i] not in _HTML_SPACE + ">":
                raise self.error("Unexpected end of name token at byte offset "
                                 f"{_byte_offset(text, token_start)}")
            return attr, text[token_start:self.i].lower()
        quote = text[self.i]
        self.i += 1
        chars: list[str] = []
        while self.i < self.n and text[self.i] != quote:
            decoded = _decode_html_entity(text, self.i) if text[self.i] == "&" else None
            if decoded is not None:
                chars.append(decoded[0])
                self.i = decoded[1]
            else:
                chars.append(text[self.i])
                self.i += 1
        if self.i < self.n:
            self.i += 1
        return attr, "".join(chars)

    @staticmethod
    def tag_argument(tag: str, attr: str, value: str, current: str) -> str:
        if tag == "a" and attr == "href":
            return value
        if tag == "code" and attr == "class" and value.startswith("language-"):
            return value[len("language-"):]
        if tag == "span" and attr == "class" and value.startswith("tg-"):
            return value[len("tg-"):]
        if tag == "tg-emoji" and attr == "emoji-id":
            return value
        if tag == "blockquote" and attr == "expandable":
            return "1"
        return current

    def close(self, top: dict[str, Any]) -> None:
        tag, arg, offset = top["tag"], top["arg"], top["offset"]
        length = self.u16 - offset
        if length <= 0:
            return
        entities = self.entities
        if tag in _HTML_SIMPLE:
            entities.append({"type": _HTML_SIMPLE[tag], "offset": offset, "length": length})
        elif tag == "a":
            link = _link_entity(offset, length, arg or "".join(self.out[top["pos"]:]))
            if link is not None:
                entities.append(link)
        elif tag == "code":
            entity = {"type": "code", "offset": offset, "length": length}
            if arg:
                entity["_language"] = arg
            entities.append(entity)
        elif tag == "pre":
            last = entities[-1] if entities else None
            if (last is not None and last["type"] == "code" and last["offset"] == offset
                    and last["length"] == length and last.get("_language")):
                entities[-1] = {"type": "pre", "offset": offset, "length": length,
                                "language": last["_language"]}
            else:
                entities.append({"type": "pre", "offset": offset, "length": length})
        elif tag == "tg-emoji":
            if not re.fullmatch(r"[1-9]\d{0,18}", arg or "") or int(arg) >= 2**63:
                raise self.error("Invalid custom emoji identifier specified")
            entities.append({"type": "custom_emoji", "offset": offset, "length": length,
                             "custom_emoji_id": arg})
        elif tag == "blockquote":
            kind = "expandable_blockquote" if arg else "blockquote"
            entities.append({"type": kind, "offset": offset, "length": length})


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse Bot API HTML into ``(plain_text, entities)``; raise ApiError like the server."""
    return _HtmlParser(text).parse()


# -- MarkdownV2 -------------------------------------------------------------------------

_MDV2_RESERVED = "_*[]()~`>#+-=|{}.!"
_MDV2_TYPE_NAMES = {
    "bold": "Bold", "italic": "Italic", "underline": "Underline",
    "strikethrough": "Strikethrough", "spoiler": "Spoiler", "code": "Code", "pre": "Pre",
    "pre_code": "PreCode", "text_link": "TextUrl", "custom_emoji": "CustomEmoji",
}
_MDV2_CODE = ("code", "pre", "pre_code")
_MDV2_SIMPLE_OPEN = {"*": "bold", "~": "strikethrough", "[": "text_link"}


def _reserved(ch: str) -> ApiError:
    return _entities_error(
        f"Character '{ch}' is reserved and must be escaped with the preceding '\\'"
    )


class _MarkdownV2Parser:
    """A port of tdlib's parse_markdown_v2 (plus '>' / '**>' blockquotes)."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.i = 0
        self.out: list[str] = []
        self.u16 = 0
        self.entities: list[dict[str, Any]] = []
        self.stack: list[dict[str, Any]] = []
        self.quote: dict[str, Any] | None = None

    def at(self, k: int) -> str:
        return self.text[k] if 0 <= k < self.n else ""

    def emit(self, ch: str) -> None:
        self.out.append(ch)
        self.u16 += _u16(ch)

    def in_code(self) -> bool:
        return bool(self.stack) and self.stack[-1]["type"] in _MDV2_CODE

    def parse(self) -> tuple[str, list[dict[str, Any]]]:
        while self.i < self.n:
            if not self.in_code() and self.blockquote_syntax():
                continue
            c = self.text[self.i]
            nxt = self.at(self.i + 1)
            if c == "\\" and nxt and 0 < ord(nxt) <= 126:
                self.out.append(nxt)
                self.u16 += 1
                self.i += 2
            elif c not in ("`" if self.in_code() else _MDV2_RESERVED):
                self.emit(c)
                self.i += 1
            elif self.is_end_of_entity(c):
                self.end_entity()
            else:
                self.begin_entity(c)
        if self.stack:
            entity = self.stack[-1]
            raise _entities_error(f"Can't find end of {_MDV2_TYPE_NAMES[entity['type']]} "
                                  f"entity at byte offset {entity['byte']}")
        self.close_quote()
        return "".join(self.out), _sorted_entities(self.entities)

    def blockquote_syntax(self) -> bool:
        """Consume blockquote markup at ``i``; True if something was consumed."""
        text, i = self.text, self.i
        if i == 0 or text[i - 1] == "\n":
            if text.startswith("**>", i) and self.quote is None:
                self.quote = {"type": "expandable_blockquote", "offset": self.u16}
                self.i += 3
                return True
            if text[i] == ">":
                if self.quote is None:
                    self.quote = {"type": "blockquote", "offset": self.u16}
                self.i += 1
                return True
        if (self.quote is not None and self.quote["type"] == "expandable_blockquote"
                and text.startswith("||", i) and self.at(i + 2) in ("", "\n")):
            self.close_quote()
            self.i += 2
            return True
        if text[i] == "\n" and self.quote is not None:
            if self.at(i + 1) != ">" and not text.startswith("**>", i + 1):
                self.close_quote()
        return False

    def close_quote(self) -> None:
        if self.quote is not None:
            length = self.u16 - self.quote["offset"]
            if length > 0:
                self.entities.append({"type": self.quote["type"],
                                      "offset": self.quote["offset"], "length": length})
            self.quote = None

    def is_end_of_entity(self, c: str) -> bool:
        if not self.stack:
            return False
        top, nxt = self.stack[-1]["type"], self.at(self.i + 1)
        ends = {
            "bold": c == "*",
            "italic": c == "_" and nxt != "_",
            "code": c == "`",
            "pre": c == "`" and nxt == "`" and self.at(self.i + 2) == "`",
            "text_link": c == "]",
            "custom_emoji": c == "]",
            "underline": c == "_" and nxt == "_",
            "strikethrough": c == "~",
            "spoiler": c == "|" and nxt == "|",
        }
        ends["pre_code"] = ends["pre"]
        return ends[top]

    def begin_entity(self, c: str) -> None:
        begin = self.i
        nxt = self.at(self.i + 1)
        argument = ""
        if c in _MDV2_SIMPLE_OPEN:
            kind = _MDV2_SIMPLE_OPEN[c]
        elif c == "_":
            kind = "underline" if nxt == "_" else "italic"
            self.i += 1 if nxt == "_" else 0
        elif c == "|" and nxt == "|":
            kind = "spoiler"
            self.i += 1
        elif c == "!" and nxt == "[":
            kind = "custom_emoji"
            self.i += 1
        elif c == "`" and nxt == "`" and self.at(self.i + 2) == "`":
            kind, argument = self.begin_pre()
        elif c == "`":
            kind = "code"
        else:
            raise _reserved(c)
        self.stack.append({"type": kind, "arg": argument, "offset": self.u16,
                           "byte": _byte_offset(self.text, begin), "pos": len(self.out)})
        self.i += 1

    def begin_pre(self) -> tuple[str, str]:
        text = self.text
        self.i += 3
        kind, argument = "pre", ""
        lang_end = self.i
        while lang_end < self.n and text[lang_end] not in " \t\r\n`":
            lang_end += 1
        if self.i != lang_end and lang_end < self.n and text[lang_end] != "`":
            kind, argument = "pre_code", text[self.i:lang_end]
            self.i = lang_end
        if self.at(self.i) in ("\n", "\r"):  # one new line after the opening is skipped
            double = self.at(self.i + 1) in ("\n", "\r") and self.at(self.i) != self.at(self.i + 1)
            self.i += 2 if double else 1
        self.i -= 1
        return kind, argument

    def end_entity(self) -> None:
        entity = self.stack.pop()
        kind = entity["type"]
        length = self.u16 - entity["offset"]
        if kind in ("underline", "spoiler"):
            self.i += 1
        elif kind in ("pre", "pre_code"):
            self.i += 2
        url = self.link_url(entity) if kind in ("text_link", "custom_emoji") else ""
        self.i += 1
        if length <= 0:
            return
        offset = entity["offset"]
        if kind == "pre_code":
            self.entities.append({"type": "pre", "offset": offset, "length": length,
                                  "language": entity["arg"]})
        elif kind == "text_link":
            link = _link_entity(offset, length, url)
            if link is not None:
                self.entities.append(link)
        elif kind == "custom_emoji":
            m = re.fullmatch(r"tg://emoji\?id=([1-9]\d{0,18})", url)
            if not m:
                raise _entities_error("Custom emoji entity must contain a tg://emoji URL")
            self.entities.append({"type": "custom_emoji", "offset": offset, "length": length,
                                  "custom_emoji_id": m.group(1)})
        else:
            self.entities.append({"type": kind, "offset": offset, "length": length})

    def link_url(self, entity: dict[str, Any]) -> str:
        if self.at(self.i + 1) != "(":
            return "".join(self.out[entity["pos"]:])
        self.i += 2
        url_begin = self.i
        chars: list[str] = []
        while self.i < self.n and self.text[self.i] != ")":
            nxt = self.at(self.i + 1)
            if self.text[self.i] == "\\" and nxt and 0 < ord(nxt) <= 126:
                chars.append(nxt)
                self.i += 2
            else:
                chars.append(self.text[self.i])
                self.i += 1
        if self.i >= self.n:
            raise _entities_error(
                f"Can't find end of a URL at byte offset {_byte_offset(self.text, url_begin)}")
        return "".join(chars)


def parse_markdown_v2(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse MarkdownV2 into ``(plain_text, entities)``; raise ApiError like the server."""
    return _MarkdownV2Parser(text).parse()


# -- Markdown (legacy) ------------------------------------------------------------------


class _MarkdownParser:
    """A port of tdlib's parse_markdown (the legacy ``parse_mode=Markdown``)."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.i = 0
        self.out: list[str] = []
        self.u16 = 0
        self.entities: list[dict[str, Any]] = []

    def at(self, k: int) -> str:
        return self.text[k] if 0 <= k < self.n else ""

    def parse(self) -> tuple[str, list[dict[str, Any]]]:
        while self.i < self.n:
            c = self.text[self.i]
            if c == "\\" and self.at(self.i + 1) in ("_", "*", "`", "["):
                self.out.append(self.text[self.i + 1])
                self.u16 += 1
                self.i += 2
            elif c not in "_*`[":
                self.out.append(c)
                self.u16 += _u16(c)
                self.i += 1
            else:
                self.entity(c)
        return "".join(self.out), _sorted_entities(self.entities)

    def entity(self, c: str) -> None:
        text = self.text
        begin = self.i
        end_char = "]" if c == "[" else c
        self.i += 1
        is_pre = c == "`" and self.at(self.i) == "`" and self.at(self.i + 1) == "`"
        language = self.begin_pre() if is_pre else ""
        offset, start_pos = self.u16, len(self.out)
        while self.i < self.n and (
                text[self.i] != end_char
                or (is_pre and not (self.at(self.i + 1) == "`" and self.at(self.i + 2) == "`"))):
            self.out.append(text[self.i])
            self.u16 += _u16(text[self.i])
            self.i += 1
        if self.i >= self.n:
            raise _entities_error("Can't find end of the entity starting at byte offset "
                                  f"{_byte_offset(text, begin)}")
        length = self.u16 - offset
        entity: dict[str, Any] | None = None
        if c == "[":
            url = "".join(self.out[start_pos:])
            if self.at(self.i + 1) == "(":
                end = text.find(")", self.i + 2)
                end = self.n if end < 0 else end
                url, self.i = text[self.i + 2:end], end
            entity = _link_entity(offset, length, url)
        elif c in "_*":
            entity = {"type": "italic" if c == "_" else "bold", "offset": offset,
                      "length": length}
        else:
            entity = {"type": "pre" if is_pre else "code", "offset": offset, "length": length}
            if language:
                entity["language"] = language
        if entity is not None and length > 0:
            self.entities.append(entity)
        self.i += 3 if is_pre else 1

    def begin_pre(self) -> str:
        text = self.text
        self.i += 2
        language = ""
        lang_end = self.i
        while lang_end < self.n and text[lang_end] not in " \t\r\n`":
            lang_end += 1
        if self.i != lang_end and lang_end < self.n and text[lang_end] != "`":
            language = text[self.i:lang_end]
            self.i = lang_end
        if self.at(self.i) in ("\n", "\r"):
            double = self.at(self.i + 1) in ("\n", "\r") and self.at(self.i) != self.at(self.i + 1)
            self.i += 2 if double else 1
        return language


def parse_markdown(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse legacy Markdown into ``(plain_text, entities)``; raise ApiError like the server."""
    return _MarkdownParser(text).parse()


def parse_entities(text: str, parse_mode: str | None) -> tuple[str, list[dict[str, Any]]]:
    """``(plain_text, entities)`` for a parse_mode (None/'' = plain text)."""
    if not parse_mode:
        return text, []
    mode = parse_mode.lower()
    if mode == "html":
        return parse_html(text)
    if mode == "markdownv2":
        return parse_markdown_v2(text)
    if mode == "markdown":
        return parse_markdown(text)
    raise _bad("unsupported parse_mode")


_TRIM = " \t\r\n\x0b\x0c"


def _trim(text: str, entities: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Strip leading/trailing whitespace as the server does, keeping entities aligned."""
    stripped = text.strip(_TRIM)
    if stripped == text:
        return text, entities
    lead = utf16_len(text[: len(text) - len(text.lstrip(_TRIM))])
    total = utf16_len(stripped)
    out = []
    for e in entities:
        start = max(0, e["offset"] - lead)
        end = min(total, e["offset"] + e["length"] - lead)
        if end > start:
            out.append({**e, "offset": start, "length": end - start})
    return stripped, out


_ENTITY_TYPES = {
    "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold",
    "italic", "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote",
    "code", "pre", "text_link", "text_mention", "custom_emoji", "date_time",
}


def _explicit_entities(text: str, raw: Any) -> list[dict[str, Any]]:
    """Validate an explicit ``entities`` / ``caption_entities`` list."""
    if not isinstance(raw, list):
        raise _bad("can't parse entities JSON object")
    total = utf16_len(text)
    out = []
    for e in raw:
        if not isinstance(e, dict):
            raise _bad("can't parse MessageEntity: MessageEntity must be an Object")
        kind = e.get("type")
        if not isinstance(kind, str) or kind not in _ENTITY_TYPES:
            raise _bad("can't parse MessageEntity: Unsupported type specified")
        offset, length = e.get("offset"), e.get("length")
        if not isinstance(offset, int) or offset < 0:
            raise _bad(f"receive an entity with incorrect offset {offset}")
        if not isinstance(length, int) or length < 0:
            raise _bad(f"receive an entity with incorrect length {length}")
        if offset > total:
            raise _bad(f"entity begins after the end of the text at UTF-16 offset {offset}")
        if offset + length > total:
            raise _bad(
                f"entity beginning at UTF-16 offset {offset} ends after the end of the text at "
                f"UTF-16 offset {offset + length}"
            )
        if kind == "text_link":
            if "url" not in e:
                raise _bad('can\'t parse MessageEntity: Can\'t find field "url"')
            reason = _valid_http_url(str(e["url"]))
            if reason:
                raise _bad(f"entity URL '{e['url']}' is invalid: {reason}")
        if kind == "text_mention" and "user" not in e:
            raise _bad('can\'t parse MessageEntity: Can\'t find field "user"')
        if kind == "custom_emoji" and "custom_emoji_id" not in e:
            raise _bad('can\'t parse MessageEntity: Can\'t find field "custom_emoji_id"')
        if length > 0:
            out.append(dict(e))
    return _sorted_entities(out)


# ---------------------------------------------------------------------------------------
# Keyboards
# ---------------------------------------------------------------------------------------

_INLINE_ACTIONS = (
    "url", "callback_data", "web_app", "login_url", "switch_inline_query",
    "switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text",
    "callback_game", "pay",
)


def _bool_field(obj: dict[str, Any], name: str, prefix: str = "") -> None:
    if name in obj and not isinstance(obj[name], bool):
        raise _bad(f'{prefix}field "{name}" must be of type Boolean')


def _check_inline_button(button: Any) -> dict[str, Any]:
    prefix = "can't parse inline keyboard button: "
    if not isinstance(button, dict):
        raise _bad(prefix + "InlineKeyboardButton must be an Object")
    button = {k: v for k, v in button.items() if v is not None}
    if "text" not in button:
        raise _bad(prefix + 'Can\'t find field "text"')
    if not isinstance(button["text"], str):
        raise _bad(prefix + 'Field "text" must be of type String')
    if not button["text"].strip():
        raise _bad("BUTTON_TEXT_INVALID")
    actions = [a for a in _INLINE_ACTIONS if a in button]
    if not actions:
        raise _bad(prefix + "Text buttons are unallowed in the inline keyboard")
    for action in actions:
        _check_inline_action(action, button[action], prefix)
    return button


def _check_inline_action(action: str, value: Any, prefix: str) -> None:
    if action in ("callback_data", "url") and not isinstance(value, str):
        raise _bad(prefix + f'Field "{action}" must be of type String')
    if action == "callback_data":
        size = len(value.encode("utf-8"))
        if size == 0 or size > MAX_CALLBACK_DATA_BYTES:
            raise _bad("BUTTON_DATA_INVALID")
    elif action == "url":
        reason = _valid_http_url(value)
        if reason:
            raise _bad(f"inline keyboard button URL '{value}' is invalid: {reason}")
    elif action == "web_app":
        url = value.get("url", "") if isinstance(value, dict) else ""
        if not str(url).lower().startswith("https://"):
            raise _bad(f"inline keyboard button Web App URL '{url}' is invalid: "
                       "Only HTTPS links are allowed")
    elif action == "copy_text":
        copied = value.get("text") if isinstance(value, dict) else None
        if not isinstance(copied, str) or not 1 <= len(copied) <= MAX_COPY_TEXT_LENGTH:
            raise _bad("BUTTON_COPY_TEXT_INVALID")
    elif action in ("pay", "callback_game"):
        raise _bad("BUTTON_TYPE_INVALID")


def _check_reply_button(button: Any) -> dict[str, Any]:
    prefix = "can't parse keyboard button: "
    if isinstance(button, str):
        button = {"text": button}
    if not isinstance(button, dict):
        raise _bad(prefix + "KeyboardButton must be a String or an Object")
    button = {k: v for k, v in button.items() if v is not None}
    if "text" not in button:
        raise _bad(prefix + 'Can\'t find field "text"')
    if not isinstance(button["text"], str):
        raise _bad(prefix + 'Field "text" must be of type String')
    if not button["text"].strip():
        raise _bad("BUTTON_TEXT_INVALID")
    for name in ("request_contact", "request_location"):
        _bool_field(button, name, prefix)
    for name in ("request_users", "request_chat"):
        if name in button and (not isinstance(button[name], dict)
                               or "request_id" not in button[name]):
            raise _bad(prefix + 'Can\'t find field "request_id"')
    if "web_app" in button:
        url = button["web_app"].get("url", "") if isinstance(button["web_app"], dict) else ""
        if not str(url).lower().startswith("https://"):
            raise _bad(
                f"keyboard button Web App URL '{url}' is invalid: Only HTTPS links are allowed"
            )
    return button


def _check_markup(raw: Any) -> dict[str, Any] | None:
    """Validate a ``reply_markup`` object; return it normalised (None values dropped)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad("can't parse reply keyboard markup JSON object")
    markup = {k: v for k, v in raw.items() if v is not None}
    if "inline_keyboard" in markup:
        rows = markup["inline_keyboard"]
        if not isinstance(rows, list):
            raise _bad('field "inline_keyboard" must be of type Array')
        if not all(isinstance(r, list) for r in rows):
            raise _bad('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array '
                       "of Arrays")
        return {"inline_keyboard": [[_check_inline_button(b) for b in row] for row in rows]}
    if "keyboard" in markup:
        rows = markup["keyboard"]
        if not isinstance(rows, list):
            raise _bad('field "keyboard" must be of type Array')
        if not all(isinstance(r, list) for r in rows):
            raise _bad('field "keyboard" of the ReplyKeyboardMarkup must be an Array of Arrays')
        for name in ("resize_keyboard", "one_time_keyboard", "selective", "is_persistent"):
            _bool_field(markup, name)
        markup["keyboard"] = [[_check_reply_button(b) for b in row] for row in rows]
        return markup
    if "remove_keyboard" in markup:
        _bool_field(markup, "remove_keyboard")
        _bool_field(markup, "selective")
        return markup
    if "force_reply" in markup:
        _bool_field(markup, "force_reply")
        _bool_field(markup, "selective")
        return markup
    raise _bad("can't parse reply keyboard markup JSON object")


def _inline_part(markup: dict[str, Any] | None) -> dict[str, Any] | None:
    """The part of a markup that shows up in Message.reply_markup (non-empty inline only)."""
    if markup and markup.get("inline_keyboard"):
        return markup
    return None


def _callback_datas(markup: dict[str, Any] | None) -> list[str]:
    if not markup:
        return []
    return [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row
            if "callback_data" in b]


# ---------------------------------------------------------------------------------------
# Request decoding
# ---------------------------------------------------------------------------------------


@dataclass
class Upload:
    """A file part of a multipart request."""

    name: str
    filename: str
    content: bytes
    content_type: str


def _header_params(value: str) -> tuple[str, dict[str, str]]:
    main, _, rest = value.partition(";")
    params: dict[str, str] = {}
    for m in re.finditer(r'\s*([^=;\s]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)\s*;?', rest):
        key, raw = m.group(1).lower(), m.group(2).strip()
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1]).replace("%22", '"')
        if key.endswith("*"):
            key = key[:-1]
            charset, _, encoded = raw.partition("''")
            raw = unquote(encoded, encoding=charset or "utf-8")
        params[key] = raw
    return main.strip().lower(), params


def _parse_multipart(body: bytes, boundary: str) -> tuple[dict[str, str], dict[str, Upload]]:
    fields: dict[str, str] = {}
    files: dict[str, Upload] = {}
    delimiter = b"--" + boundary.encode("latin-1")
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break
        if part.startswith(b"\r\n"):
            part = part[2:]
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        if content.endswith(b"\r\n"):
            content = content[:-2]
        headers: dict[str, str] = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        _, disposition = _header_params(headers.get("content-disposition", ""))
        name = disposition.get("name", "")
        if "filename" in disposition:
            files[name] = Upload(
                name=name,
                filename=disposition["filename"],
                content=content,
                content_type=headers.get("content-type", "application/octet-stream"),
            )
        else:
            fields[name] = content.decode("utf-8", "replace")
    return fields, files


def _coerce(name: str, value: Any) -> Any:
    """Decode one parameter the way the Bot API reads it."""
    if name in _JSON_PARAMS and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            if name == "reply_markup":
                raise _bad("can't parse reply keyboard markup JSON object") from None
            raise _bad(f"can't parse {name} JSON object") from None
    if name in _INT_PARAMS and isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        return int(value.strip())
    if name in _FLOAT_PARAMS and isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(value)
            return int(number) if number.is_integer() else number
    if name in _BOOL_PARAMS and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0", ""):
            return False
    return value


def _decode_request(content_type: str, body: bytes,
                    query: str) -> tuple[dict[str, Any], dict[str, Upload], str]:
    """(params, files, encoding) of one request."""
    params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    files: dict[str, Upload] = {}
    kind, ct_params = _header_params(content_type or "")
    encoding = "query" if params else "none"
    if body:
        if kind == "application/json":
            try:
                decoded = json.loads(body.decode("utf-8"))
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse JSON encoded request") from None
            if not isinstance(decoded, dict):
                raise ApiError(400, "Bad Request: can't parse JSON encoded request")
            params.update(decoded)
            encoding = "json"
        elif kind == "multipart/form-data":
            fields, files = _parse_multipart(body, ct_params.get("boundary", ""))
            params.update(fields)
            encoding = "multipart"
        else:
            params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            encoding = "form"
    return {k: _coerce(k, v) for k, v in params.items()}, files, encoding


# ---------------------------------------------------------------------------------------
# HTTP plumbing
# ---------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], fake: FakeTelegram):
        self.fake = fake
        self.live_sockets: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.live_lock:
            self.live_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.live_lock:
            self.live_sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, _ClientGone, OSError)):
            return
        self.fake._internal_errors.append(repr(exc))

    def close_live_sockets(self) -> None:
        with self.live_lock:
            socks = list(self.live_sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server  # type: ignore[assignment]
    server_version = "FakeTelegram/1.0"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, _ClientGone, TimeoutError, OSError):
            self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802
        self.server.fake._dispatch(self)

    do_GET = do_POST  # noqa: N815

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _send(self, status: int, data: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"))

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


# ---------------------------------------------------------------------------------------
# State records
# ---------------------------------------------------------------------------------------


@dataclass
class _Stored:
    message: dict[str, Any]
    by_bot: bool
    deleted: bool = False
    reply_keyboard: dict[str, Any] | None = None  # a non-inline markup sent with it
    raw_text: str | None = None
    parse_mode: str | None = None
    edits: int = 0


@dataclass
class _Fault:
    kind: str  # "status" | "hang" | "flood"
    times: int
    status: int = 500
    methods: frozenset[str] | None = None  # lowercased; None = any but getUpdates
    chat_id: int | str | None = None
    retry_after: int = 1
    description: str | None = None


@dataclass
class _Bucket:
    rate: float
    burst: float
    retry_after: int | None
    tokens: float = 0.0
    last: float = field(default_factory=time.monotonic)

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now


_HTML_BODIES = {
    502: b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>"
         b"502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
    504: b"<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>"
         b"504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n"
         b"</html>\r\n",
}
_STATUS_TEXT = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    409: "Conflict", 413: "Request Entity Too Large", 429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Time-out",
}


def _method_set(method: str | Iterable[str] | None) -> frozenset[str] | None:
    if method is None:
        return None
    if isinstance(method, str):
        return frozenset({method.lower()})
    return frozenset(m.lower() for m in method)


# ---------------------------------------------------------------------------------------
# The fake
# ---------------------------------------------------------------------------------------


class FakeTelegram:
    """A loopback Telegram Bot API. All public methods are thread-safe.

    Set-up: ``add_chat``, ``add_user``. Acting as users: ``user_sends``, ``user_taps``
    (queue Updates for getUpdates). Inspection: ``sent``, ``last_sent``, ``texts``,
    ``message``, ``calls``, ``callback_answers``, ``documents``, ``commands``, ``errors``,
    ``pending_updates``. Fault injection: ``rate_limit``, ``flood``, ``fail_next``,
    ``hang_next``, ``outage``, ``release_hangs``. Waiting: ``wait_for`` (async),
    ``wait_for_sync``. Hook: ``on_request(method, params) -> None | result | ApiError``.
    """

    def __init__(self, token: str = DEFAULT_TOKEN, *, host: str = "127.0.0.1", port: int = 0,
                 bot_username: str = "switchboard_test_bot",
                 bot_first_name: str = "Switchboard Test Bot",
                 callback_answer_timeout: float = CALLBACK_ANSWER_TIMEOUT):
        if ":" not in token or not token.split(":", 1)[0].isdigit():
            raise ValueError("token must look like '<bot id>:<secret>'")
        self.token = token
        self.host = host
        self.port = port
        self.url = ""
        self.bot_user: dict[str, Any] = {
            "id": int(token.split(":", 1)[0]),
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
        }
        self.callback_answer_timeout = callback_answer_timeout
        self.on_request: Callable[[str, dict[str, Any]], Any] | None = None

        self._cond = threading.Condition(threading.RLock())
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._internal_errors: list[str] = []

        self._users: dict[int, dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._next_message_id: dict[int, int] = {}
        self._messages: dict[tuple[int, int], _Stored] = {}
        self._bot_messages: list[tuple[int, int]] = []
        self._updates: deque[dict[str, Any]] = deque()
        self._update_ids = itertools.count(1)
        self._allowed_updates: set[str] | None = None
        self._poll_generation = 0
        self._callbacks: dict[str, dict[str, Any]] = {}
        self._callback_ids = itertools.count(1)
        self._files: dict[str, dict[str, Any]] = {}
        self._file_ids = itertools.count(1)
        self._commands: dict[tuple[str, str], list[dict[str, str]]] = {}
        self._webhook: dict[str, Any] = {"url": "", "has_custom_certificate": False,
                                         "pending_update_count": 0}

        self._calls: list[dict[str, Any]] = []
        self._errors: list[dict[str, Any]] = []
        self._callback_answers: list[dict[str, Any]] = []
        self._documents: list[dict[str, Any]] = []

        self._faults: list[_Fault] = []
        self._buckets: dict[int | str | None, _Bucket] = {}
        self._outage: str | int | None = None
        self._release_generation = 0
        self._hung = 0

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeTelegram:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeTelegram:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if server is not None:
            server.shutdown()
            server.close_live_sockets()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """For ``ApplicationBuilder().base_url(...)``."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        """For ``ApplicationBuilder().base_file_url(...)``."""
        return f"{self.url}/file/bot"

    # -- set-up ----------------------------------------------------------------------
    def add_user(self, user_id: int, first_name: str = "Tester", *, username: str | None = None,
                 last_name: str | None = None, language_code: str | None = "en",
                 is_bot: bool = False) -> dict[str, Any]:
        """Register a user (a User object is returned)."""
        user: dict[str, Any] = {"id": int(user_id), "is_bot": is_bot, "first_name": first_name}
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        if language_code:
            user["language_code"] = language_code
        with self._cond:
            self._users[int(user_id)] = user
        return copy.deepcopy(user)

    def add_chat(self, chat_id: int, user_id: int | None = None, first_name: str = "Tester",
                 username: str | None = None, *, last_name: str | None = None,
                 type: str = "private", title: str | None = None,  # noqa: A002
                 language_code: str | None = "en") -> dict[str, Any]:
        """Register a chat the bot may talk to (a Chat object is returned).

        Private chats (the default): the chat id is the user's id, and the user is
        registered too. Groups/supergroups/channels: pass ``type`` and ``title``; register
        their members with ``add_user``.
        """
        chat_id = int(chat_id)
        if type == "private":
            if user_id is not None and int(user_id) != chat_id:
                raise ValueError("a private chat's id is its user's id")
            self.add_user(chat_id, first_name, username=username, last_name=last_name,
                          language_code=language_code)
            chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": first_name}
            if last_name:
                chat["last_name"] = last_name
            if username:
                chat["username"] = username
        else:
            if type not in ("group", "supergroup", "channel"):
                raise ValueError(f"unknown chat type {type!r}")
            chat = {"id": chat_id, "type": type, "title": title or f"Chat {chat_id}"}
            if username:
                chat["username"] = username
            if user_id is not None and int(user_id) not in self._users:
                self.add_user(int(user_id), first_name, language_code=language_code)
        with self._cond:
            self._chats[chat_id] = chat
            self._next_message_id.setdefault(chat_id, 1)
        return copy.deepcopy(chat)

    # -- acting as users -------------------------------------------------------------
    def user_sends(self, user_id: int, text: str, *, chat_id: int | None = None,
                   reply_to_message_id: int | None = None,
                   entities: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Queue an Update carrying a text Message from the user; return the Update.

        A text starting with '/' gets a ``bot_command`` entity for its first word (what
        PTB's CommandHandler needs), unless ``entities`` is given.
        """
        with self._cond:
            user = self._user(user_id)
            chat_id = int(user_id if chat_id is None else chat_id)
            chat = self._chat_for_update(chat_id)
            msg = self._new_message(chat_id, chat, user)
            msg["text"] = text
            if entities is None:
                entities = []
                if text.startswith("/"):
                    word = re.match(r"/\S*", text)
                    assert word is not None
                    entities.append({"type": "bot_command", "offset": 0,
                                     "length": utf16_len(word.group(0))})
            if entities:
                msg["entities"] = copy.deepcopy(entities)
            if reply_to_message_id is not None:
                replied = self._messages.get((chat_id, int(reply_to_message_id)))
                if replied is None or replied.deleted:
                    raise ValueError(f"no message {reply_to_message_id} in chat {chat_id}")
                msg["reply_to_message"] = self._reply_copy(replied.message)
            self._messages[(chat_id, msg["message_id"])] = _Stored(msg, by_bot=False)
            return self._queue_update("message", msg)

    def user_taps(self, user_id: int, message_id: int, callback_data: str, *,
                  chat_id: int | None = None, strict: bool = True) -> str:
        """Queue an Update with a CallbackQuery (a button press on a bot message).

        The query carries the message as it is stored now. With ``strict`` (default) the
        message must be a live bot message showing a button with that callback_data.
        Returns the callback query id.
        """
        with self._cond:
            user = self._user(user_id)
            chat_id = int(user_id if chat_id is None else chat_id)
            self._chat_for_update(chat_id)
            stored = self._messages.get((chat_id, int(message_id)))
            if strict:
                if stored is None or stored.deleted or not stored.by_bot:
                    raise ValueError(f"no live bot message {message_id} in chat {chat_id}")
                buttons = _callback_datas(stored.message.get("reply_markup"))
                if callback_data not in buttons:
                    raise ValueError(
                        f"message {message_id} has no button with callback_data "
                        f"{callback_data!r} (buttons: {buttons})"
                    )
            query_id = str(4_000_000_000_000_000_000 + next(self._callback_ids))
            query: dict[str, Any] = {
                "id": query_id,
                "from": copy.deepcopy(user),
                "chat_instance": str(-(9_000_000_000_000_000 + abs(chat_id))),
                "data": callback_data,
            }
            if stored is not None:
                query["message"] = copy.deepcopy(stored.message)
            self._callbacks[query_id] = {
                "created": time.monotonic(), "answered": False, "user_id": int(user_id),
                "chat_id": chat_id, "message_id": int(message_id), "data": callback_data,
            }
            self._queue_update("callback_query", query)
            return query_id

    def queue_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue an arbitrary Update (its update_id is assigned); return it."""
        update = copy.deepcopy(update)
        update.pop("update_id", None)
        if len(update) != 1:
            raise ValueError("an Update has exactly one field besides update_id")
        ((kind, payload),) = update.items()
        with self._cond:
            return self._queue_update(kind, payload)

    # -- inspection ------------------------------------------------------------------
    def sent(self, chat_id: int | None = None, *,
             include_deleted: bool = True) -> list[dict[str, Any]]:
        """Every message the bot sent (in order), as it is now (after edits).

        Each is the Message object the bot got back, plus test-only keys: ``_deleted``,
        ``_edits`` (count), ``_raw_text`` (text/caption before entity parsing),
        ``_parse_mode`` and ``_reply_keyboard`` (a reply keyboard / remove / force-reply
        markup sent with it, which Message objects do not carry).
        """
        with self._cond:
            out = []
            for key in self._bot_messages:
                stored = self._messages[key]
                if chat_id is not None and key[0] != int(chat_id):
                    continue
                if stored.deleted and not include_deleted:
                    continue
                msg = copy.deepcopy(stored.message)
                msg["_deleted"] = stored.deleted
                msg["_edits"] = stored.edits
                msg["_raw_text"] = stored.raw_text
                msg["_parse_mode"] = stored.parse_mode
                msg["_reply_keyboard"] = copy.deepcopy(stored.reply_keyboard)
                out.append(msg)
            return out

    def last_sent(self, chat_id: int | None = None) -> dict[str, Any] | None:
        """The bot's most recent live message (in ``chat_id``), or None."""
        live = self.sent(chat_id, include_deleted=False)
        return live[-1] if live else None

    def texts(self, chat_id: int | None = None) -> list[str]:
        """Text (or caption) of each live bot message, in order."""
        return [m.get("text", m.get("caption", ""))
                for m in self.sent(chat_id, include_deleted=False)]

    def message(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        """Any stored message (user's or bot's, deleted or not) as it is now."""
        with self._cond:
            stored = self._messages.get((int(chat_id), int(message_id)))
            return None if stored is None else copy.deepcopy(stored.message)

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """Every API request, in arrival order: ``{"method", "params", "files", "encoding",
        "status", "description", "at"}`` (``status`` None while in flight or if the fake
        never answered; ``files`` maps a part name to ``{"filename", "size",
        "content_type"}``)."""
        with self._cond:
            return [copy.deepcopy(c) for c in self._calls
                    if method is None or c["method"].lower() == method.lower()]

    @property
    def callback_answers(self) -> list[dict[str, Any]]:
        """Successful answerCallbackQuery calls: ``{"callback_query_id", "text",
        "show_alert", "url", "cache_time", "data", "chat_id", "message_id"}``."""
        with self._cond:
            return copy.deepcopy(self._callback_answers)

    @property
    def documents(self) -> list[dict[str, Any]]:
        """Documents the bot sent: ``{"chat_id", "message_id", "filename", "bytes",
        "mime_type", "caption", "raw_caption", "parse_mode", "file_id"}``."""
        with self._cond:
            return copy.deepcopy(self._documents)

    @property
    def commands(self) -> list[dict[str, str]]:
        """The command list for the default scope and no language (setMyCommands)."""
        return self.commands_for()

    def commands_for(self, scope: dict[str, Any] | None = None,
                     language_code: str = "") -> list[dict[str, str]]:
        with self._cond:
            return copy.deepcopy(self._commands.get(self._scope_key(scope, language_code), []))

    @property
    def errors(self) -> list[dict[str, Any]]:
        """Every 4xx the fake answered: ``{"method", "status", "description", "params",
        "injected"}`` (``injected``: caused by ``flood``/``fail_next``/``rate_limit``)."""
        with self._cond:
            return copy.deepcopy(self._errors)

    @property
    def internal_errors(self) -> list[str]:
        """Exceptions inside the fake itself (should always be empty)."""
        return list(self._internal_errors)

    def pending_updates(self) -> int:
        """Updates queued and not yet confirmed by a getUpdates offset."""
        with self._cond:
            return len(self._updates)

    @property
    def hung_requests(self) -> int:
        """Requests currently held open without an answer (``hang_next``/``outage``)."""
        with self._cond:
            return self._hung

    # -- fault injection -------------------------------------------------------------
    def rate_limit(self, chat_id: int | None = None, *, per_second: float = 1.0,
                   burst: float = 1.0, retry_after: int | None = None) -> None:
        """Flood control: a token bucket for sends/edits to ``chat_id`` (None: all chats
        together). Over the limit: 429 ``Too Many Requests: retry after S`` with
        ``parameters.retry_after`` = S (given, or the whole seconds until a token is back).
        """
        if per_second <= 0 or burst < 1:
            raise ValueError("per_second must be > 0 and burst >= 1")
        with self._cond:
            self._buckets[None if chat_id is None else int(chat_id)] = _Bucket(
                rate=per_second, burst=burst, retry_after=retry_after, tokens=burst)

    def clear_rate_limits(self) -> None:
        with self._cond:
            self._buckets.clear()

    def flood(self, chat_id: int | None = None, *, times: int = 1, retry_after: int = 1) -> None:
        """The next ``times`` sends/edits to ``chat_id`` (None: any chat) get a 429."""
        with self._cond:
            self._faults.append(_Fault("flood", times, status=429,
                                       chat_id=None if chat_id is None else int(chat_id),
                                       retry_after=retry_after))

    def fail_next(self, times: int = 1, *, status: int = 500,
                  method: str | Iterable[str] | None = None,
                  description: str | None = None) -> None:
        """The next ``times`` matching requests get HTTP ``status`` (500: JSON error body;
        502/504: nginx's HTML page, as the real front end sends). ``method`` None matches
        every method except getUpdates (name it explicitly to break polling)."""
        with self._cond:
            self._faults.append(_Fault("status", times, status=status,
                                       methods=_method_set(method), description=description))

    def hang_next(self, times: int = 1, *, method: str | Iterable[str] | None = None) -> None:
        """The next ``times`` matching requests are read and never answered (the connection
        is closed on ``release_hangs``, ``outage(None)`` or ``stop``). ``method`` as in
        ``fail_next``."""
        with self._cond:
            self._faults.append(_Fault("hang", times, methods=_method_set(method)))

    def outage(self, mode: str | int | None) -> None:
        """A full outage until ``outage(None)``: ``"hang"`` (never answer) or an HTTP status
        (e.g. 502) for every request, getUpdates included. Ending it releases hung requests.
        """
        if mode is not None and mode != "hang" and not isinstance(mode, int):
            raise ValueError("mode is None, 'hang' or an HTTP status")
        with self._cond:
            self._outage = mode
            if mode is None:
                self._release_generation += 1
            self._cond.notify_all()

    def release_hangs(self) -> None:
        """Close every connection held by ``hang_next``/``outage("hang")`` (no answer)."""
        with self._cond:
            self._release_generation += 1
            self._cond.notify_all()

    def clear_faults(self) -> None:
        """Drop pending ``flood``/``fail_next``/``hang_next`` faults and any outage."""
        with self._cond:
            self._faults.clear()
            self._outage = None
            self._release_generation += 1
            self._cond.notify_all()

    # -- waiting ---------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0, *,
                       interval: float = 0.02, what: str | None = None) -> Any:
        """Poll ``predicate()`` (sync, or returning an awaitable) until truthy; return that
        value. Raises AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(timeout, what or repr(predicate)))
            await asyncio.sleep(interval)

    def wait_for_sync(self, predicate: Callable[[], Any], timeout: float = 5.0, *,
                      interval: float = 0.02, what: str | None = None) -> Any:
        """Blocking ``wait_for`` (for sync tests and threads)."""
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(timeout, what or repr(predicate)))
            time.sleep(interval)

    def _timeout_message(self, timeout: float, what: str) -> str:
        with self._cond:
            recent = [f"{c['method']}->{c['status']}" for c in self._calls[-12:]]
            errors = [f"{e['method']}: {e['description']}" for e in self._errors[-5:]]
        return (f"FakeTelegram: timed out after {timeout}s waiting for {what}; "
                f"recent calls {recent}; recent errors {errors}")

    # -- request dispatch ------------------------------------------------------------
    def _dispatch(self, h: _Handler) -> None:
        url = urlsplit(h.path)
        body = h._read_body()
        if url.path.startswith("/file/bot"):
            self._serve_file(h, url.path)
            return
        m = re.fullmatch(r"/bot([^/]*)/([A-Za-z0-9_]+)/?", unquote(url.path))
        if not m:
            h._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        token, method = m.group(1), m.group(2)
        call: dict[str, Any] = {"method": method, "params": {}, "files": {}, "encoding": "",
                                "status": None, "description": None, "at": time.time()}
        with self._cond:
            self._calls.append(call)
        try:
            params, files, encoding = _decode_request(
                h.headers.get("Content-Type", ""), body, url.query)
        except ApiError as e:
            self._answer_error(h, call, e, method, {})
            return
        with self._cond:
            call["params"] = copy.deepcopy(params)
            call["files"] = {k: {"filename": f.filename, "size": len(f.content),
                                 "content_type": f.content_type} for k, f in files.items()}
            call["encoding"] = encoding

        if self._apply_faults(h, call, method, params):
            return
        if token != self.token:
            if re.fullmatch(r"\d+:[A-Za-z0-9_-]+", token):
                self._answer_error(h, call, ApiError(401, "Unauthorized"), method, params)
            else:
                self._answer_error(h, call, ApiError(404, "Not Found"), method, params)
            return
        handler = getattr(self, f"_m_{method.lower()}", None)
        try:
            if self.on_request is not None:
                override = self.on_request(method, copy.deepcopy(params))
                if isinstance(override, ApiError):
                    raise override
                if override is not None:
                    self._answer(h, call, override)
                    return
            if handler is None:
                raise ApiError(404, "Not Found")
            if method.lower() == "getupdates":
                result = self._m_getupdates(params, h, call)
            else:
                result = handler(params, files)
        except ApiError as e:
            self._answer_error(h, call, e, method, params, injected=e.injected)
            return
        except _ClientGone:
            with self._cond:
                call["description"] = call["description"] or "(connection dropped)"
            raise
        except Exception as e:  # noqa: BLE001 - a bug in the fake becomes a 500
            self._internal_errors.append(f"{method}: {e!r}")
            self._answer_error(h, call, ApiError(500, f"Internal Server Error: {e!r}"),
                               method, params)
            return
        self._answer(h, call, result)

    def _answer(self, h: _Handler, call: dict[str, Any], result: Any) -> None:
        with self._cond:
            call["status"] = 200
        h._send_json(200, {"ok": True, "result": result})

    def _answer_error(self, h: _Handler, call: dict[str, Any], error: ApiError, method: str,
                      params: dict[str, Any], *, injected: bool = False,
                      record: bool = True) -> None:
        with self._cond:
            call["status"] = error.status
            call["description"] = error.description
            if 400 <= error.status < 500 and record:
                self._errors.append({"method": method, "status": error.status,
                                     "description": error.description,
                                     "params": copy.deepcopy(params), "injected": injected})
        h._send_json(error.status, error.body())

    def _apply_faults(self, h: _Handler, call: dict[str, Any], method: str,
                      params: dict[str, Any]) -> bool:
        """Injected outages/failures; True if the request was dealt with."""
        lowered = method.lower()
        with self._cond:
            outage = self._outage
            fault: _Fault | None = None
            if outage is None:
                for f in self._faults:
                    if f.kind == "flood":
                        continue
                    if f.methods is None and lowered == "getupdates":
                        continue
                    if f.methods is not None and lowered not in f.methods:
                        continue
                    fault = f
                    f.times -= 1
                    if f.times <= 0:
                        self._faults.remove(f)
                    break
        if outage == "hang" or (fault is not None and fault.kind == "hang"):
            self._hang(h, call)
        status = outage if isinstance(outage, int) else (fault.status if fault else None)
        if status is None:
            return False
        description = (fault.description if fault and fault.description
                       else _STATUS_TEXT.get(status, f"Error {status}"))
        if status in _HTML_BODIES and not (fault and fault.description):
            with self._cond:
                call["status"] = status
                call["description"] = description
            h._send(status, _HTML_BODIES[status], "text/html")
        else:
            self._answer_error(h, call, ApiError(status, description), method, params,
                               injected=True)
        return True

    def _hang(self, h: _Handler, call: dict[str, Any]) -> None:
        with self._cond:
            generation = self._release_generation
            self._hung += 1
            try:
                while (self._release_generation == generation
                       and not self._stopping.is_set()):
                    self._cond.wait(0.05)
                    if h._client_gone():
                        break
            finally:
                self._hung -= 1
        with self._cond:
            call["description"] = "(hung: no answer)"
        raise _ClientGone("hung request released")

    def _serve_file(self, h: _Handler, path: str) -> None:
        # PTB percent-encodes the whole URL path (the token's ':' included).
        m = re.fullmatch(r"/file/bot([^/]*)/(.+)", unquote(path))
        if not m or m.group(1) != self.token:
            h._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        file_path = m.group(2)
        with self._cond:
            info = next((f for f in self._files.values() if f["file_path"] == file_path), None)
        if info is None or info["bytes"] is None:
            h._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        h._send(200, info["bytes"], info["mime_type"] or "application/octet-stream")

    # -- helpers (call with the lock held) -------------------------------------------
    def _user(self, user_id: int) -> dict[str, Any]:
        user = self._users.get(int(user_id))
        if user is None:
            raise ValueError(f"unknown user {user_id}: call fake.add_chat/add_user first")
        return user

    def _chat_for_update(self, chat_id: int) -> dict[str, Any]:
        chat = self._chats.get(chat_id)
        if chat is None:
            raise ValueError(f"unknown chat {chat_id}: call fake.add_chat first")
        return chat

    def _new_message(self, chat_id: int, chat: dict[str, Any],
                     sender: dict[str, Any]) -> dict[str, Any]:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return {
            "message_id": message_id,
            "from": copy.deepcopy(sender),
            "chat": copy.deepcopy(chat),
            "date": int(time.time()),
        }

    @staticmethod
    def _reply_copy(message: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(message)
        out.pop("reply_to_message", None)
        return out

    def _queue_update(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._update_ids), kind: copy.deepcopy(payload)}
        self._updates.append(update)
        self._cond.notify_all()
        return copy.deepcopy(update)

    def _require_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        raw = params.get("chat_id")
        if raw is None or raw == "":
            raise _bad("chat_id is empty")
        if isinstance(raw, str) and raw.startswith("@"):
            wanted = raw[1:].lower()
            for chat in self._chats.values():
                if chat["type"] != "private" and chat.get("username", "").lower() == wanted:
                    return chat
            raise _bad("chat not found")
        if not isinstance(raw, int):
            raise _bad("chat not found")
        chat = self._chats.get(raw)
        if chat is None:
            raise _bad("chat not found")
        return chat

    def _check_flood(self, method: str, chat_id: int) -> None:
        """Injected 429s and rate-limit buckets (only for sends/edits)."""
        if method.lower() not in _FLOOD_METHODS:
            return
        for f in self._faults:
            if f.kind == "flood" and (f.chat_id is None or f.chat_id == chat_id):
                f.times -= 1
                if f.times <= 0:
                    self._faults.remove(f)
                raise self._too_many(f.retry_after)
        now = time.monotonic()
        buckets = [b for key, b in self._buckets.items() if key is None or key == chat_id]
        for b in buckets:
            b.refill(now)
        for b in buckets:
            if b.tokens < 1:
                wait = (1 - b.tokens) / b.rate
                raise self._too_many(b.retry_after or max(1, math.ceil(wait)))
        for b in buckets:
            b.tokens -= 1

    @staticmethod
    def _too_many(retry_after: int) -> ApiError:
        error = ApiError(429, f"Too Many Requests: retry after {retry_after}",
                         {"retry_after": retry_after})
        error.injected = True
        return error

    def _prepare_text(self, params: dict[str, Any], name: str, entities_name: str, *,
                      required: bool) -> tuple[str, list[dict[str, Any]]] | None:
        """Parse ``text``/``caption`` (parse_mode or explicit entities); no length checks."""
        raw = params.get(name)
        if raw is None or raw == "":
            if required:
                raise _bad("message text is empty")
            return None
        if not isinstance(raw, str):
            raw = json.dumps(raw) if not isinstance(raw, (int, float)) else str(raw)
        if params.get(entities_name) is not None:
            return raw, _explicit_entities(raw, params[entities_name])
        return parse_entities(raw, params.get("parse_mode") or None)

    @staticmethod
    def _finish_text(parsed: tuple[str, list[dict[str, Any]]], *, limit: int,
                     too_long: str, empty: str | None) -> tuple[str, list[dict[str, Any]]]:
        text, entities = _trim(*parsed)
        if not text and empty is not None:
            raise _bad(empty)
        if len(text) > limit:
            raise _bad(too_long)
        return text, entities

    def _reply_to(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        if reply is None and params.get("reply_to_message_id") is not None:
            reply = {"message_id": params["reply_to_message_id"],
                     "allow_sending_without_reply": params.get("allow_sending_without_reply",
                                                               False)}
        if reply is None:
            return None
        if not isinstance(reply, dict):
            raise _bad("can't parse reply parameters JSON object")
        if "message_id" not in reply:
            raise _bad('can\'t find field "message_id"')
        stored = self._messages.get((chat_id, int(reply["message_id"])))
        if stored is None or stored.deleted:
            if reply.get("allow_sending_without_reply"):
                return None
            raise _bad("message to be replied not found")
        return self._reply_copy(stored.message)

    def _store_bot_message(self, msg: dict[str, Any], *, markup: dict[str, Any] | None,
                           raw_text: str | None, parse_mode: str | None) -> None:
        chat_id = msg["chat"]["id"]
        inline = _inline_part(markup)
        if inline is not None:
            msg["reply_markup"] = copy.deepcopy(inline)
        reply_keyboard = markup if markup is not None and "inline_keyboard" not in markup else None
        self._messages[(chat_id, msg["message_id"])] = _Stored(
            msg, by_bot=True, reply_keyboard=copy.deepcopy(reply_keyboard),
            raw_text=raw_text, parse_mode=parse_mode)
        self._bot_messages.append((chat_id, msg["message_id"]))

    def _editable(self, chat_id: int, params: dict[str, Any], missing: str) -> _Stored:
        if params.get("inline_message_id"):
            raise _bad("MESSAGE_ID_INVALID")
        if params.get("message_id") in (None, ""):
            raise _bad("message identifier is not specified")
        if not isinstance(params["message_id"], int):
            raise _bad(missing)
        stored = self._messages.get((chat_id, params["message_id"]))
        if stored is None or stored.deleted:
            raise _bad(missing)
        if not stored.by_bot:
            raise _bad("message can't be edited")
        return stored

    @staticmethod
    def _scope_key(scope: Any, language_code: str | None) -> tuple[str, str]:
        if not scope:
            scope = {"type": "default"}
        if not isinstance(scope, dict) or "type" not in scope:
            raise _bad("can't parse BotCommandScope JSON object")
        return json.dumps(scope, sort_keys=True), language_code or ""

    # -- methods ---------------------------------------------------------------------
    def _m_getme(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        return {**self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False, "can_connect_to_business": False,
                "has_main_web_app": False}

    def _m_logout(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        return True

    def _m_close(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        return True

    def _m_setwebhook(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        url = params.get("url") or ""
        if url and not str(url).lower().startswith("https://"):
            raise _bad("bad webhook: An HTTPS URL must be provided for webhook")
        with self._cond:
            self._webhook["url"] = url
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    def _m_deletewebhook(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            self._webhook["url"] = ""
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    def _m_getwebhookinfo(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            return {**self._webhook, "pending_update_count": len(self._updates)}

    def _m_getupdates(self, params: dict[str, Any], h: _Handler, call: dict[str, Any]) -> Any:
        offset = params.get("offset")
        limit = params.get("limit", 100)
        timeout = params.get("timeout", 0)
        if not isinstance(limit, int):
            limit = 100
        limit = min(100, max(1, limit))
        if not isinstance(timeout, (int, float)) or timeout < 0:
            timeout = 0
        with self._cond:
            if self._webhook["url"]:
                raise ApiError(409, CONFLICT_WEBHOOK)
            if "allowed_updates" in params:
                allowed = params["allowed_updates"]
                self._allowed_updates = set(allowed) if isinstance(allowed, list) and allowed \
                    else None
            if isinstance(offset, int):
                if offset < 0:
                    keep = list(self._updates)[offset:]
                    self._updates = deque(keep)
                else:
                    while self._updates and self._updates[0]["update_id"] < offset:
                        self._updates.popleft()
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            last_check = 0.0
            while True:
                if self._stopping.is_set():
                    raise _ClientGone("stopping")
                if self._poll_generation != generation:
                    break  # superseded by a newer getUpdates
                batch = self._deliverable(limit)
                now = time.monotonic()
                if batch or now >= deadline:
                    return batch
                if now - last_check >= 0.1:
                    last_check = now
                    if h._client_gone():
                        raise _ClientGone("poller went away")
                self._cond.wait(min(0.05, deadline - now))
        # Superseded: the real server answers the older request with 409.
        if h._client_gone():
            raise _ClientGone("superseded poller already gone")
        raise ApiError(409, CONFLICT_POLLER)

    def _deliverable(self, limit: int) -> list[dict[str, Any]]:
        allowed = self._allowed_updates
        out = []
        for update in list(self._updates):
            kind = next(k for k in update if k != "update_id")
            wanted = (kind in allowed) if allowed is not None \
                else kind not in _UPDATE_TYPES_DEFAULT_EXCLUDED
            if not wanted:
                self._updates.remove(update)  # filtered updates are dropped
                continue
            out.append(copy.deepcopy(update))
            if len(out) >= limit:
                break
        return out

    def _m_sendmessage(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            if params.get("chat_id") in (None, ""):
                raise _bad("chat_id is empty")
            parsed = self._prepare_text(params, "text", "entities", required=True)
            assert parsed is not None
            markup = _check_markup(params.get("reply_markup"))
            chat = self._require_chat(params)
            text, entities = self._finish_text(parsed, limit=MAX_MESSAGE_LENGTH,
                                               too_long="message is too long",
                                               empty="text must be non-empty")
            reply_to = self._reply_to(chat["id"], params)
            self._check_flood("sendMessage", chat["id"])
            msg = self._new_message(chat["id"], chat, self.bot_user)
            if reply_to is not None:
                msg["reply_to_message"] = reply_to
            msg["text"] = text
            if entities:
                msg["entities"] = entities
            self._store_bot_message(msg, markup=markup, raw_text=params.get("text"),
                                    parse_mode=params.get("parse_mode"))
            return copy.deepcopy(msg)

    def _m_senddocument(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            if params.get("chat_id") in (None, ""):
                raise _bad("chat_id is empty")
            upload = files.get("document")
            ref = params.get("document")
            if isinstance(ref, str) and ref.startswith("attach://"):
                upload = files.get(ref[len("attach://"):])
                ref = None
            if upload is None and not ref:
                raise _bad("there is no document in the request")
            parsed = self._prepare_text(params, "caption", "caption_entities", required=False)
            markup = _check_markup(params.get("reply_markup"))
            chat = self._require_chat(params)
            caption, caption_entities = ("", [])
            if parsed is not None:
                caption, caption_entities = self._finish_text(
                    parsed, limit=MAX_CAPTION_LENGTH, too_long="message caption is too long",
                    empty=None)
            if upload is not None:
                if not upload.content:
                    raise _bad("file must be non-empty")
                if len(upload.content) > MAX_UPLOAD_BYTES:
                    raise ApiError(413, "Request Entity Too Large")
                info = self._new_file(upload.filename, upload.content, upload.content_type)
            else:
                info = self._files.get(str(ref))
                if info is None:
                    if not re.match(r"https?://", str(ref)):
                        raise _bad("wrong file identifier/HTTP URL specified")
                    name = urlsplit(str(ref)).path.rsplit("/", 1)[-1] or "file"
                    info = self._new_file(name, None, None)
            reply_to = self._reply_to(chat["id"], params)
            self._check_flood("sendDocument", chat["id"])
            msg = self._new_message(chat["id"], chat, self.bot_user)
            if reply_to is not None:
                msg["reply_to_message"] = reply_to
            document = {"file_name": info["file_name"], "file_id": info["file_id"],
                        "file_unique_id": info["file_unique_id"]}
            if info["mime_type"]:
                document["mime_type"] = info["mime_type"]
            if info["bytes"] is not None:
                document["file_size"] = len(info["bytes"])
            msg["document"] = document
            if caption:
                msg["caption"] = caption
                if caption_entities:
                    msg["caption_entities"] = caption_entities
            self._store_bot_message(msg, markup=markup, raw_text=params.get("caption"),
                                    parse_mode=params.get("parse_mode"))
            self._documents.append({
                "chat_id": chat["id"], "message_id": msg["message_id"],
                "filename": info["file_name"], "bytes": info["bytes"],
                "mime_type": info["mime_type"], "caption": caption or None,
                "raw_caption": params.get("caption"), "parse_mode": params.get("parse_mode"),
                "file_id": info["file_id"],
            })
            return copy.deepcopy(msg)

    def _new_file(self, filename: str, content: bytes | None,
                  content_type: str | None) -> dict[str, Any]:
        n = next(self._file_ids)
        mime = content_type
        if not mime or mime == "application/octet-stream":
            mime = mimetypes.guess_type(filename, strict=False)[0] or mime
        suffix = filename.rsplit(".", 1)[-1] if "." in filename else "bin"
        info = {
            "file_id": f"BQACAgIAAxkDAAI{n:08d}FakeDocument",
            "file_unique_id": f"AgAD{n:06d}",
            "file_name": filename,
            "mime_type": mime,
            "bytes": content,
            "file_path": f"documents/file_{n}.{suffix}",
        }
        self._files[info["file_id"]] = info
        return info

    def _m_getfile(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            info = self._files.get(str(params.get("file_id", "")))
            if info is None:
                raise _bad("invalid file_id")
            out = {"file_id": info["file_id"], "file_unique_id": info["file_unique_id"],
                   "file_path": info["file_path"]}
            if info["bytes"] is not None:
                out["file_size"] = len(info["bytes"])
            return out

    def _m_editmessagetext(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            parsed = self._prepare_text(params, "text", "entities", required=True)
            assert parsed is not None
            markup = _check_markup(params.get("reply_markup"))
            if markup is not None and "inline_keyboard" not in markup:
                raise _bad("inline keyboard expected")
            chat = self._require_chat(params)
            stored = self._editable(chat["id"], params, "message to edit not found")
            if "text" not in stored.message:
                raise _bad("there is no text in the message to edit")
            text, entities = self._finish_text(parsed, limit=MAX_MESSAGE_LENGTH,
                                               too_long="message is too long",
                                               empty="text must be non-empty")
            old = stored.message
            new_markup = _inline_part(markup)
            if (old.get("text") == text and old.get("entities", []) == entities
                    and old.get("reply_markup") == new_markup):
                raise _bad(NOT_MODIFIED)
            self._check_flood("editMessageText", chat["id"])
            old["text"] = text
            if entities:
                old["entities"] = entities
            else:
                old.pop("entities", None)
            self._set_markup(old, new_markup)
            old["edit_date"] = int(time.time())
            stored.edits += 1
            stored.raw_text = params.get("text")
            stored.parse_mode = params.get("parse_mode")
            return copy.deepcopy(old)

    def _m_editmessagecaption(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            parsed = self._prepare_text(params, "caption", "caption_entities", required=False)
            markup = _check_markup(params.get("reply_markup"))
            if markup is not None and "inline_keyboard" not in markup:
                raise _bad("inline keyboard expected")
            chat = self._require_chat(params)
            stored = self._editable(chat["id"], params, "message to edit not found")
            if "text" in stored.message:
                raise _bad("there is no caption in the message to edit")
            caption, caption_entities = ("", [])
            if parsed is not None:
                caption, caption_entities = self._finish_text(
                    parsed, limit=MAX_CAPTION_LENGTH, too_long="message caption is too long",
                    empty=None)
            old = stored.message
            new_markup = _inline_part(markup)
            if (old.get("caption", "") == caption
                    and old.get("caption_entities", []) == caption_entities
                    and old.get("reply_markup") == new_markup):
                raise _bad(NOT_MODIFIED)
            self._check_flood("editMessageCaption", chat["id"])
            old.pop("caption", None)
            old.pop("caption_entities", None)
            if caption:
                old["caption"] = caption
                if caption_entities:
                    old["caption_entities"] = caption_entities
            self._set_markup(old, new_markup)
            old["edit_date"] = int(time.time())
            stored.edits += 1
            stored.raw_text = params.get("caption")
            stored.parse_mode = params.get("parse_mode")
            return copy.deepcopy(old)

    def _m_editmessagereplymarkup(self, params: dict[str, Any],
                                  files: dict[str, Upload]) -> Any:
        with self._cond:
            markup = _check_markup(params.get("reply_markup"))
            if markup is not None and "inline_keyboard" not in markup:
                raise _bad("inline keyboard expected")
            chat = self._require_chat(params)
            stored = self._editable(chat["id"], params, "message to edit not found")
            new_markup = _inline_part(markup)
            if stored.message.get("reply_markup") == new_markup:
                raise _bad(NOT_MODIFIED)
            self._check_flood("editMessageReplyMarkup", chat["id"])
            self._set_markup(stored.message, new_markup)
            stored.message["edit_date"] = int(time.time())
            stored.edits += 1
            return copy.deepcopy(stored.message)

    @staticmethod
    def _set_markup(message: dict[str, Any], markup: dict[str, Any] | None) -> None:
        if markup is None:
            message.pop("reply_markup", None)
        else:
            message["reply_markup"] = copy.deepcopy(markup)

    def _m_deletemessage(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            chat = self._require_chat(params)
            message_id = params.get("message_id")
            if message_id in (None, ""):
                raise _bad("message identifier is not specified")
            stored = self._messages.get((chat["id"], message_id)) \
                if isinstance(message_id, int) else None
            if stored is None or stored.deleted:
                raise _bad("message to delete not found")
            stored.deleted = True
            return True

    def _m_deletemessages(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            chat = self._require_chat(params)
            ids = params.get("message_ids")
            if not isinstance(ids, list) or not 1 <= len(ids) <= 100:
                raise _bad("message_ids must be a non-empty array of at most 100 elements")
            found = False
            for message_id in ids:
                stored = self._messages.get((chat["id"], message_id))
                if stored is not None and not stored.deleted:
                    stored.deleted = True
                    found = True
            if not found:
                raise _bad("message to delete not found")
            return True

    def _m_answercallbackquery(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            query_id = str(params.get("callback_query_id") or "")
            if not query_id:
                raise _bad("callback_query_id is empty")
            text = params.get("text")
            if text is not None and len(str(text)) > MAX_CALLBACK_ANSWER_LENGTH:
                raise _bad("MESSAGE_TOO_LONG")
            query = self._callbacks.get(query_id)
            if (query is None or query["answered"] or time.monotonic() - query["created"]
                    > self.callback_answer_timeout):
                raise _bad(QUERY_TOO_OLD)
            query["answered"] = True
            self._callback_answers.append({
                "callback_query_id": query_id, "text": text,
                "show_alert": bool(params.get("show_alert", False)),
                "url": params.get("url"), "cache_time": params.get("cache_time"),
                "data": query["data"], "chat_id": query["chat_id"],
                "message_id": query["message_id"],
            })
            return True

    def _m_setmycommands(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise _bad("can't parse commands JSON object")
        if len(commands) > MAX_COMMANDS:
            raise _bad("too much commands specified")
        clean = []
        for c in commands:
            if not isinstance(c, dict):
                raise _bad("can't parse BotCommand: BotCommand must be an Object")
            command, description = c.get("command"), c.get("description")
            if command is None:
                raise _bad('can\'t parse BotCommand: Can\'t find field "command"')
            if description is None:
                raise _bad('can\'t parse BotCommand: Can\'t find field "description"')
            command = str(command).removeprefix("/")
            if not re.fullmatch(r"[a-z0-9_]{1,32}", command):
                raise _bad("BOT_COMMAND_INVALID")
            if not 1 <= len(str(description).strip()) <= 256:
                raise _bad("BOT_COMMAND_DESCRIPTION_INVALID")
            clean.append({"command": command, "description": str(description)})
        key = self._scope_key(params.get("scope"), params.get("language_code"))
        with self._cond:
            self._commands[key] = clean
        return True

    def _m_getmycommands(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        key = self._scope_key(params.get("scope"), params.get("language_code"))
        with self._cond:
            return copy.deepcopy(self._commands.get(key, []))

    def _m_deletemycommands(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        key = self._scope_key(params.get("scope"), params.get("language_code"))
        with self._cond:
            self._commands.pop(key, None)
        return True

    def _m_sendchataction(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            chat = self._require_chat(params)
            if params.get("action") not in _CHAT_ACTIONS:
                raise _bad("wrong parameter action in request")
            del chat
            return True

    def _m_getchat(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            chat = copy.deepcopy(self._require_chat(params))
        chat.update({
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {"unlimited_gifts": False, "limited_gifts": False,
                                    "unique_gifts": False, "premium_subscription": False,
                                    "gifts_from_channels": False},
        })
        return chat
