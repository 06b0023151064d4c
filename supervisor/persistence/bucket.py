"""The bucket side of a running supervisor, for the composition root: restore before the store
opens, the snapshot thread once it is open, a snapshot wanted after every turn, and the
agents' leases (taken before an agent's process starts). Every blocking call runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any

from supervisor.config import Settings
from supervisor.errors import AgentFailed, ConfigError
from supervisor.events import AgentState, EventHub, StateChanged, TurnFinished
from supervisor.persistence import snapshot
from supervisor.persistence.leases import LeaseHeld, Leases, instance_id
from supervisor.persistence.remote import Remote, RemoteError, open_remote
from supervisor.persistence.snapshot import SnapshotError
from supervisor.persistence.snapshots import Restored, SnapshotStatus, Snapshotter, restore_on_start
from supervisor.service import TaskGroup

logger = logging.getLogger(__name__)

AsyncNotify = Callable[[str, str], Coroutine[Any, Any, object]]


class Persistence:
    def __init__(self, settings: Settings, remote: Remote | None = None) -> None:
        self.settings = settings
        found = remote or open_remote(settings)
        if found is None:
            raise ValueError("persistence needs a bucket (gcs_bucket) or a remote")
        self.remote = found
        self.holder = instance_id(settings.run_dir)
        self.leases = Leases(self.remote, self.holder, ttl_s=settings.lease_ttl_s)
        self.restored: Restored | None = None
        self.snapshots: Snapshotter | None = None
        self.notify_async: AsyncNotify | None = None  # the operator's notices, once there
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[str, str]] = []  # notices from before the front ends
        self._lease_warned = False
        # Ends an agent's process here when its lease was taken over (set by the pool).
        self.on_lost: Callable[[str], Coroutine[Any, Any, None]] | None = None

    async def restore(self) -> Restored:
        try:
            self.restored = await asyncio.to_thread(restore_on_start, self.settings,
                                                    self.remote)
        except SnapshotError as exc:
            raise ConfigError(f"{exc}. Switchboard does not start on an empty data directory "
                              "then (it would soon publish an empty database over the "
                              "bucket's); restore one by hand (switchboard restore --from "
                              "DIR|gs://...) or unset gcs_bucket") from exc
        except RemoteError as exc:
            # Started on what the disk holds (maybe nothing). Safe: a snapshot is never
            # published over a newer one in the bucket, so this start cannot clobber it.
            logger.error("bucket unreachable at start: no restore where=%s: %s",
                         self.remote.where, exc)
            local = snapshot.local_generation(self.settings.db_path)
            self.restored = Restored(snapshot.Decision(
                "local" if local is not None else "none", local, None,
                f"the bucket could not be read: {exc}"), None, None, 0)
            self.settings.context_dir.mkdir(parents=True, exist_ok=True)
            self._pending.append((
                "⚠ The bucket could not be read at start",
                f"Nothing was restored from {self.remote.where} ({exc}); Switchboard started "
                "on what this disk holds. Snapshots are retried; none is published over a "
                "newer one in the bucket. Check the bucket and its credentials."))
        return self.restored

    def notices_ready(self, notify: AsyncNotify) -> None:
        """The operator can be told things now: `notify` from here on, and what waited."""
        self.notify_async = notify
        pending, self._pending = self._pending, []
        for title, body in pending:
            self._notify(title, body)

    async def start(self, hub: EventHub, group: TaskGroup) -> None:
        self._loop = asyncio.get_running_loop()
        snap = Snapshotter(self.settings, self.remote, notify=self._notify, leases=self.leases,
                           holder=self.holder, restored=self.restored)
        await asyncio.to_thread(snap.prepare)
        snap.lost_leases = self._lost
        snap.start()
        self.snapshots = snap
        group.spawn("snapshot-after-turns", self._after_turns(hub))

    async def stop(self) -> None:
        """The shutdown snapshot (after the agents stopped), then the leases given back."""
        snap, self.snapshots = self.snapshots, None
        if snap is not None:
            await asyncio.to_thread(snap.close)

    async def _after_turns(self, hub: EventHub) -> None:
        """A snapshot when a turn starts as well as when it ends (both debounced): a container
        lost mid-turn then comes back knowing the turn was under way, so it is reported as
        interrupted, not silently forgotten."""
        with hub.subscription(StateChanged, TurnFinished) as events:
            while True:
                event = await events.get()
                started = (isinstance(event, StateChanged) and event.new == AgentState.WORKING
                           and event.old != AgentState.WORKING)
                if (started or isinstance(event, TurnFinished)) and self.snapshots is not None:
                    self.snapshots.request("turn")

    def session_known(self, agent_id: str) -> None:
        """An agent's session id became known (its first turn) or changed: a snapshot, so that
        the database in the bucket names the session a new container resumes."""
        if self.snapshots is not None:
            self.snapshots.request("session")

    def status(self) -> SnapshotStatus | None:
        return self.snapshots.status() if self.snapshots is not None else None

    # -- leases --------------------------------------------------------------------------------

    async def take(self, agent_ids: list[str]) -> None:
        """Leases for many agents at once (one settle delay), at start; refusals are logged
        here and refused again, with the reason, when the agent's process would start."""
        if not agent_ids:
            return
        try:
            _, refused = await asyncio.to_thread(self.leases.acquire, agent_ids)
        except RemoteError as exc:
            logger.error("leases not taken at start: %s", exc)
            return
        for held in refused:
            logger.warning("lease held elsewhere agent=%s holder=%s", held.agent_id, held.holder)

    async def before_start(self, agent_id: str) -> None:
        """Raises AgentFailed unless this supervisor holds (or now takes) the agent's lease."""
        if agent_id in self.leases.held:
            return
        try:
            _, refused = await asyncio.to_thread(self.leases.acquire, [agent_id])
        except RemoteError as exc:
            # The bucket is out of reach: the agent runs (a fleet must not stop for a bucket
            # that blips), unguarded until the bucket answers; said once.
            logger.error("lease not taken, agent started anyway agent=%s: %s", agent_id, exc)
            if not self._lease_warned:
                self._lease_warned = True
                self._notify("⚠ Agents start without a lease",
                             f"The bucket could not be reached to take agent {agent_id}'s "
                             f"lease ({exc}). Agents start anyway; until the bucket answers, "
                             "nothing stops a second supervisor on it from driving them too.")
            return
        if refused and await self._wait_out(refused[0]):
            _, refused = await asyncio.to_thread(self.leases.acquire, [agent_id])
        if refused:
            raise AgentFailed(None, "", f"{refused[0]}; it is not started here while another "
                              "supervisor drives it. Stop that one, or /ask again after the "
                              "lease ends")

    async def _wait_out(self, held: LeaseHeld) -> bool:
        """A lease that ends within one TTL (a supervisor that died without giving it back,
        after a crash or a SIGKILLed container): wait for its end, once, rather than fail the
        agent; True if we waited. A holder that renews it keeps it: the retry is refused."""
        wait_s = held.expires_at - time.time()
        if not 0 < wait_s <= self.settings.lease_ttl_s + 1:
            return False
        logger.warning("waiting for a lease agent=%s holder=%s wait_s=%.0f", held.agent_id,
                       held.holder, wait_s)
        self._notify(f"Waiting for agent {held.agent_id}'s lease",
                     f"{held}. It starts here once the lease ends, in {wait_s:.0f} s, unless "
                     "that supervisor still runs and renews it.")
        await asyncio.sleep(wait_s + 0.5)
        return True

    def _lost(self, agent_ids: list[str]) -> None:
        """From the snapshot thread: leases another supervisor took over."""
        for agent_id in agent_ids:
            if self.on_lost is not None and self._loop is not None:
                with suppress(RuntimeError):  # the loop is closed: shutting down
                    asyncio.run_coroutine_threadsafe(self.on_lost(agent_id), self._loop)
            self._notify(f"Lease lost: {agent_id}",
                         f"Another supervisor took over agent {agent_id}'s lease: its process "
                         "here was ended, and is not started again here unless this "
                         "supervisor gets the lease back.")

    def _notify(self, title: str, body: str) -> None:
        """From any thread: the operator's notice, on the event loop."""
        if self.notify_async is None or self._loop is None:
            logger.warning("notice not delivered (no front end yet) title=%s", title)
            return
        notify = self.notify_async
        with suppress(RuntimeError):  # the loop is closed: shutting down
            asyncio.run_coroutine_threadsafe(notify(title, body), self._loop)
