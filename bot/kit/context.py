"""What the composition root hands a front end, and all it hands it: the fleet through the
kit's port, a way to run commands, the links /readyz and /metrics read, the webhook mount on the
root's HTTP listener, and the front end's own slice of the settings. A front end never sees the
root (bot/app.py builds one FrontContext per front end; import-linter keeps adapters off it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from bot.kit.links import Links
from bot.kit.ports import FleetPort
from bot.kit.service import CommandRunner

S = TypeVar("S")
Webhook = Callable[[Any], Awaitable[Any]]  # an aiohttp handler: a request in, a response out


class Webhooks(Protocol):
    """Routes on the root's HTTP listener (bot/web/listener.py): POSTs to a path go to the
    handler mounted there."""

    def mount(self, path: str, handler: Webhook, /) -> None: ...

    def unmount(self, path: str, /) -> None: ...


@dataclass(frozen=True, slots=True)
class FrontContext(Generic[S]):
    """`settings`: the front end's slice (bot/telegram/settings.py, bot/slack/settings.py);
    `webhooks`: None when the root has no HTTP listener."""

    fleet: FleetPort
    commands: CommandRunner
    settings: S
    links: Links
    webhooks: Webhooks | None = None


__all__ = ["FrontContext", "Webhook", "Webhooks"]
