"""Shared helpers of the Bot API method handlers (called with the lock held)."""

from __future__ import annotations

import copy
import json
import math
import time
from typing import Any

from tests.fakes.fake_telegram.api import ApiError, _bad
from tests.fakes.fake_telegram.entities import _explicit_entities, _trim, parse_entities
from tests.fakes.fake_telegram.keyboards import _inline_part
from tests.fakes.fake_telegram.state import _State, _Stored

# Methods that put (or change) a message in a chat: subject to flood control.
_FLOOD_METHODS = {
    "sendmessage", "senddocument", "sendphoto", "editmessagetext", "editmessagecaption",
    "editmessagereplymarkup", "copymessage", "forwardmessage",
}


class _Helpers(_State):
    """Lookups, text and flood checks shared by the ``_m_*`` method handlers."""

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
