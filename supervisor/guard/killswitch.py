"""The layered kill switch.

(1) a halt flag persisted in the store, checked by every command, spawn and message delivery;
(2) every agent's whole process tree SIGKILLed at once, no grace; (3) everything issued revoked:
open escalations denied, plus whatever front ends register (invite codes, tokens); (4) spawns
refused and (5) every tool call denied while halted; (6) triggers that need no chat front end:
a local file in the data directory and an object in the GCS bucket, each watched by a thread
that acts on its own, so the switch works while the event loop is busy or wedged; on
PostgreSQL a third watches the shared halt flag, so a switch pulled on another worker or host
reaches this one's agents. Each watcher is a loop around a run-once poll (`poll_local`,
`poll_gcs`, `poll_database`) that tests call directly. On PostgreSQL the flag's writers also
NOTIFY it (`HALT_CHANNEL`), and a fourth thread listening for that polls the flag at once
(`hear_database`): the other workers act as the flag is written rather than at their next
poll. A hint only: the poll every `DATABASE_POLL_S` stays, for a notification lost.

A watcher thread does only what needs nothing else to work: it persists the flag (a private
connection of its own to the SQLite file or the PostgreSQL database, store/private.py, in a
thread joined with a bound: the processes die whatever the database does) and SIGKILLs by tag
through /proc. Everything that touches the
runners, the escalations or the async store is handed to the event loop
(`run_coroutine_threadsafe`). A poll that fails in any way is logged (once a minute while it
keeps failing) and the watcher keeps watching: it never dies of an error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from store import Store, private
from store.errors import StoreError
from store.kv import get_sync, set_sync
from store.private import Target
from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.config import Settings
from supervisor.errors import Halted
from supervisor.heap import hold_cyclic_gc, no_cyclic_gc
from supervisor.process.tree import kill_trees, sweep

if TYPE_CHECKING:
    from supervisor.agents.fleet import FleetReader
    from supervisor.guard.escalations import Escalations

logger = logging.getLogger(__name__)
T = TypeVar("T")

HALT_KEY = "halt"
GCS_CURSOR_KEY = "killswitch:gcs_generation"
LOCAL_FILE = "kill-switch.json"
GCS_OBJECT = "kill-switch.json"
LOCAL_POLL_S = 0.25
DATABASE_POLL_S = 1.0  # on PostgreSQL: the halt flag another worker or host wrote
# PostgreSQL: whoever writes the halt flag NOTIFYs this channel (payload HALT_KEY) once it is
# written, so every worker listening polls the flag at once.
HALT_CHANNEL = "switchboard_halt"
RELISTEN_S = 2.0  # a listening connection that failed is opened again after this long
ERROR_LOG_EVERY_S = 60.0
# How long the kill waits, after its sweep, for the halt flag's private write (SQLite's busy
# timeout and PostgreSQL's connect and statement timeouts are 5 s: store/private.py). The
# processes are dead by then; only the report waits, and says when the write did not finish.
PERSIST_WAIT_S = 6.0
# Agents whose bookkeeping (SDK client closed, state row, event) runs at once after a kill: a
# slice is a few milliseconds of loop work, so the loop is never held longer than that.
BOOK_SLICE = 16
BOOK_WAIT_S = 60.0  # how long turning the switch off, or a shutdown, waits for those records
MARK_KILLED_S = 10.0  # bound on one agent's records (its client closed, its state row)


def database_target(settings: Settings) -> Target:
    """Where the kill path's private connections go: the PostgreSQL URL, else the SQLite file."""
    return settings.database_url.value if settings.database_url is not None else settings.db_path


