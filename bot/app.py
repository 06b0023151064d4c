"""Wiring: the one place that builds the store, the event hub, the pool and the dispatcher."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import IO

from bot.fleet import ApiFleet
from commands.base import Caller, Context, Reply
from commands.dispatcher import Dispatcher
from store import Store, open_store
from supervisor.api import SupervisorAPI
from supervisor.config import Settings
from supervisor.errors import ConfigError
from supervisor.events import EventHub
from supervisor.pool import AgentPool
from supervisor.redact import SECRETS

logger = logging.getLogger(__name__)


class Switchboard:
    """The running system: an async context manager that starts and stops everything in order."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.hub = EventHub()
        self.dispatcher = Dispatcher()
        self.store: Store | None = None
        self.pool: AgentPool | None = None
        self.fleet: ApiFleet | None = None  # what the front-end kit reads the fleet through
        self.api: SupervisorAPI | None = None
        self._lock_file: IO[str] | None = None

    async def __aenter__(self) -> Switchboard:
        try:
            self._take_lock()
            SECRETS.add(*self.settings.secret_values())
            self.store = await open_store(self.settings.db_path, redact=SECRETS)
            self.pool = AgentPool(self.settings, self.store, self.hub)
            report = await self.pool.start()
            self.api = SupervisorAPI.over(self.pool)
            self.fleet = ApiFleet(self.api)
            # Kill switch layer 3: whatever Switchboard issued is revoked with it.
            self.pool.killswitch.revokers.append(self.store.operators.revoke_invites)
            logger.info("supervisor started home=%s resumed=%d swept=%d", self.settings.home,
                        len(report.resumed), len(report.swept_pids))
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _take_lock(self) -> None:
        run = self.settings.run_dir
        run.mkdir(parents=True, exist_ok=True)
        fh = open(run / "supervisor.lock", "a+")  # noqa: SIM115 - held for the process lifetime
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise ConfigError(
                f"another Switchboard is already running on {self.settings.home}; "
                "stop it first or set SWITCHBOARD_HOME to another directory"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._lock_file = fh

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        if self.store is not None:
            await self.store.db.close()
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def context(self, caller: Caller) -> Context:
        assert self.api is not None
        return Context(self.api, caller)

    async def run_command(self, caller: Caller, text: str) -> Reply:
        return await self.dispatcher.dispatch(self.context(caller), text)


def running_pid(settings: Settings) -> int | None:
    """The pid of the supervisor holding this data directory's lock, if one is running."""
    lock = Path(settings.run_dir) / "supervisor.lock"
    if not lock.exists():
        return None
    with open(lock) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = lock.read_text().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None
