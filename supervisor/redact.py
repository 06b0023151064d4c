"""Secret redaction for log lines and audit rows: known secret values and secret-shaped text.

Two layers, applied to finished text (a formatted log line with its arguments and traceback,
or an audit field): every value registered with a `Redactor` (the settings' secrets, codes
issued at run time) in the forms it is printed in (raw, URL-quoted, JSON/repr-escaped), then
generic patterns for secrets nobody registered: Telegram bot tokens, Slack and Anthropic keys,
Authorization headers, `secret_token=…`-style fields, PEM private keys, passwords in URLs and
invite codes after `/start`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from urllib.parse import quote

MASK = "***"
# Shorter values are not registered: masking every "true" or "1234" would wreck the log, and a
# value that short protects nothing anyway.
MIN_SECRET_CHARS = 6

_KEYS = (r"x-api-key|x-telegram-bot-api-secret-token|x-slack-signature|secret_token|"
         r"client_secret|signing_secret|api_key|apikey|password|passwd|private_key_id")


def _auth_header(m: re.Match[str]) -> str:
    scheme = f"{m.group(2)} " if m.group(2) else ""
    return f"{m.group(1)}{scheme}{MASK}"


_Replacement = str | Callable[[re.Match[str]], str]
PATTERNS: tuple[tuple[re.Pattern[str], _Replacement], ...] = (
    # PEM private keys, whole or cut off, with real or escaped newlines.
    (re.compile(r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----(?:.*?-----END \1PRIVATE KEY-----|"
                r"[A-Za-z0-9+/=\s\\]*)", re.S), f"-----BEGIN \\1PRIVATE KEY-----{MASK}"),
    # Telegram: the token in Bot API URLs (/bot<id>:<secret>/getUpdates, ':' maybe as %3A) ...
    (re.compile(r"/bot[0-9]+(?::|%3[Aa])[^/\s'\"?#&]+"), f"/bot{MASK}"),
    # ... and on its own.
    (re.compile(r"(?<![0-9])[0-9]{5,}(?::|%3[Aa])[A-Za-z0-9_-]{30,}"), MASK),
    # Slack bot/user/app tokens.
    (re.compile(r"\b(xox[a-z]|xapp)-[A-Za-z0-9-]{6,}"), f"\\1-{MASK}"),
    # Anthropic API keys.
    (re.compile(r"\bsk-ant-[A-Za-z0-9_-]{6,}"), f"sk-ant-{MASK}"),
    # Authorization headers, as text or in a dict repr, with or without a scheme.
    (re.compile(r"(?i)\b((?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)"
                r"(?:(bearer|basic|token|bot)\s+)?[^\s'\",;}]+"), _auth_header),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{6,}"), f"\\1 {MASK}"),
    # Named secret fields: headers, form fields, query parameters, dict reprs.
    (re.compile(rf"(?i)\b((?:{_KEYS})['\"]?\s*[:=]\s*['\"]?)[^\s'\",&;}}]{{4,}}"), f"\\1{MASK}"),
    (re.compile(r"(?i)\b((?:\w+_)?token['\"]?\s*[:=]\s*['\"]?)[A-Za-z0-9._~+/:=-]{8,}"),
     f"\\1{MASK}"),
    # A password in a URL: scheme://user:password@host.
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]*:)[^@\s/'\"]+@"), f"\\1{MASK}@"),
    # Invite codes: what follows /start (or a deep link's start=) is one.
    (re.compile(r"(/start(?:@\w+)?[ \t]+)[^\s'\"\\,<>}\]]+"), f"\\1{MASK}"),
    (re.compile(r"([?&]start=)[^&\s'\"]+"), f"\\1{MASK}"),
)


def _forms(value: str) -> set[str]:
    """How a value shows up in text: as is, URL-quoted (the Bot API's file URLs quote the
    token's ':'), and escaped inside a JSON string or a repr."""
    return {value, quote(value, safe=""), quote(value), json.dumps(value)[1:-1],
            repr(value)[1:-1]}


class Redactor:
    """Replaces registered secret values and secret-shaped text with ***. Thread-safe: log
    records arrive from any thread, and values are added while the process runs."""

    def __init__(self, values: Iterable[str] = (), *,
                 patterns: tuple[tuple[re.Pattern[str], _Replacement], ...] = PATTERNS) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._known: re.Pattern[str] | None = None
        self.patterns = patterns
        self.add(*values)

    def add(self, *values: str | None) -> None:
        fresh = {form for v in values if v and len(v) >= MIN_SECRET_CHARS for form in _forms(v)}
        with self._lock:
            if fresh <= self._values:
                return
            self._values |= fresh
            # Longest first, so a value never leaves a tail of a longer one that contains it.
            ordered = sorted(self._values, key=len, reverse=True)
            self._known = re.compile("|".join(map(re.escape, ordered)))

    def __call__(self, text: str) -> str:
        known = self._known
        if known is not None:
            text = known.sub(MASK, text)
        for pattern, replacement in self.patterns:
            text = pattern.sub(replacement, text)
        return text


# The process-wide redactor: the entry point fills it from the settings and installs it on its
# log handlers; whatever issues a secret while running (invite codes, a generated webhook
# secret) adds it here.
SECRETS = Redactor()


class RedactingFormatter(logging.Formatter):
    """Wraps a handler's formatter: formats the record completely (message with its arguments,
    traceback, stack) and only then redacts the result, so nothing escapes through args."""

    def __init__(self, inner: logging.Formatter | None = None,
                 redact: Callable[[str], str] = SECRETS) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(self.inner.format(record))


def install(handler: logging.Handler, redact: Callable[[str], str] = SECRETS) -> None:
    """Make `handler` redact everything it writes (idempotent)."""
    current = handler.formatter
    if isinstance(current, RedactingFormatter):
        current.redact = redact
        return
    handler.setFormatter(RedactingFormatter(current, redact))
