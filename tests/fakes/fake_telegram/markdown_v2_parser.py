"""A port of tdlib's MarkdownV2 entity parser (``parse_mode=MarkdownV2``)."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.fake_telegram.api import ApiError, _entities_error
from tests.fakes.fake_telegram.text import _byte_offset, _link_entity, _sorted_entities, _u16

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
