"""Bot API methods: answerCallbackQuery, bot commands, sendChatAction and getChat."""

from __future__ import annotations

import copy
import re
import time
from typing import Any

from tests.fakes.fake_telegram.api import (
    MAX_CALLBACK_ANSWER_LENGTH,
    MAX_COMMANDS,
    QUERY_TOO_OLD,
    _bad,
)
from tests.fakes.fake_telegram.decoding import Upload
from tests.fakes.fake_telegram.helpers import _Helpers

_CHAT_ACTIONS = {
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
}


class _ChatMethods(_Helpers):
    """answerCallbackQuery, *MyCommands, sendChatAction and getChat."""

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
