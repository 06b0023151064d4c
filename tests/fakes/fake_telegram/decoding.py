"""Decoding of Bot API requests: query strings, form, multipart and JSON bodies."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from tests.fakes.fake_telegram.api import ApiError, _bad

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