@dataclass(frozen=True, slots=True)
class KillReport:
    agents: tuple[str, ...]
    pids: tuple[int, ...]
    denied: int  # open escalations denied
    revoked: int  # invite codes, web sign-in links, sessions and API tokens
    took_s: float
    problems: tuple[str, ...] = ()  # what could not be done or recorded (a broken store)
    # True: every process is gone and the flag stored, but the revocations and the agents'
    # states are still being done (`KillSwitch.trigger` returned early; `settled()` has them).
    pending: bool = False

    def text(self) -> str:
        killed = (f"Kill switch on: {len(self.agents)} agent(s) killed "
                  f"({len(self.pids)} processes SIGKILLed in {self.took_s * 1000:.0f} ms), ")
        if self.pending:
            text = (killed + "open requests being denied and invite codes, sign-in links, web "
                    "sessions and API tokens being revoked now. Spawns, messages and tool "
                    "calls are refused until an admin turns it off.")
        else:
            text = (killed + f"{self.denied} open request(s) denied, {self.revoked} invite "
                    "code(s), sign-in link(s), web session(s) or API token(s) revoked. Spawns, "
                    "messages and tool calls are refused until an admin turns it off.")
        if self.problems:
            text += " Warning: " + "; ".join(self.problems) + "."
        return text


Revoker = Callable[[], Awaitable[int]]


