"""The test-facing ``FakeTelegram``: lifecycle, set-up, acting as users, inspection, faults."""

from __future__ import annotations

import asyncio
import copy
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from tests.fakes._http import LoopbackServer, serve_in_thread, stop_serving
from tests.fakes.fake_telegram.dispatch import _Dispatch
from tests.fakes.fake_telegram.keyboards import _callback_datas
from tests.fakes.fake_telegram.messages import _document
from tests.fakes.fake_telegram.server import _Handler
from tests.fakes.fake_telegram.state import _Bucket, _Fault, _method_set, _Stored
from tests.fakes.fake_telegram.text import utf16_len


class FakeTelegram(_Dispatch):
    """A loopback Telegram Bot API. All public methods are thread-safe.

    Set-up: ``add_chat``, ``add_user``. Acting as users: ``user_sends``, ``user_taps``
    (queue Updates for getUpdates). Inspection: ``sent``, ``last_sent``, ``texts``,
    ``message``, ``calls``, ``callback_answers``, ``documents``, ``commands``, ``errors``,
    ``pending_updates``. Fault injection: ``rate_limit``, ``flood``, ``fail_next``,
    ``hang_next``, ``outage``, ``release_hangs``. Waiting: ``wait_for`` (async),
    ``wait_for_sync``. Hook: ``on_request(method, params) -> None | result | ApiError``.
    """

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeTelegram:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = LoopbackServer((self.host, self.port), _Handler, self,
                                      lambda error: self._internal_errors.append(error))
        self.port = self._server.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        self._thread = serve_in_thread(self._server, f"FakeTelegram:{self.port}")
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        stop_serving(server, thread)

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

    def user_sends_file(self, user_id: int, content: bytes, *, filename: str = "file.bin",
                        photo: bool = False, caption: str | None = None,
                        mime_type: str | None = None, chat_id: int | None = None,
                        reply_to_message_id: int | None = None) -> dict[str, Any]:
        """Queue an Update carrying a Message with a document (``file_name``, ``mime_type``,
        ``file_size``) or, with ``photo``, a photo (PhotoSize array, largest last, no name:
        Telegram drops a photo's name), as the real Bot API delivers them; the bytes are then
        served by getFile and ``/file/bot<token>/<file_path>``. Returns the Update."""
        with self._cond:
            user = self._user(user_id)
            chat_id = int(user_id if chat_id is None else chat_id)
            chat = self._chat_for_update(chat_id)
            msg = self._new_message(chat_id, chat, user)
            if photo:
                info = self._new_file("photo.jpg", content, mime_type or "image/jpeg",
                                      folder="photos")
                small = {"file_id": info["file_id"] + "s", "file_unique_id":
                         info["file_unique_id"] + "s", "width": 90, "height": 90,
                         "file_size": min(len(content), 1000)}
                msg["photo"] = [small, {"file_id": info["file_id"],
                                        "file_unique_id": info["file_unique_id"],
                                        "width": 800, "height": 600,
                                        "file_size": len(content)}]
            else:
                info = self._new_file(filename, content, mime_type)
                msg["document"] = _document(info)
            if caption is not None:
                msg["caption"] = caption
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
