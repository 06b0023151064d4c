"""What the `switchboard` command does with no supervisor running (or a hung one): list the
recorded agents, check the database, find the CLI, and pull the kill switch from a shell. The
entry point calls these; it never touches the store or the processes itself."""

from __future__ import annotations

import fcntl
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from store import Store, open_store
from store.audit import record_sync
from store.errors import StoreError
from store.kv import get_sync, set_sync
from supervisor.config import Settings
from supervisor.errors import StoreFailed
from supervisor.guard.killswitch import (
    HALT_CHANNEL,
    HALT_KEY,
    LOCAL_FILE,
    PERSIST_WAIT_S,
    database_target,
    write_local_trigger,
)
from supervisor.guard.policy import Policy, PolicyError
from supervisor.process.agent import resolve_cli
from supervisor.process.tree import sweep, tagged_family
from supervisor.redact import SECRETS
from supervisor.workers import WorkerView


@dataclass(frozen=True, slots=True)
class RecordedAgent:
    name: str
    id: str
    state: str
    cost_usd: float
    cwd: str


@dataclass(frozen=True, slots=True)
class ShellKill:
    trigger_file: Path
    killed: tuple[int, ...]
    summary: str
    problems: tuple[str, ...]  # what could not be done (the kill itself always is)


@dataclass(frozen=True, slots=True)
class HaltState:
    """The kill switch as the data directory records it (ON when this exists)."""

    by: str
    via: str
    reason: str
    at: float | None
    pending: bool  # only the trigger file: a supervisor acts on it when it next looks


def has_database(settings: Settings) -> bool:
    """Whether there is a database to read or write (a SQLite file not made yet is not)."""
    return settings.database_url is not None or settings.db_path.exists()


def halt_state(settings: Settings) -> HaltState | None:
    """The kill switch's state without a supervisor: the halt flag in the database, else the
    trigger file that `switchboard kill` (or anyone) wrote. None when it is off."""
    flag = None
    if has_database(settings):
        try:
            flag = get_sync(database_target(settings), HALT_KEY)
        except Exception:  # noqa: BLE001 - an unreadable database: the trigger file still says
            flag = None
    if isinstance(flag, dict):
        at = flag.get("at")
        return HaltState(str(flag.get("by") or "?"), str(flag.get("via") or "?"),
                         str(flag.get("reason") or ""),
                         float(at) if isinstance(at, int | float) else None, False)
    trigger = settings.home / LOCAL_FILE
    if not trigger.exists():
        return None
    try:
        data = json.loads(trigger.read_text())
    except (OSError, ValueError):
        data = {}
    data = data if isinstance(data, dict) else {}
    at = data.get("at")
    return HaltState(str(data.get("by") or "local file"), "file", str(data.get("reason") or ""),
                     float(at) if isinstance(at, int | float) else None, True)


def policy_problem(settings: Settings) -> str | None:
    """Why the policy file would stop `switchboard run` from starting, or None."""
    try:
        Policy.load(settings.policy_path)
    except PolicyError as exc:
        return str(exc)
    return None


def find_cli(settings: Settings) -> Path:
    """The claude CLI agents run (ConfigError if there is none)."""
    return resolve_cli(settings)


async def _reader(settings: Settings) -> Store:
    url = settings.database_url.value if settings.database_url is not None else None
    try:  # PostgreSQL has no read-only open: a reader there is one more client
        return await open_store(settings.db_path, read_only=url is None, database_url=url)
    except StoreError as exc:
        raise StoreFailed(exc) from exc


async def recorded_hosts(settings: Settings) -> list[WorkerView]:
    """The workers the database lists (supervisor/workers.py), the coordinator first; none
    from a database older than the table."""
    store = await _reader(settings)
    try:
        return [WorkerView(w.host, w.pid, w.agents, w.memory_available, bool(w.coordinator),
                           max(0.0, w.age_s), False) for w in await store.workers.list()]
    except StoreError:
        return []
    finally:
        await store.db.close()


