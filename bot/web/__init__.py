"""The web side of Switchboard: the one HTTP listener (health, metrics, webhooks), and on it the
web console's pages and event stream and the JSON HTTP API."""

from bot.web.listener import Listener, LoopLag, Observed, Webhook, readiness

__all__ = ["Listener", "LoopLag", "Observed", "Webhook", "readiness"]
