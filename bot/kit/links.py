"""Each chat front end's link to its platform: connected, retrying or down, and its outbox's
counters. What /readyz reports and /metrics counts per front end."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from enum import StrEnum

from bot.kit.outbox import ChatStats, Outbox

logger = logging.getLogger(__name__)


class LinkState(StrEnum):
    STARTING = "starting"  # the first connection is being made
    CONNECTED = "connected"
    RETRYING = "retrying"  # the platform could not be reached: tried again with backoff
    DOWN = "down"  # given up (a refused token): Switchboard runs without this front end
    STANDBY = "standby"  # another worker of the database is the coordinator and runs it

    @property
    def ready(self) -> bool:
        """Connected, or doing all it can to be: a platform outage must not make the
        orchestrator restart Switchboard, which would not bring the platform back. A
        standby worker is ready: the chat connection is the coordinator's to keep."""
        return self in (LinkState.CONNECTED, LinkState.RETRYING, LinkState.STANDBY)


class Link:
    """One front end's state, set by the task that keeps the front end up."""

    def __init__(self, platform: str) -> None:
        self.platform = platform
        self.state = LinkState.STARTING
        self.detail = ""
        self.stats = ChatStats()
        self.outbox: Outbox | None = None  # the running front desk's, for its depth

    def set(self, state: LinkState, detail: str = "", *, outbox: Outbox | None = None) -> None:
        if state != self.state:
            logger.info("front end link platform=%s state=%s", self.platform, state)
        self.state, self.detail, self.outbox = state, detail, outbox

    @property
    def outbox_depth(self) -> int:
        return self.outbox.depth() if self.outbox is not None else 0


class Links:
    """Every configured front end's link, registered when it is configured (so one that never
    started still shows, as starting)."""

    def __init__(self) -> None:
        self._links: dict[str, Link] = {}

    def link(self, platform: str) -> Link:
        link = self._links.get(platform)
        if link is None:
            link = self._links[platform] = Link(platform)
        return link

    def __iter__(self) -> Iterator[Link]:
        return iter(sorted(self._links.values(), key=lambda link: link.platform))


__all__ = ["Link", "LinkState", "Links"]
