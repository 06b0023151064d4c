"""UTF-16 lengths, entity ordering and link checks shared by the entity parsers."""

from __future__ import annotations

import re
from typing import Any


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: the unit of entity offsets and lengths."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _u16(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _byte_offset(text: str, i: int) -> int:
    return len(text[:i].encode("utf-8", "surrogatepass"))


def _sorted_entities(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        (e for e in entities if e["length"] > 0), key=lambda e: (e["offset"], -e["length"])
    )


def _valid_http_url(url: str) -> str | None:
    """None if ``url`` is acceptable as a link, else the reason as tdlib words it."""
    if not url:
        return "URL host is empty"
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if m:
        scheme = m.group(1).lower()
        rest = url[m.end():]
        if scheme == "tg":
            return None if rest else "Wrong HTTP URL"
        if scheme not in ("http", "https", "ton"):
            return "Unsupported URL protocol"
    else:
        rest = url
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    if not host:
        return "URL host is empty"
    if "." not in host and host.lower() != "localhost":
        return "Wrong HTTP URL"
    if not re.fullmatch(r"[\w.-]+", host):
        return "Wrong HTTP URL"
    return None


def _link_entity(offset: int, length: int, url: str) -> dict[str, Any] | None:
    m = re.fullmatch(r"tg://user\?id=(\d+)", url)
    if m:
        return {"type": "text_mention", "offset": offset, "length": length,
                "user": {"id": int(m.group(1)), "is_bot": False, "first_name": ""}}
    if _valid_http_url(url) is not None:
        return None  # tdlib silently drops links with an invalid URL
    return {"type": "text_link", "offset": offset, "length": length, "url": url}
