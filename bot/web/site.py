"""What the web side adds to the listener: sign-in (bot/web/auth.py), the HTTP API
(bot/web/http_api.py) and the console's pages."""

from __future__ import annotations

from bot.web import auth, http_api
from bot.web.listener import Listener


def install_web(listener: Listener) -> None:
    """Every route of the web console and the HTTP API, on `listener` (before it starts)."""
    listener.install(auth.install)
    listener.install(http_api.install)


__all__ = ["install_web"]