class KillSwitch:
    def __init__(self, settings: Settings, store: Store, fleet: FleetReader,
                 escalations: Escalations, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.store = store
        self.fleet = fleet
        self.escalations = escalations
        self.clock = clock
        self.halt: dict[str, Any] | None = None
        self.revokers: list[Revoker] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._fire_lock = threading.Lock()
        self._thread_fire = threading.Lock()  # a watcher thread's fire, one at a time
        self._persist_failed: str | None = None  # why the halt flag could not be stored
        self._persisting: threading.Thread | None = None  # the flag's write, while it runs
        self._bookkeeping: asyncio.Task[KillReport] | None = None  # the last fire's records
        # A watcher thread's fire: its bookkeeping, handed to the loop, may not have begun yet.
        self._from_thread: concurrent.futures.Future[KillReport] | None = None

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
        self._watch(self.poll_local, "killswitch-file", LOCAL_POLL_S)
        if self.settings.database_url is not None:  # other workers, `switchboard kill` elsewhere
            self._watch(self.poll_database, "killswitch-db", DATABASE_POLL_S)
            self._watch(self.hear_database, "killswitch-db-listen", RELISTEN_S)
        if self.settings.gcs_bucket:
            self._watch(self._gcs_poller(), "killswitch-gcs", self.settings.kill_poll_s)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def _watch(self, poll: Callable[[], object], name: str, interval_s: float) -> None:
        thread = threading.Thread(target=self.watch_loop, args=(poll, name, interval_s),
                                  name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def watch_loop(self, poll: Callable[[], object], name: str, interval_s: float) -> None:
        """A watcher thread's body: `poll` every `interval_s` until close. Whatever a poll
        raises is logged and the loop goes on: the kill switch must work when everything
        else is broken, so its watcher never dies of an error."""
        failing_since: float | None = None
        last_logged = 0.0
        while not self._stop.wait(interval_s):
            try:
                poll()
            except Exception:  # noqa: BLE001 - the watcher outlives any error around it
                now = time.monotonic()
                if failing_since is None or now - last_logged >= ERROR_LOG_EVERY_S:
                    logger.exception("kill switch: the %s watcher failed; it keeps watching",
                                     name)
                    last_logged = now
                failing_since = failing_since if failing_since is not None else now
            else:
                if failing_since is not None:
                    logger.warning("kill switch: the %s watcher works again after %.0fs",
                                   name, time.monotonic() - failing_since)
                    failing_since = None

    # -- triggering -------------------------------------------------------------------------------

    def fire_now(self, by: str, via: str, reason: str,
                 known: tuple[int, ...] = (), started: dict[int, int] | None = None, *,
                 stored: bool = False) -> list[int]:
        """Layers 1 and 2, synchronously, from any thread: persist the flag, SIGKILL everything.
        Touches no runner (a runner seeing its CLI die checks `halted`, set here first). Safe
        to call twice; the async rest (revoke, states, notices) follows on the loop. `known`:
        the sandboxes' inits and bwraps the pool knows of, SIGKILLed before anything else (the
        kernel then ends each namespace whole), then the sweep scans /proc for the rest;
        `started`: when each of them started, so that a pid reused since is left alone.
        Returns every pid it ended: the known ones' trees, each counted just before its
        SIGKILL (a dying namespace's members no longer show their tag, so the sweep cannot
        see them), and what the sweep killed."""
        with self._fire_lock:
            halt = {"by": by, "via": via, "reason": reason, "at": self.clock.now()}
            persist: threading.Thread | None = None
            if self.halt is None:
                self.halt = halt
            if self.halt is halt and not stored:  # `stored`: it is in the database already
                # The flag is written while the sweep runs, not before it: a busy database
                # took 126 ms of a 300-agent kill here (the halt is already set in memory, so
                # nothing starts meanwhile). Both end before the lock is let go.
                persist = threading.Thread(target=self._persist, args=(halt,),
                                           name="killswitch-persist", daemon=True)
                self._persisting = persist
                persist.start()
            ending = kill_trees(known, started)
            swept = sweep(f"{self.settings.instance_id}/", dying=ending)
            if persist is not None:
                persist.join(PERSIST_WAIT_S)  # bounded: a database that never answers
                if persist.is_alive():
                    self._persist_failed = (f"the database did not answer within "
                                            f"{PERSIST_WAIT_S:g} s")
            return sorted(ending.union(swept))

    def _persist(self, halt: dict[str, Any]) -> None:
        try:
            set_sync(database_target(self.settings), HALT_KEY, halt, now=self.clock.now,
                     notify=HALT_CHANNEL)
            self._persist_failed = None
        except Exception as exc:  # noqa: BLE001 - a broken store must not stop the kill
            logger.exception("kill switch: could not persist the halt flag")
            self._persist_failed = str(exc)

    def _live_halting(self) -> list[Any]:
        """On the loop: the live runners, each told that its CLI's death is the switch's."""
        live = self.fleet.live()
        for runner in live:
            runner.halting()
        return live

    async def trigger(self, by: str, via: str, reason: str = "", *,
                      settle: bool = False) -> KillReport:
        """Layers 1 and 2, then the bookkeeping in a task of its own. Returns as soon as every
        process is gone and the halt flag is stored: that report says the revocations and
        the agents' states are under way (`pending`). `settle`: return the full report
        instead, once the bookkeeping is done (what a command shows); `settled()` does the
        same for a trigger that returned early. The bookkeeping runs in bounded slices, so the
        event loop (chat, the console, the HTTP listener) never stalls behind 300 agents."""
        started = self.clock.monotonic()
        with no_cyclic_gc():  # from the first SIGKILL on; `_book` holds it through the books
            live = self._live_halting()
            pids = await in_own_thread(self.fire_now, by, via, reason, *known_pids(live))
            took = self.clock.monotonic() - started
            task = self._book(live, pids, took, by, via)
        if settle:
            return await asyncio.shield(task)
        return KillReport(tuple(r.name for r in live), tuple(pids), 0, 0, took,
                          self._flag_problem(), pending=True)

    async def settled(self, timeout_s: float | None = None) -> KillReport | None:
        """The report of the last trigger's bookkeeping, once it is done (None if the switch
        was never triggered here). Bounded by `timeout_s` if given: TimeoutError past it."""
        task = self._bookkeeping
        if task is None:
            return None
        async with asyncio.timeout(timeout_s):
            return await asyncio.shield(task)

    async def books_closed(self) -> None:
        """Until the last fire's bookkeeping is done, bounded by `BOOK_WAIT_S` (turning the
        switch off, a shutdown). Never raises: a failure was logged by the task itself; a
        wait past the bound is logged here, and the caller goes on."""
        try:
            async with asyncio.timeout(BOOK_WAIT_S):
                if self._from_thread is not None:  # its task may not exist yet
                    await asyncio.shield(asyncio.wrap_future(self._from_thread))
                await self.settled()
        except TimeoutError:
            logger.error("kill switch: its bookkeeping still runs after %g s; going on "
                         "without it", BOOK_WAIT_S)
        except Exception:  # noqa: BLE001, S110 - logged by `_log_failure` already
            pass

    def _book(self, live: list[Any], pids: list[int], took: float, by: str,
              via: str) -> asyncio.Task[KillReport]:
        """Start the bookkeeping of a fire: one named task, kept until the next fire's (which
        waits for it first: two never interleave their writes). No cyclic GC until it is done:
        ending many agents makes enough garbage for a full collection (`hold_cyclic_gc`)."""
        before = self._bookkeeping
        release_gc = hold_cyclic_gc()
        task = asyncio.get_running_loop().create_task(
            self._after(before, live, pids, took, by, via), name="killswitch-bookkeeping")
        task.add_done_callback(lambda _: release_gc())
        self._bookkeeping = task
        task.add_done_callback(_log_failure)
        return task

    def _flag_problem(self) -> tuple[str, ...]:
        if self._persist_failed is None:
            return ()
        return (f"the halt flag could not be saved ({self._persist_failed}), so a restart "
                "would lift it: fix the database, then trigger it again",)

    async def _after_thread(self, pids: list[int], started: float, by: str,
                            via: str) -> KillReport:
        """The loop's half of a trigger that a watcher thread fired."""
        took = self.clock.monotonic() - started
        return await self._book(self._live_halting(), pids, took, by, via)

    async def _after(self, before: asyncio.Task[KillReport] | None, live: list[Any],
                     pids: list[int], took: float, by: str, via: str) -> KillReport:
        """Layer 3 and the records, after every process is gone: open requests denied and
        everything issued revoked first (they are few, and they matter), then each agent
        marked killed, a slice at a time, then the flag's agent list, the audit row and the
        notice. Nothing here sends a signal but the last, belt-and-braces sweep, in a thread."""
        if before is not None:  # a fire again while the last one's books are still open
            with contextlib.suppress(Exception):
                await asyncio.shield(before)
        problems = list(self._flag_problem())
        denied = 0
        try:
            await self.escalations.cancel_all("the kill switch was triggered")
            # Every request the switch ended, whoever closed it: marking an agent killed, or
            # its interrupted turn, cancels its own requests before cancel_all sees them.
            at = float(self.halt["at"]) if self.halt is not None else self.clock.now()
            denied = await self.store.escalations.cancelled_since(at)
        except StoreError as exc:  # the processes are dead whatever the store says
            problems.append(f"open requests could not be closed in the database ({exc}); "
                            "tool calls are refused anyway")
        except Exception as exc:  # noqa: BLE001 - nothing here may stop the rest of the books
            logger.exception("kill switch: closing the open requests failed")
            problems.append(f"open requests could not be closed ({exc}); tool calls are "
                            "refused anyway")
        revoked = 0
        for revoke in self.revokers:
            try:
                revoked += await revoke()
            except Exception as exc:  # noqa: BLE001 - every revoker runs, whatever one does
                logger.exception("kill switch: a revoker failed")
                problems.append(f"a revocation failed ({exc})")
        # A slice at a time: each agent's closing (its SDK client's tasks and pipes, a state
        # row, a published event) is loop work, and 300 of them at once held the loop 200-300
        # ms (no cyclic GC meanwhile: `_book`). Each bounded: one agent's records stuck (its
        # state lock held by a turn waiting on the store) must not hold up the next slices,
        # the audit row and the notice.
        unmarked: list[str] = []
        for i in range(0, len(live), BOOK_SLICE):
            part = live[i:i + BOOK_SLICE]
            done = await asyncio.gather(*(_mark_killed(r) for r in part))
            unmarked += [r.name for r, ok in zip(part, done, strict=True) if not ok]
        if unmarked:
            problems.append(f"{len(unmarked)} agent(s) could not be recorded as killed "
                            f"({', '.join(unmarked[:10])}); their processes are gone all the same")
        # The processes were swept by tag and waited for before `trigger` returned; one more
        # sweep (in a thread) for anything an agent's closing could have let slip.
        swept: list[int] = []
        try:
            swept = await in_own_thread(sweep, f"{self.settings.instance_id}/")
        except Exception:  # noqa: BLE001 - the first sweep ended every process already
            logger.exception("kill switch: the last sweep failed")
        if self.halt is not None:  # remembered across restarts, for the deactivation report
            stored: Any = None
            with contextlib.suppress(StoreError):  # other workers' agents too (PostgreSQL)
                stored = await self.store.kv.get(HALT_KEY)
            others = stored.get("agents", []) if isinstance(stored, dict) else []
            stopped = sorted({*self.halt.get("agents", []), *others, *(r.name for r in live)})
            self.halt = {**self.halt, "agents": stopped}
            with contextlib.suppress(StoreError):  # the flag itself is stored (or reported)
                await self.store.kv.set(HALT_KEY, self.halt)
        report = KillReport(tuple(r.name for r in live), tuple(sorted({*pids, *swept})), denied,
                            revoked, took, tuple(problems))
        with contextlib.suppress(StoreError):  # commands audit through the API as well
            await self.store.audit.record(platform=via, user_id=by, user_name=by,
                                          action="killswitch", args="on", ok=True,
                                          result=report.text())
        await self.escalations.notify(None, "🛑 Kill switch triggered",
                                      f"By {by} via {via}. {report.text()}")
        logger.warning("kill switch triggered by=%s via=%s agents=%d pids=%d took_ms=%.0f", by,
                       via, len(live), len(report.pids), took * 1000)
        return report

    def _fire_from_thread(self, by: str, via: str, reason: str, *,
                          stored: bool = False) -> None:
        with self._thread_fire:  # two watchers seeing one flag: the loop's half runs once
            if self.halt is not None:
                return
            started = self.clock.monotonic()
            pids = self.fire_now(by, via, reason, stored=stored)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            self._from_thread = asyncio.run_coroutine_threadsafe(
                self._after_thread(pids, started, by, via), loop)

    async def deactivate(self, by: str, via: str) -> str:
        # After the last fire's bookkeeping: it writes the flag's agent list, which must not
        # land after the flag is deleted (a halt at the next start nobody asked for).
        await self.books_closed()
        # Under the lock a watcher thread fires with: a fire in progress has written its flag
        # to the database by then, so the delete below comes after it, never before.
        was = await asyncio.to_thread(self._clear)
        if was is None:
            return "The kill switch is off; nothing to do."
        await self.store.kv.delete(HALT_KEY)
        killed = list(was.get("agents", []))
        text = (f"Kill switch off. It was triggered by {was.get('by')} via {was.get('via')}"
                f"{': ' + was['reason'] if was.get('reason') else ''}; it stopped "
                f"{len(killed)} agent(s){': ' + ', '.join(killed) if killed else ''}. "
                "Spawns and messages work again.")
        await self.store.audit.record(platform=via, user_id=by, user_name=by, action="killswitch",
                                      args="off", ok=True, result=text)
        await self.escalations.notify(None, "Kill switch off", f"By {by} via {via}. {text}")
        return text

    def _clear(self) -> dict[str, Any] | None:
        """Turn the switch off in memory and remove the trigger file; what it was, or None."""
        with self._fire_lock:
            if self._persisting is not None:  # a fire's write still going: it lands first
                self._persisting.join(PERSIST_WAIT_S)
            was, self.halt = self.halt, None
            if was is not None:
                with contextlib.suppress(FileNotFoundError):
                    self.local_file.unlink()
            return was

    # -- remote triggers (threads) ----------------------------------------------------------------

    def poll_local(self) -> bool:
        """Run once: act on the local trigger file if it is there. True if it fired. Whatever
        the file holds (nothing, bad JSON, not an object), its presence fires the switch."""
        path = self.local_file
        if self.halt is not None or not path.exists():
            return False
        try:
            raw = path.read_bytes()
        except OSError:  # unreadable (a directory, no permission): still a trigger
            raw = b""
        by, reason = _who(_read_trigger(raw), "local file")
        self._fire_from_thread(by, "file", reason)
        return True

    def poll_database(self) -> bool:
        """Run once (PostgreSQL): act on a halt flag that another worker, or `switchboard
        kill` on another host, wrote into the shared database. True if it fired."""
        if self.halt is not None:
            return False
        flag = get_sync(database_target(self.settings), HALT_KEY, timeout_s=2.0)
        if not isinstance(flag, dict) or self.halt is not None:
            return False
        self._fire_from_thread(str(flag.get("by") or "another worker")[:200],
                               str(flag.get("via") or "database")[:50],
                               str(flag.get("reason") or "")[:1000], stored=True)
        return True

    def hear_database(self) -> None:
        """Run until closed or the connection fails (PostgreSQL): listen for the halt flag's
        notification, and poll the flag (`poll_database`) on each one heard."""
        for _ in private.listen(database_target(self.settings), HALT_CHANNEL, self._stop):
            self.poll_database()

    def _gcs_poller(self) -> Callable[[], object]:
        """One GCS poll per call, with a client made on first use and again after a failure."""
        client: Any = None

        def poll() -> bool:
            nonlocal client
            try:
                from google.cloud import storage  # deferred: a heavy import few setups need
            except ImportError:
                raise RuntimeError("google-cloud-storage is not installed: the GCS trigger "
                                   "cannot work; install it or unset gcs_bucket") from None
            try:
                if client is None:
                    client = storage.Client(**self.settings.gcs_client_kwargs())
                return self.poll_gcs(client)
            except Exception:
                client = None  # a new one on the next poll
                raise

        return poll

    def poll_gcs(self, client: Any) -> bool:
        """Run once: act on the trigger object in the bucket if it is new. True if it fired."""
        blob = client.bucket(self.settings.gcs_bucket).get_blob(GCS_OBJECT)
        if blob is None or self.halt is not None:
            return False
        target = database_target(self.settings)
        if get_sync(target, GCS_CURSOR_KEY) == blob.generation:
            return False  # this object was acted on, then deactivated
        set_sync(target, GCS_CURSOR_KEY, blob.generation, now=self.clock.now)
        by, reason = _who(_read_trigger(blob.download_as_bytes()), "cloud console")
        self._fire_from_thread(by, "gcs", reason)
        return True


def _log_failure(task: asyncio.Task[KillReport]) -> None:
    """The bookkeeping is awaited only by whoever asks for its report: say if it failed."""
    if task.cancelled():
        logger.error("kill switch: the bookkeeping after a kill was cancelled before its end "
                     "(agents' states, the audit row or the notice may be missing)")
    elif task.exception() is not None:
        logger.error("kill switch: the bookkeeping after a kill failed",
                     exc_info=task.exception())


async def _mark_killed(runner: Any) -> bool:
    """One agent's records after the kill, bounded; False (and logged) if they failed."""
    try:
        async with asyncio.timeout(MARK_KILLED_S):
            await runner.mark_killed("kill switch", swept=True)
        return True
    except Exception:  # noqa: BLE001 - the next agents' records go on regardless
        logger.exception("kill switch: agent %s could not be recorded as killed", runner.name)
        return False


async def in_own_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a thread started for it, not the loop's shared executor (`to_thread`):
    the kill must not queue behind calls stuck in every thread of that pool (a read that
    never returns, a bucket that never answers)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, exc: BaseException | None) -> None:
        if done.cancelled():
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(cast(T, result))

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name="killswitch-fire", daemon=True).start()
    return await done


