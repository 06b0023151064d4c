"""Slack's request signature: v0=HMAC-SHA256(signing secret, "v0:{timestamp}:{raw body}")."""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, timestamp: int | str, body: str) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
