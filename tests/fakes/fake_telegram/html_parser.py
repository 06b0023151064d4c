"""A port of tdlib's HTML entity parser (``parse_mode=HTML``)."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.fake_telegram.api import ApiError, _entities_error
from tests.fakes.fake_telegram.text import _byte_offset, _link_entity, _sorted_entities, _u16

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