def known_pids(runners: list[Any]) -> tuple[tuple[int, ...], dict[int, int]]:
    """The inits and bwraps of the runners' sandboxes, and when each started (read on the
    loop: cheap, no /proc)."""
    pids: list[int] = []
    started: dict[int, int] = {}
    for runner in runners:
        proc = getattr(runner, "process", None)
        if proc is not None and proc.sandboxed:
            pids += [p for p in (proc.init_pid, proc.launcher_pid) if p]
            started.update(proc.started)
    return tuple(pids), started


def _read_trigger(raw: bytes) -> dict[str, Any]:
    """A trigger's JSON object; {} for anything else (empty, not JSON, not an object)."""
    try:
        data = json.loads(raw.decode("utf-8", "replace") or "{}")
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _who(data: dict[str, Any], default_by: str) -> tuple[str, str]:
    """(by, reason) from a trigger, bounded: a file anyone can write is no place for essays."""
    return str(data.get("by") or default_by)[:200], str(data.get("reason") or "")[:1000]


def write_local_trigger(settings: Settings, by: str, reason: str,
                        clock: Clock = SYSTEM_CLOCK) -> Path:
    """What `switchboard kill` does first: the running supervisor's watcher acts on it."""
    path = settings.home / LOCAL_FILE
    settings.home.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"by": by, "reason": reason, "at": clock.now()}))
    tmp.replace(path)
    return path
