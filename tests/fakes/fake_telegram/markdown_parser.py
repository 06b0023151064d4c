"""A port of tdlib's legacy Markdown entity parser (``parse_mode=Markdown``)."""

from __future__ import annotations

from typing import Any

from tests.fakes.fake_telegram.api import _entities_error
from tests.fakes.fake_telegram.text import _byte_offset, _link_entity, _sorted_entities, _u16


class _MarkdownParser:
    """A port of tdlib's parse_markdown (the legacy ``parse_mode=Markdown``)."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.i = 0
        self.out: list[str] = []
        self.u16 = 0
        self.entities: list[dict[str, Any]] = []

    def at(self, k: int) -> str:
        return self.text[k] if 0 <= k < self.n else ""

    def parse(self) -> tuple[str, list[dict[str, Any]]]:
        while self.i < self.n:
            c = self.text[self.i]
            if c == "\\" and self.at(self.i + 1) in ("_", "*", "`", "["):
                self.out.append(self.text[self.i + 1])
                self.u16 += 1
                self.i += 2
            elif c not in "_*`[":
                self.out.append(c)
                self.u16 += _u16(c)
                self.i += 1
            else:
                self.entity(c)
        return "".join(self.out), _sorted_entities(self.entities)

    def entity(self, c: str) -> None:
        text = self.text
        begin = self.i
        end_char = "]" if c == "[" else c
        self.i += 1
        is_pre = c == "`" and self.at(self.i) == "`" and self.at(self.i + 1) == "`"
        language = self.begin_pre() if is_pre else ""
        offset, start_pos = self.u16, len(self.out)
        while self.i < self.n and (
                text[self.i] != end_char
                or (is_pre and not (self.at(self.i + 1) == "`" and self.at(self.i + 2) == "`"))):
            self.out.append(text[self.i])
            self.u16 += _u16(text[self.i])
            self.i += 1
        if self.i >= self.n:
            raise _entities_error("Can't find end of the entity starting at byte offset "
                                  f"{_byte_offset(text, begin)}")
        length = self.u16 - offset
        entity: dict[str, Any] | None = None
        if c == "[":
            url = "".join(self.out[start_pos:])
            if self.at(self.i + 1) == "(":
                end = text.find(")", self.i + 2)
                end = self.n if end < 0 else end
                url, self.i = text[self.i + 2:end], end
            entity = _link_entity(offset, length, url)
        elif c in "_*":
            entity = {"type": "italic" if c == "_" else "bold", "offset": offset,
                      "length": length}
        else:
            entity = {"type": "pre" if is_pre else "code", "offset": offset, "length": length}
            if language:
                entity["language"] = language
        if entity is not None and length > 0:
            self.entities.append(entity)
        self.i += 3 if is_pre else 1

    def begin_pre(self) -> str:
        text = self.text
        self.i += 2
        language = ""
        lang_end = self.i
        while lang_end < self.n and text[lang_end] not in " \t\r\n`":
            lang_end += 1
        if self.i != lang_end and lang_end < self.n and text[lang_end] != "`":
            language = text[self.i:lang_end]
            self.i = lang_end
        if self.at(self.i) in ("\n", "\r"):
            double = self.at(self.i + 1) in ("\n", "\r") and self.at(self.i) != self.at(self.i + 1)
            self.i += 2 if double else 1
        return language


def parse_markdown(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse legacy Markdown into ``(plain_text, entities)``; raise ApiError like the server."""
    return _MarkdownParser(text).parse()
