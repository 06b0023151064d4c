"""What the `switchboard` command does with no supervisor running (or a hung one): list the
recorded agents, check the database, find the CLI, and pull the kill switch from a shell. The
entry point calls these; it never touches the store or the processes itself."""

from __future__ import annotations

import fcntl
import json
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from store import open_store
from store.audit import record_sync
from store.errors import StoreError
from store.kv import get_sync, set_sync
from supervisor.config import Settings
from supervisor.errors import StoreFailed
from supervisor.guard.killswitch import HALT_KEY, LOCAL_FILE, write_local_trigger
from supervisor.guard.policy import Policy, PolicyError
from supervisor.process.agent import resolve_cli
from supervisor.process.tree import sweep, tagged_family
from supervisor.redact import SECRETS


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


def halt_state(settings: Settings) -> HaltState | None:
    """The kill switch's state without a supervisor: the halt flag in the database, else the
    trigger file that `switchboard kill` (or anyone) wrote. None when it is off."""
    flag = None
    if settings.db_path.exists():
        try:
            flag = get_sync(settings.db_path, HALT_KEY)
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


async def recorded_agents(settings: Settings) -> list[RecordedAgent]:
    """Every agent the database holds, read-only (a running supervisor may hold it too)."""
    try:
        store = await open_store(settings.db_path, read_only=True)
    except StoreError as exc:
        raise StoreFailed(exc) from exc
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
    if settings.db_path.exists():
        try:
            set_sync(settings.db_path, HALT_KEY,
                     {"by": by, "via": "cli", "reason": reason, "at": time.time()})
        except Exception as exc:  # noqa: BLE001 - report and go on killing
            problems.append(f"could not write the halt flag into the database: {exc}")
    killed = tuple(sorted(running.union(sweep(prefix))))
    summary = f"kill switch on: wrote {path}; SIGKILLed {len(killed)} agent process(es)."
    if settings.db_path.exists():
        try:
            SECRETS.add(*settings.secret_values())
            record_sync(settings.db_path, platform="cli", user_id=by, action="killswitch",
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
