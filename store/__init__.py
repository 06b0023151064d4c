"""Persistence: SQLite (WAL), or PostgreSQL (store/pg.py), with migrations and one repository
per table family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from store.agents import AgentRepo
from store.audit import AuditRepo
from store.bus import BusRepo
from store.charters import CharterRepo
from store.clock import Now, system_now
from store.db import AnyDatabase, Database
from store.db import rescued_path as rescued_path  # for the composition root
from store.errors import StoreUnavailable
from store.escalations import EscalationRepo
from store.events import EventRepo
from store.kv import KvRepo
from store.leases import LeaseRepo
from store.operators import OperatorRepo
from store.repos import RepoRepo
from store.results import ResultRepo
from store.reviews import ReviewRepo
from store.schedules import ScheduleRepo
from store.turns import TurnRepo
from store.web import WebCredentialRepo
from store.workers import WorkerRepo


@dataclass(frozen=True, slots=True)
class Store:
    db: AnyDatabase
    agents: AgentRepo
    events: EventRepo
    turns: TurnRepo
    audit: AuditRepo
    escalations: EscalationRepo
    kv: KvRepo
    operators: OperatorRepo
    bus: BusRepo
    charters: CharterRepo
    repos: RepoRepo
    schedules: ScheduleRepo
    results: ResultRepo
    web: WebCredentialRepo
    reviews: ReviewRepo
    workers: WorkerRepo
    leases: LeaseRepo

    @classmethod
    def on(cls, db: AnyDatabase, *, redact: Callable[[str], str] | None = None,
           now: Now = system_now) -> Store:
        """`now` stamps every row a repository times itself (the caller's clock)."""
        return cls(db, AgentRepo(db, now=now), EventRepo(db, now=now), TurnRepo(db, now=now),
                   AuditRepo(db, redact, now=now), EscalationRepo(db, now=now),
                   KvRepo(db, now=now), OperatorRepo(db, now=now), BusRepo(db),
                   CharterRepo(db), RepoRepo(db, now=now), ScheduleRepo(db),
                   ResultRepo(db, now=now), WebCredentialRepo(db, now=now),
                   ReviewRepo(db, now=now), WorkerRepo(db), LeaseRepo(db))


async def open_store(path: Path, *, read_only: bool = False,
                     redact: Callable[[str], str] | None = None,
                     now: Now = system_now, database_url: str | None = None) -> Store:
    """`redact` scrubs secrets from audit rows before they are written; `now` is the clock
    that stamps them (the supervisor's, injected by the composition root). With a
    `database_url` (postgresql://...), the store is that PostgreSQL database and `path` is not
    used; without one, the SQLite file at `path`."""
    db: AnyDatabase
    if database_url:
        where = database_url.split("://")[0] + "://..."
        try:
            from store.pg import PgDatabase, is_postgres_url  # psycopg: the `postgresql` extra
        except ImportError as exc:
            raise StoreUnavailable(where, "the PostgreSQL driver is not installed: pip install"
                                   " 'switchboard[postgresql]' (psycopg 3)") from exc
        if read_only or not is_postgres_url(database_url):
            raise StoreUnavailable(where, "a database URL is postgresql://..., opened for"
                                   " writing")
        db = PgDatabase(database_url)
    else:
        db = Database(path, read_only=read_only)
    await db.open()
    return Store.on(db, redact=redact, now=now)