async def recorded_agents(settings: Settings) -> list[RecordedAgent]:
    """Every agent the database holds, read-only (a running supervisor may hold it too)."""
    store = await _reader(settings)
    try:
        rows = await store.agents.list()
        totals = {t.key: t for t in await store.turns.totals_by_agent()}
        return [RecordedAgent(r.name, r.id, r.state,
                              totals[r.id].cost_usd if r.id in totals else 0.0, r.cwd)
                for r in rows]
    except StoreError as exc:
        raise StoreFailed(exc) from exc
    finally:
        await store.db.close()


# What is off on PostgreSQL, said by `switchboard doctor` and the start log.
SQLITE_ONLY_OFF = ("on PostgreSQL the parts about the SQLite file are off: the storage guard's "
                   "file checks, the bucket snapshots and agent leases (gcs_bucket still "
                   "serves the kill switch's trigger and the transcripts), and `switchboard "
                   "backup`/`restore`; back the database up with PostgreSQL's own tools "
                   "(pg_dump, base backups: docs/postgresql.md)")


def database_where(settings: Settings) -> str:
    """The database, for messages: the SQLite file, or the PostgreSQL URL without its password."""
    if settings.database_url is None:
        return str(settings.db_path)
    url = urlsplit(settings.database_url.value)
    host = url.hostname or ""
    netloc = f"{url.username}@{host}" if url.username else host
    return urlunsplit((url.scheme, netloc + (f":{url.port}" if url.port else ""), url.path,
                       url.query, ""))


async def schema_version(settings: Settings) -> int:
    """Open (and migrate) the database; its schema version."""
    url = settings.database_url.value if settings.database_url is not None else None
    try:
        store = await open_store(settings.db_path, database_url=url)
    except StoreError as exc:
        raise StoreFailed(exc) from exc
    try:
        return store.db.schema_version
    finally:
        await store.db.close()


def kill_from_shell(settings: Settings, by: str, reason: str) -> ShellKill:
    """The kill switch without the supervisor's help: the trigger file (a running supervisor
    acts on it), the halt flag written straight into the database, a direct sweep by agent tag,
    and an audit row. Each step is tried whatever happened to the one before."""
    problems: list[str] = []
    prefix = f"{settings.instance_id}/"
    # Counted before the trigger: a running supervisor's watcher may end some of them first,
    # and the count says how many agent processes this command ended, by either hand.
    running = tagged_family(prefix)
    path = write_local_trigger(settings, by, reason)
    target, has_db = database_target(settings), has_database(settings)
    flag_failed: list[str] = []

    def write_flag() -> None:
        try:
            set_sync(target, HALT_KEY, {"by": by, "via": "cli", "reason": reason,
                                        "at": time.time()}, notify=HALT_CHANNEL)
        except Exception as exc:  # noqa: BLE001 - report and go on killing
            flag_failed.append(str(exc))

    # The flag is written while the sweep runs, in a thread joined with a bound: a database
    # that does not answer never delays the kill (the trigger file halts a running supervisor).
    writer = threading.Thread(target=write_flag, name="kill-flag", daemon=True)
    if has_db:
        writer.start()
    killed = tuple(sorted(running.union(sweep(prefix))))
    if has_db:
        writer.join(PERSIST_WAIT_S)
        if writer.is_alive():
            flag_failed.append(f"the database did not answer within {PERSIST_WAIT_S:g} s")
    problems += [f"could not write the halt flag into the database: {why}"
                 for why in flag_failed]
    summary = f"kill switch on: wrote {path}; SIGKILLed {len(killed)} agent process(es)."
    if has_db and not writer.is_alive():
        try:
            SECRETS.add(*settings.secret_values())
            record_sync(target, platform="cli", user_id=by, action="killswitch",
                        args=f"on {reason}".strip(), ok=True, result=summary, redact=SECRETS)
        except Exception as exc:  # noqa: BLE001 - report and go on
            problems.append(f"could not write the audit row: {exc}")
    return ShellKill(path, killed, summary, tuple(problems))


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
