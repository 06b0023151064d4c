"""Text to ``(plain_text, entities)``: parse_mode dispatch, trimming, explicit entities."""

from __future__ import annotations

from typing import Any

from tests.fakes.fake_telegram.api import _bad
from tests.fakes.fake_telegram.html_parser import parse_html
from tests.fakes.fake_telegram.markdown_parser import parse_markdown
from tests.fakes.fake_telegram.markdown_v2_parser import parse_markdown_v2
from tests.fakes.fake_telegram.text import _sorted_entities, _valid_http_url, utf16_len


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
        length = _check_span(e.get("offset"), e.get("length"), total)
        _check_fields(kind, e)
        if length > 0:
            out.append(dict(e))
    return _sorted_entities(out)


def _check_span(offset: Any, length: Any, total: int) -> int:
    """The entity's length, once its offset and length are checked against the text's."""
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
    return length


def _check_fields(kind: str, e: dict[str, Any]) -> None:
    """The fields that some entity types require (text_link's url, text_mention's user...)."""
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
