"""Validation of ``reply_markup`` (inline and reply keyboards) as the Bot API does it."""

from __future__ import annotations

from typing import Any

from tests.fakes.fake_telegram.api import MAX_CALLBACK_DATA_BYTES, MAX_COPY_TEXT_LENGTH, _bad
from tests.fakes.fake_telegram.text import _valid_http_url

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
