"""The store under test, once per backend: each suite in tests/store is a contract that every
storage engine honours, written against the protocols of store/protocols.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from store import Store, open_store
from store.agents import AgentRow
from store.writer import ThreadWriter
from tests.pg import Cluster, pg_cluster

# The engines every conformance suite runs against: SQLite (a file per test) and PostgreSQL (a
# server per test session, a database per test: tests/pg.py).
BACKENDS = ["sqlite", "postgresql"]
__all__ = ["pg_cluster"]  # the session's server (tests/pg.py), a fixture of this directory

T0 = 1_750_000_000.0  # the fake clock's start: any fixed epoch time far from the real one


class FakeNow:
    """The store's injected clock: stands still until a test moves it."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> float:
        self.t += s
        return self.t


@pytest.fixture
def clock() -> FakeNow:
    return FakeNow()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None on SQLite; on PostgreSQL a fresh database's URL, dropped after the test."""
    if backend == "sqlite":
        yield None
        return
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    opened: list[str] = []

    def make() -> str:
        opened.append(cluster.new_database())
        return opened[-1]

    request.node.stash[_MORE_DATABASES] = make
    try:
        yield make()
    finally:
        for url in opened:
            cluster.drop_database(url)


_MORE_DATABASES = pytest.StashKey[Callable[[], str]]()


@pytest.fixture
async def store(backend: str, database_url: str | None, tmp_path: Path,
                clock: FakeNow) -> AsyncIterator[Store]:
    """A fresh, migrated store whose every time stamp comes from `clock`; its audit redactor
    stands in for the real one (bot/app.py passes the secrets'): "hunter2" is the secret."""
    s = await open_store(tmp_path / "store.db", now=clock, redact=lambda t: t.replace(
        "hunter2", "[redacted]"), database_url=database_url)
    try:
        yield s
    finally:
        await s.db.close()


OpenAt = Callable[[Callable[[], float]], Awaitable[Store]]


@pytest.fixture
async def open_at(backend: str, database_url: str | None, tmp_path: Path,
                  request: pytest.FixtureRequest) -> AsyncIterator[OpenAt]:
    """Opens another store of this backend (another database), with the clock given (closed
    after the test)."""
    opened: list[Store] = []

    async def open_(now: Callable[[], float]) -> Store:
        url = None if database_url is None else request.node.stash[_MORE_DATABASES]()
        s = await open_store(tmp_path / f"other-{len(opened)}.db", now=now, database_url=url)
        opened.append(s)
        return s

    try:
        yield open_
    finally:
        for s in opened:
            await s.db.close()


Tx = Callable[[Callable[[Any], Any]], Awaitable[Any]]


async def _one_write_each(writer: Any) -> AsyncIterator[Tx]:
    """`writer` open for as long as the fixture lives; each call is one write in a transaction
    of its own, returning what the write returned."""
    await writer.open()

    async def run(write: Callable[[Any], Any]) -> Any:
        [value] = await writer.transaction([write])
        return value

    try:
        yield run
    finally:
        await writer.close()


@pytest.fixture
async def bus_tx(store: Store, backend: str) -> AsyncIterator[Tx]:
    """One write of the bus, in its own transaction on the bus's writer: `await bus_tx(lambda
    conn: store.bus.insert(conn, msg))` returns what the write returned."""
    async for run in _one_write_each(store.bus.writer()):
        yield run


@pytest.fixture
async def events_tx(store: Store, backend: str) -> AsyncIterator[Tx]:
    """One write of the event ingest or retention (EventRepo's static steps), in its own
    transaction on a writer of its own, as supervisor/agents/ingest.py and retention.py run them."""
    async for run in _one_write_each(ThreadWriter(store.db.writer_target,
                                                  name="events writer")):
        yield run


MakeAgent = Callable[..., Awaitable[AgentRow]]


@pytest.fixture
def make_agent(store: Store) -> MakeAgent:
    async def make(agent_id: str = "a1", name: str = "alpha", *, state: str = "starting",
                   parent_id: str | None = None, model: str | None = None,
                   project_settings: bool = False) -> AgentRow:
        return await store.agents.create(
            id=agent_id, name=name, parent_id=parent_id, model=model, cwd="/w", prompt="p",
            permission_mode="default", state=state, project_settings=project_settings)

    return make

