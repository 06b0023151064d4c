"""The composition root: the one place that builds every long-lived part (lock, the HTTP
listener, store, pool with its kill switch, watchdog and escalation timers, the API, front ends)
as named services, started in order and stopped in reverse under one bound, and that turns
signals into a shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Coroutine
from typing import IO, TYPE_CHECKING, Any, TypeVar

from bot.console.settings import ConsoleSettings
from bot.fleet import ApiFleet
from bot.kit.context import FrontContext
from bot.kit.links import Links, LinkState
from bot.slack.settings import SlackSettings
from bot.telegram.settings import TelegramSettings
from commands.base import Caller, Context, Reply
from commands.dispatcher import Dispatcher
from store import Store, open_store, rescued_path
from supervisor.api import SupervisorAPI
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.coordinator import Coordinator
from supervisor.core import Core
from supervisor.errors import ConfigError
from supervisor.events import EventHub
from supervisor.heap import no_cyclic_gc
from supervisor.persistence.bucket import Persistence
from supervisor.persistence.offline import SQLITE_ONLY_OFF, database_where
from supervisor.redact import SECRETS
from supervisor.service import FnService, Service, Services, TaskGroup, loop_service

if TYPE_CHECKING:
    from bot.web import Listener, WebContext
    from supervisor.agents.pool import AgentPool

logger = logging.getLogger(__name__)
S = TypeVar("S")


async def _nothing() -> None:
    return None


def _ignore(_text: str) -> None:
    return None


class Switchboard:
    """The running system: an async context manager that starts and stops everything in order."""

    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock  # the pool's, and so every timed part's (a FakeClock in a bench)
        self.hub = EventHub()
        self.dispatcher = Dispatcher()
        self.store: Store | None = None
        self.core: Core | None = None  # the runtime's parts (supervisor/core.py)
        self.pool: AgentPool | None = None  # the core's pool
        self.fleet: ApiFleet | None = None  # what the front-end kit reads the fleet through
        self.api: SupervisorAPI | None = None
        self._lock_file: IO[str] | None = None
        # Every configured chat front end has a link from the start, so /readyz waits for it.
        self.links = Links()
        if settings.telegram_token:
            self.links.link("telegram")
        if settings.slack_bot_token:
            slack = self.links.link("slack")
            if not settings.slack_channel:  # the entry point runs without Slack then
                slack.set(LinkState.DOWN, "SLACK_CHANNEL is not set")
        self.listener: Listener | None = None
        if settings.http_listen is not None:
            from bot.web import Listener  # aiohttp and prometheus-client: only when listening
            from bot.web.site import install_web

            self.listener = Listener(self, *settings.http_listen)
            install_web(self.listener)  # the web console and the HTTP API (bot/web/)
        self.stopping = asyncio.Event()
        self.forced = asyncio.Event()
        # The database and shared context in the bucket, when one is configured.
        # Snapshots of the SQLite file: none on PostgreSQL, which has its own backups.
        self.persistence = (Persistence(settings) if settings.gcs_bucket
                            and settings.database_url is None else None)
        # One worker of the database's is the coordinator (always, on SQLite): only it runs
        # the scheduler and the chat front ends (docs/postgresql.md).
        self.coordinator = Coordinator(settings.database_url.value
                                       if settings.database_url is not None else None)
        self._worker_tasks: list[asyncio.Task[Any]] = []
        self.services = Services(self._core(), stop_timeout_s=settings.shutdown_grace_s
                                 + settings.kill_grace_s + 30)

    # -- services, in start order -------------------------------------------------------------

    def _core(self) -> list[Service]:
        core: list[Service] = [FnService("lock", self._start_lock, self._release_lock)]
        if self.listener is not None:
            # Right after the lock: /healthz answers while the rest starts, and /readyz says
            # what it waits for; stopped almost last, so probes see the shutdown.
            core.append(self.listener)
        store = [FnService("store", self._open_store, self._close_store)]
        if self.persistence is not None:
            # Restore before the store opens; the snapshot thread stops after the pool (the
            # shutdown snapshot holds the agents' final states).
            store = [FnService("restore", self._restore, _nothing), *store,
                     FnService("snapshots", self._start_snapshots, self._stop_snapshots)]
        return [
            *core,
            *store,
            # The runtime (supervisor/core.py): its parts as services of their own, in order.
            FnService("supervisor", self._start_core, self._stop_core),
            FnService("api", self._start_api, _nothing),
            # Its row in `workers` and the coordinator role tried once, before what it gates.
            FnService("worker", self._start_worker, self._stop_worker),
            # After the API: its first tick may start runs, which go through the pool.
            self.coordinator.gated("scheduler", self._start_scheduler, self._stop_scheduler),
        ]

    async def _restore(self, _group: TaskGroup) -> None:
        assert self.persistence is not None
        await self.persistence.restore()

    async def _start_snapshots(self, group: TaskGroup) -> None:
        assert self.persistence is not None
        await self.persistence.start(self.hub, group)

    async def _stop_snapshots(self) -> None:
        if self.persistence is not None:
            await self.persistence.stop()

    async def _start_lock(self, _group: TaskGroup) -> None:
        self._take_lock()
        SECRETS.add(*self.settings.secret_values())

    async def _release_lock(self) -> None:
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    async def _open_store(self, _group: TaskGroup) -> None:
        url = self.settings.database_url
        if url is not None:
            # The kill path writes there too (store/private.py); what is about the SQLite
            # file is off (no Persistence, the guard's file checks see no file).
            logger.info("database on PostgreSQL database=%s", database_where(self.settings))
            logger.warning("%s", SQLITE_ONLY_OFF)
            self.store = await open_store(self.settings.db_path, redact=SECRETS,
                                          now=self.clock.now, database_url=url.value)
            return
        db, rescued = self.settings.db_path, rescued_path(self.settings.db_path)
        if not db.exists() and rescued.exists():
            # Opening would make a new, empty database beside the agents' last known state.
            raise ConfigError(
                f"the database {db} is missing, and {rescued} is the copy saved when it was "
                f"deleted or replaced while Switchboard ran. To go on from it: mv {rescued} "
                f"{db}, then start again. To start with an empty database instead, move "
                f"{rescued} elsewhere first.")
        self.store = await open_store(self.settings.db_path, redact=SECRETS, now=self.clock.now)

    async def _close_store(self) -> None:
        if self.store is not None:
            await self.store.db.close()

    async def _start_core(self, _group: TaskGroup) -> None:
        assert self.store is not None
        self.core = core = Core(self.settings, self.store, self.hub, self.clock,
                                self.persistence, self.coordinator)
        self.pool = core.pool
        if self.persistence is not None:
            escalations = core.escalations
            self.persistence.notices_ready(lambda title, body: escalations.notify(
                None, title, body))
        await core.services.start()  # a part that fails to start stops those before it

    async def _stop_core(self) -> None:
        if self.core is not None:
            await self.core.services.stop()

    async def _start_api(self, _group: TaskGroup) -> None:
        assert self.core is not None
        self.api = SupervisorAPI.over(self.core)
        self.fleet = ApiFleet(self.api)
        if self.listener is not None:  # it listens by now: its port is known
            self.api.web.url = (self.settings.public_url or self.listener.url).rstrip("/")

    async def _start_worker(self, group: TaskGroup) -> None:
        assert self.core is not None
        worker = self.core.worker
        await worker.beat()
        await self.coordinator.try_once()
        self._worker_tasks = [group.spawn("heartbeat", worker.run()),
                              group.spawn("coordinator", self.coordinator.run())]

    async def _stop_worker(self) -> None:
        for task in self._worker_tasks:
            task.cancel()
        await asyncio.gather(*self._worker_tasks, return_exceptions=True)
        await self.coordinator.close()
        if self.core is not None:
            await self.core.worker.close()

    async def _start_scheduler(self) -> None:
        assert self.api is not None
        await self.api.schedules.start()

    async def _stop_scheduler(self) -> None:
        if self.api is not None:
            await self.api.schedules.stop()

    async def add_task_service(self, name: str,
                               run: Callable[[], Coroutine[Any, Any, object]], *,
                               coordinator_only: bool = False) -> None:
        """A front end (or any part that is one long-running coroutine) as a service: started
        now, in the services' task group, and stopped (cancelled) before the core parts.
        `coordinator_only`: run only while this worker is the coordinator (a chat
        connection: Telegram allows one consumer of a bot's updates)."""
        if not coordinator_only:
            await self.services.add(loop_service(name, run))
            return
        link = self.links.link(name)

        async def run_here() -> object:
            link.set(LinkState.STARTING)
            try:
                return await run()
            except asyncio.CancelledError:  # the role was lost (or the worker stops)
                link.set(LinkState.STANDBY, "another worker is the coordinator")
                raise

        if not self.coordinator.held:
            link.set(LinkState.STANDBY, "another worker is the coordinator")
        await self.services.add(self.coordinator.gated_loop(name, run_here))

    async def __aenter__(self) -> Switchboard:
        await self.services.start()  # a start that fails stops what had started
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        # No cyclic GC through a shutdown (supervisor/heap.py, `hold_cyclic_gc`): a
        # full collection of a 300-agent fleet's heap held the loop 70-270 ms meanwhile.
        with no_cyclic_gc():
            await self.services.stop()

    # -- signals and the two-phase shutdown ---------------------------------------------------

    def on_signal(self, signum: int) -> None:
        """SIGINT/SIGTERM: the first asks for a shutdown, a second forces it. Only sets events
        (it runs as a signal handler); tests call it directly."""
        if self.stopping.is_set():
            logger.warning("second signal: forcing shutdown signal=%d", signum)
            self.forced.set()
        else:
            logger.info("signal received, shutting down signal=%d", signum)
            self.stopping.set()

    def request_stop(self) -> None:
        self.stopping.set()

    async def run_until_stopped(self, announce: Callable[[str], None] = _ignore) -> bool:
        """Wait for a stop request, then phase one: let running turns finish for
        shutdown_grace_s, cut short by a second signal. Phase two (ending every agent process)
        is leaving the `async with`. True if every turn finished in time."""
        assert self.pool is not None
        await self.stopping.wait()
        busy = sum(1 for r in self.pool.fleet.live() if r.busy)
        announce(f"shutting down: waiting up to {self.settings.shutdown_grace_s:g}s for {busy} "
                 "running turn(s); interrupt again to force")
        drain = asyncio.create_task(self.pool.drain(self.settings.shutdown_grace_s),
                                    name="drain")
        forced = asyncio.create_task(self.forced.wait(), name="force")
        await asyncio.wait({drain, forced}, return_when=asyncio.FIRST_COMPLETED)
        for task in (drain, forced):
            task.cancel()
        finished = drain.done() and not drain.cancelled() and drain.result()
        if self.forced.is_set() or not finished:
            logger.warning("grace period over or forced: killing remaining turns")
        return bool(finished) and not self.forced.is_set()

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

    def web_context(self) -> WebContext | None:
        """What the web console and the HTTP API run with (bot/web/); None until the API is up."""
        if self.api is None or self.listener is None:
            return None
        from bot.web import WebContext

        return WebContext(self.api, self.run_command, self.links, self.api.web.url or "")

    def context(self, caller: Caller) -> Context:
        assert self.api is not None
        return Context(self.api, caller)

    async def run_command(self, caller: Caller, text: str) -> Reply:
        return await self.dispatcher.dispatch(self.context(caller), text)

    # -- what each front end is given: a narrow context, never this object --------------------

    def front_context(self, settings: S) -> FrontContext[S]:
        """The fleet through the kit's port, the command runner, the links, the HTTP
        listener's webhook mount and `settings` (the front end's slice of them)."""
        assert self.fleet is not None, "start the Switchboard first"
        return FrontContext(self.fleet, self.run_command, settings, self.links, self.listener)

    def telegram_context(self) -> FrontContext[TelegramSettings]:
        return self.front_context(TelegramSettings.of(self.settings))

    def slack_context(self) -> FrontContext[SlackSettings]:
        return self.front_context(SlackSettings.of(self.settings))

    def console_context(self) -> FrontContext[ConsoleSettings]:
        return self.front_context(ConsoleSettings.of(self.settings))
