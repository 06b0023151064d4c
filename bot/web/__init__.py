"""The web side of Switchboard: the one HTTP listener (health, metrics, webhooks), and on it the
web console's pages and event stream and the JSON HTTP API."""

from bot.web.listener import (
    Install,
    Listener,
    LoopLag,
    Observed,
    WebContext,
    Webhook,
    readiness,
)

__all__ = ["Install", "Listener", "LoopLag", "Observed", "WebContext", "Webhook", "readiness"]
