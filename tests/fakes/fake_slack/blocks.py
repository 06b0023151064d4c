"""Block Kit as Slack checks it: the limits a message or a view must keep, with Slack's own
error shapes (`invalid_blocks` with json-pointer messages, `msg_too_long`)."""

from __future__ import annotations

from typing import Any

MESSAGE_BLOCKS, VIEW_BLOCKS = 50, 100
SECTION_TEXT = 3000
FIELD_TEXT, FIELDS = 2000, 10
HEADER_TEXT = 150
ACTIONS_ELEMENTS, CONTEXT_ELEMENTS = 25, 10
BUTTON_TEXT, BUTTON_VALUE = 75, 2000
ID_CHARS = 255
MESSAGE_TEXT_REFUSED = 13_200  # Slack refuses a message with about this much text in its blocks
TOP_TEXT_CUT = 40_000  # the top-level text is cut, not refused
VIEW_TITLE = 24
MODAL_INPUT_HINT = 2000


def _too_long(limit: int, pointer: str) -> str:
    return f"must be less than {limit + 1} characters [json-pointer:{pointer}]"


def _text(obj: Any, limit: int, pointer: str, errors: list[str]) -> int:
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        errors.append(f"must provide an object [json-pointer:{pointer}]")
        return 0
    text = obj["text"]
    if obj.get("type") not in ("mrkdwn", "plain_text"):
        errors.append(f"must be a valid enum value [json-pointer:{pointer}/type]")
    if not text:
        errors.append(f"must be more than 0 characters [json-pointer:{pointer}/text]")
    if len(text) > limit:
        errors.append(_too_long(limit, f"{pointer}/text"))
    return len(text)


def _button(el: dict[str, Any], pointer: str, errors: list[str]) -> None:
    _text(el.get("text"), BUTTON_TEXT, f"{pointer}/text", errors)
    if len(str(el.get("value", ""))) > BUTTON_VALUE:
        errors.append(_too_long(BUTTON_VALUE, f"{pointer}/value"))
    if el.get("style") not in (None, "primary", "danger"):
        errors.append(f"must be a valid enum value [json-pointer:{pointer}/style]")
    confirm = el.get("confirm")
    if confirm is not None:
        for part in ("title", "text", "confirm", "deny"):
            if part in confirm or part in ("title", "text", "confirm"):
                _text(confirm.get(part), 300 if part == "text" else 100,
                      f"{pointer}/confirm/{part}", errors)


def _section(block: dict[str, Any], pointer: str, errors: list[str]) -> int:
    size = 0
    if "text" in block:
        size += _text(block["text"], SECTION_TEXT, f"{pointer}/text", errors)
    fields = block.get("fields") or []
    if len(fields) > FIELDS:
        errors.append(f"must be less than {FIELDS + 1} items [json-pointer:{pointer}/fields]")
    for i, f in enumerate(fields):
        size += _text(f, FIELD_TEXT, f"{pointer}/fields/{i}", errors)
    if "text" not in block and not fields:
        errors.append(f"must provide text or fields [json-pointer:{pointer}]")
    return size


def _header(block: dict[str, Any], pointer: str, errors: list[str]) -> int:
    return _text(block.get("text"), HEADER_TEXT, f"{pointer}/text", errors)


def _context(block: dict[str, Any], pointer: str, errors: list[str]) -> int:
    elements = block.get("elements") or []
    if not elements or len(elements) > CONTEXT_ELEMENTS:
        errors.append(f"must have 1 to {CONTEXT_ELEMENTS} items [json-pointer:{pointer}/elements]")
    return sum(_text(e, SECTION_TEXT, f"{pointer}/elements/{i}", errors)
               for i, e in enumerate(elements))


def _actions(block: dict[str, Any], pointer: str, errors: list[str]) -> int:
    elements = block.get("elements") or []
    if not elements or len(elements) > ACTIONS_ELEMENTS:
        errors.append(f"must have 1 to {ACTIONS_ELEMENTS} items [json-pointer:{pointer}/elements]")
    ids = [e.get("action_id") for e in elements]
    if len(set(ids)) != len(ids):
        errors.append(f"action_id must be unique in a block [json-pointer:{pointer}]")
    for i, el in enumerate(elements):
        if len(str(el.get("action_id", ""))) > ID_CHARS:
            errors.append(_too_long(ID_CHARS, f"{pointer}/elements/{i}/action_id"))
        if el.get("type") == "button":
            _button(el, f"{pointer}/elements/{i}", errors)
    return 0


def _nothing(block: dict[str, Any], pointer: str, errors: list[str]) -> int:
    return 0


KINDS = {"section": _section, "header": _header, "context": _context, "actions": _actions,
         "divider": _nothing, "input": _nothing, "image": _nothing, "rich_text": _nothing}


def _block(block: dict[str, Any], pointer: str, errors: list[str]) -> int:
    """Checks one block; returns the characters of text it holds."""
    if len(str(block.get("block_id", ""))) > ID_CHARS:
        errors.append(_too_long(ID_CHARS, f"{pointer}/block_id"))
    check = KINDS.get(str(block.get("type")))
    if check is None:
        errors.append(f"must be a valid enum value [json-pointer:{pointer}/type]")
        return 0
    return check(block, pointer, errors)


def check_blocks(blocks: Any, *, view: bool = False) -> tuple[list[str], int]:
    """Slack's complaints about `blocks` (empty: it takes them), and their text length."""
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"], 0
    errors: list[str] = []
    limit = VIEW_BLOCKS if view else MESSAGE_BLOCKS
    if len(blocks) > limit:
        errors.append(f"must be less than {limit + 1} items [json-pointer:/blocks]")
    size = sum(_block(b, f"/blocks/{i}", errors) for i, b in enumerate(blocks))
    return errors, size
