"""The layered kill switch.

(1) a halt flag persisted in the store, checked by every command, spawn and message delivery;
(2) every agent's whole process tree SIGKILLed at once, no grace; (3) everything issued revoked:
open escalations denied, plus whatever front ends register (invite codes, tokens); (4) spawns
refused and (5) every tool call denied while halted; (6) triggers that need no chat front end:
a local file in the data directory and an object in the GCS bucket, each watched by a thread
that acts on its own, so the switch works while the event loop is busy or wedged. Each watcher
is a loop around a run-once poll (`poll_local`, `poll_gcs`) that tests call directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store import Store
from store.kv import get_sync, set_sync
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.errors import Halted
from supervisor.process import sweep

logger = logging.getLogger(__name__)

HALT_KEY = "halt"
GCS_CURSOR_KEY = "killswitch:gcs_generation"
LOCAL_FILE = "kill-switch.json"
GCS_OBJECT = "kill-switch.json"


@dataclass(frozen=True, slots=True)
class KillReport:
    agents: tuple[str, ...]
    pids: tuple[int, ...]
    denied: int  # open escalations denied
    revoked: int  # invite codes and other credentials Switchboard issued
    took_s: float

    def text(self) -> str:
        return (f"Kill switch on: {len(self.agents)} agent(s) killed "
                f"({len(self.pids)} processes SIGKILLed in {self.took_s * 1000:.0f} ms), "
                f"{self.denied} open request(s) denied, {self.revoked} invite code(s) or "
                "token(s) revoked. Spawns, messages and tool calls are "
                "refused until an admin turns it off.")


Revoker = Callable[[], Awaitable[int]]


class KillSwitch:
    def __init__(self, settings: Settings, store: Store, pool: Any,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.store = store
        self.pool = pool
        self.clock = clock
        self.halt: dict[str, Any] | None = None
        self.revokers: list[Revoker] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._fire_lock = threading.Lock()

    @property
    def local_file(self) -> Path:
        return self.settings.home / LOCAL_FILE

    @property
    def halted(self) -> bool:
        return self.halt is not None

    def check(self) -> None:
        if self.halt is not None:
            raise Halted(self.halt)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.halt = await self.store.kv.get(HALT_KEY)
        self._watch(self._watch_local, "killswitch-file")
        if self.settings.gcs_bucket:
            self._watch(self._watch_gcs, "killswitch-gcs")

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def _watch(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # -- triggering -------------------------------------------------------------------------------

    def fire_now(self, by: str, via: str, reason: str) -> list[int]:
        """Layers 1 and 2, synchronously, from any thread: persist the flag, SIGKILL everything.
        Safe to call twice; the async rest (revoke, states, notices) follows on the loop."""
        with self._fire_lock:
            halt = {"by": by, "via": via, "reason": reason, "at": self.clock.now()}
            if self.halt is None:
                self.halt = halt
                try:
                    set_sync(self.settings.db_path, HALT_KEY, halt)
                except Exception:  # noqa: BLE001 - a broken store must not stop the kill
                    logger.exception("kill switch: could not persist the halt flag")
            for runner in list(self.pool.runners()):
                runner.halting()
            return sweep(f"{self.settings.instance_id}/")

    async def trigger(self, by: str, via: str, reason: str = "") -> KillReport:
        started = self.clock.monotonic()
        live = [r for r in self.pool.runners() if r.state.live]
        pids = await asyncio.to_thread(self.fire_now, by, via, reason)
        return await self._after(live, pids, started, by, via)

    async def _after(self, live: list[Any], pids: list[int], started: float, by: str,
                     via: str) -> KillReport:
        took = self.clock.monotonic() - started
        for runner in live:
            with contextlib.suppress(Exception):  # one agent's bookkeeping never blocks the rest
                await runner.mark_killed("kill switch")
        denied = await self.pool.escalations.cancel_all("the kill switch was triggered")
        revoked = 0
        for revoke in self.revokers:
            try:
                revoked += await revoke()
            except Exception:  # noqa: BLE001 - every revoker runs, whatever one does
                logger.exception("kill switch: a revoker failed")
        report = KillReport(tuple(r.name for r in live), tuple(pids), denied, revoked, took)
        if self.halt is not None:  # remembered across restarts, for the deactivation report
            stopped = sorted({*self.halt.get("agents", []), *report.agents})
            self.halt = {**self.halt, "agents": stopped}
            await self.store.kv.set(HALT_KEY, self.halt)
        await self.store.audit.record(platform=via, user_id=by, user_name=by, action="killswitch",
                                      args="on", ok=True, result=report.text())
        await self.pool.escalations.notify(None, "🛑 Kill switch triggered",
                                           f"By {by} via {via}. {report.text()}")
        logger.warning("kill switch triggered by=%s via=%s agents=%d pids=%d took_ms=%.0f", by,
                       via, len(live), len(pids), took * 1000)
        return report

    def _fire_from_thread(self, by: str, via: str, reason: str) -> None:
        if self.halt is not None:
            return
        started = self.clock.monotonic()
        live = [r for r in self.pool.runners() if r.state.live]
        pids = self.fire_now(by, via, reason)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._after(live, pids, started, by, via), loop)

    async def deactivate(self, by: str, via: str) -> str:
        if self.halt is None:
            return "The kill switch is off; nothing to do."
        was = self.halt
        with contextlib.suppress(FileNotFoundError):
            self.local_file.unlink()
        await self.store.kv.delete(HALT_KEY)
        self.halt = None
        killed = list(was.get("agents", []))
        text = (f"Kill switch off. It was triggered by {was.get('by')} via {was.get('via')}"
                f"{': ' + was['reason'] if was.get('reason') else ''}; it stopped "
                f"{len(killed)} agent(s){': ' + ', '.join(killed) if killed else ''}. "
                "Spawns and messages work again.")
        await self.store.audit.record(platform=via, user_id=by, user_name=by, action="killswitch",
                                      args="off", ok=True, result=text)
        await self.pool.escalations.notify(None, "Kill switch off", f"By {by} via {via}. {text}")
        return text

    # -- remote triggers (threads) ----------------------------------------------------------------

    def _watch_local(self) -> None:
        while not self._stop.wait(0.25):
            self.poll_local()

    def poll_local(self) -> bool:
        """Run once: act on the local trigger file if it is there. True if it fired."""
        path = self.local_file
        if self.halt is not None or not path.exists():
            return False
        try:
            data = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            data = {}
        self._fire_from_thread(str(data.get("by", "local file")), "file",
                               str(data.get("reason", "")))
        return True

    def _watch_gcs(self) -> None:
        try:
            from google.cloud import storage  # deferred: a heavy import few setups need
        except ImportError:
            logger.error("kill switch: google-cloud-storage is not installed; GCS trigger off")
            return
        client = None
        while not self._stop.wait(self.settings.kill_poll_s):
            try:
                if client is None:
                    client = storage.Client(**self.settings.gcs_client_kwargs())
                self.poll_gcs(client)
            except Exception:  # noqa: BLE001 - keep polling through outages
                logger.warning("kill switch: GCS poll failed bucket=%s", self.settings.gcs_bucket,
                               exc_info=True)
                client = None

    def poll_gcs(self, client: Any) -> bool:
        """Run once: act on the trigger object in the bucket if it is new. True if it fired."""
        blob = client.bucket(self.settings.gcs_bucket).get_blob(GCS_OBJECT)
        if blob is None or self.halt is not None:
            return False
        if get_sync(self.settings.db_path, GCS_CURSOR_KEY) == blob.generation:
            return False  # this object was acted on, then deactivated
        set_sync(self.settings.db_path, GCS_CURSOR_KEY, blob.generation)
        try:
            data = json.loads(blob.download_as_text() or "{}")
        except ValueError:
            data = {}
        self._fire_from_thread(str(data.get("by", "cloud console")), "gcs",
                               str(data.get("reason", "")))
        return True


def write_local_trigger(settings: Settings, by: str, reason: str,
                        clock: Clock = SYSTEM_CLOCK) -> Path:
    """What `switchboard kill` does first: the running supervisor's watcher acts on it."""
    path = settings.home / LOCAL_FILE
    settings.home.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"by": by, "reason": reason, "at": clock.now()}))
    tmp.replace(path)
    return path
