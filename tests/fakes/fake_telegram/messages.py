"""Bot API methods: sending, editing and deleting messages and documents; getFile."""

from __future__ import annotations

import copy
import mimetypes
import re
import time
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.fake_telegram.api import (
    MAX_CAPTION_LENGTH,
    MAX_DOWNLOAD_BYTES,
    MAX_MESSAGE_LENGTH,
    MAX_UPLOAD_BYTES,
    NOT_MODIFIED,
    ApiError,
    _bad,
)
from tests.fakes.fake_telegram.decoding import Upload
from tests.fakes.fake_telegram.helpers import _Helpers
from tests.fakes.fake_telegram.keyboards import _check_markup, _inline_part


class _MessageMethods(_Helpers):
    """sendMessage, sendDocument, getFile, edit* and delete* methods."""

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
            info = self._document_file(upload, ref)
            reply_to = self._reply_to(chat["id"], params)
            self._check_flood("sendDocument", chat["id"])
            msg = self._new_message(chat["id"], chat, self.bot_user)
            if reply_to is not None:
                msg["reply_to_message"] = reply_to
            msg["document"] = _document(info)
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

    def _document_file(self, upload: Upload | None, ref: Any) -> dict[str, Any]:
        """The file a sendDocument sends: a new upload, a known file_id or an HTTP URL."""
        if upload is not None:
            if not upload.content:
                raise _bad("file must be non-empty")
            if len(upload.content) > MAX_UPLOAD_BYTES:
                raise ApiError(413, "Request Entity Too Large")
            return self._new_file(upload.filename, upload.content, upload.content_type)
        info = self._files.get(str(ref))
        if info is None:
            if not re.match(r"https?://", str(ref)):
                raise _bad("wrong file identifier/HTTP URL specified")
            name = urlsplit(str(ref)).path.rsplit("/", 1)[-1] or "file"
            info = self._new_file(name, None, None)
        return info

    def _new_file(self, filename: str, content: bytes | None,
                  content_type: str | None, *, folder: str = "documents") -> dict[str, Any]:
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
            "file_path": f"{folder}/file_{n}.{suffix}",
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
                if len(info["bytes"]) > MAX_DOWNLOAD_BYTES:  # a bot downloads 20 MB at most
                    raise _bad("file is too big")
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


def _document(info: dict[str, Any]) -> dict[str, Any]:
    """The Document object of a message that carries the file `info`."""
    document = {"file_name": info["file_name"], "file_id": info["file_id"],
                "file_unique_id": info["file_unique_id"]}
    if info["mime_type"]:
        document["mime_type"] = info["mime_type"]
    if info["bytes"] is not None:
        document["file_size"] = len(info["bytes"])
    return document
