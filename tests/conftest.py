"""Shared fixtures: a mock Anthropic API, settings on a short data dir, a running Switchboard."""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

from bot.app import Switchboard
from commands.base import Caller, Context, Reply, Role
from commands.dispatcher import Dispatcher
from store import Store, open_store
from supervisor.api import SupervisorAPI
from supervisor.config import Settings
from supervisor.core import Core
from supervisor.events import EventHub
from supervisor.process.sandbox import agent_ids
from supervisor.process.tree import ns_pid
from tests.fakes.gcs import Emulator
from tests.fakes.mock_anthropic import MockAnthropic

T = TypeVar("T")


def _fake_claude_executable() -> Path:
    """tests/fakes/fake_claude.py as an executable that starts this interpreter directly: its
    `#!/usr/bin/env python3` can go through a version manager's shell shim, which costs more
    than the fake itself (a fleet test starts dozens of them)."""
    src = Path(__file__).resolve().parent / "fakes" / "fake_claude.py"
    where = Path(tempfile.mkdtemp(prefix="sbfake"))
    where.chmod(0o755)  # sandboxed agents run it as another uid
    exe = where / "claude"
    exe.write_text(f"#!{Path(sys.executable).resolve()} -S\n" + src.read_text().split("\n", 1)[1])
    exe.chmod(0o755)
    atexit.register(shutil.rmtree, where, True)
    return exe


FAKE_CLAUDE = _fake_claude_executable()
PERMISSIVE_POLICY = Path(__file__).resolve().parent / "fakes" / "permissive_policy.toml"
MODEL = "claude-sonnet-4-5"
ADMIN = Caller("test:admin", "tester", Role.ADMIN, "test")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long real-CLI fleets (`fleet` modules) first: `make test` hands each worker one
    module at a time in this order, and started last they would be the run's long tail. (Not
    xdist_group: pytest-xdist 3.8's loadgroup does not take hold with pytest 9.)"""
    items.sort(key=lambda item: item.get_closest_marker("fleet") is None)


def agent_uid() -> tuple[int, int] | None:
    """The uid/gid sandboxed agents run as when the tests run as root (else None)."""
    uid, gid = agent_ids(Settings(home=Path("/nonexistent")))
    return None if uid is None or gid is None else (uid, gid)


def agent_dir(path: Path) -> Path:
    """A directory an agent may work in (--cwd): created, and the agent user's when root."""
    path.mkdir(parents=True, exist_ok=True)
    ids = agent_uid()
    if ids is not None:
        os.chown(path, *ids)
    return path


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """pytest's tmp_path, handed to the agent user when we are root: tests pass it as an
    agent's --cwd, and a sandboxed agent runs as that user."""
    ids = agent_uid()
    if ids is not None:
        os.chown(tmp_path, *ids)
    return tmp_path


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A short data dir: the CLI's unix socket path under TMPDIR must stay under ~107 bytes."""
    d = Path(tempfile.mkdtemp(prefix="sbh", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gcs_emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The GCS emulator on a free port; STORAGE_EMULATOR_HOST points at it (for children too)."""
    port = free_port()
    exe = Path(sys.executable).with_name("gcp-storage-emulator")
    proc = subprocess.Popen([str(exe), "start", "--host", "127.0.0.1", "--port", str(port),
                             "--in-memory"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    yield host
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """The GCS emulator keeping its objects on disk (it can be stopped and started again),
    with the bucket `sb` made; STORAGE_EMULATOR_HOST points at it."""
    emu = Emulator(tmp_path_factory.mktemp("gcs"))
    emu.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.host)
    emu.bucket("sb")
    yield emu
    emu.stop()


@pytest.fixture
def mock_api() -> Iterator[MockAnthropic]:
    with MockAnthropic() as m:
        yield m


def make_settings(home: Path, mock: MockAnthropic | None = None, *, fake: bool = False,
                  **kw: object) -> Settings:
    agent_env: dict[str, str] = {}
    if mock is not None:
        agent_env = mock.cli_env(home / "claude", tmpdir=home / "t")
    return Settings(
        home=home / "sb",
        claude_cli=FAKE_CLAUDE if fake else None,
        default_model=MODEL,
        agent_env=agent_env,
        kill_grace_s=3.0,
        stop_grace_s=5.0,
        shutdown_grace_s=5.0,
        # Agents at the supervisor's priority in tests: on a machine shared with other work the
        # default (10 levels lower) makes every test wait on starved agents. The default is
        # tested on its own (tests/security/test_priority.py).
        agent_nice=kw.pop("agent_nice", 0),
        # Each notice on its own: tests wait for one notice after another. The digest is
        # tested on its own (tests/unit/test_kit_digest.py, tests/integration/test_kit_digest.py).
        notice_digest_s=kw.pop("notice_digest_s", 0.0),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def real_settings(short_home: Path, mock_api: MockAnthropic) -> Settings:
    (short_home / "t").mkdir(exist_ok=True)
    return make_settings(short_home, mock_api)


@pytest.fixture
def fake_settings(short_home: Path) -> Settings:
    return make_settings(short_home, fake=True)


@pytest.fixture
def permissive_settings(short_home: Path, mock_api: MockAnthropic) -> Settings:
    """Real CLI, every tool allowed: for tests of the core rather than of policy."""
    (short_home / "t").mkdir(exist_ok=True)
    return make_settings(short_home, mock_api, policy_file=PERMISSIVE_POLICY)


@pytest.fixture
async def real_app(real_settings: Settings) -> AsyncIterator[Switchboard]:
    async with Switchboard(real_settings) as app:
        yield app


@pytest.fixture
async def fake_app(fake_settings: Settings) -> AsyncIterator[Switchboard]:
    async with Switchboard(fake_settings) as app:
        yield app


class QuietSwitchboard:
    """The real dispatcher over the real API, pool and SQLite store, with the pool never
    started: no claude CLI, no agent process, no watcher thread. For what needs no agent:
    parsing, roles, errors, help, audit. Anything that would start work is refused as
    ShuttingDown."""

    def __init__(self, settings: Settings, store: Store, core: Core) -> None:
        self.settings = settings
        self.store = store
        self.core = core
        self.pool = core.pool
        self.api = SupervisorAPI.over(core)
        self.dispatcher = Dispatcher()

    def context(self, caller: Caller) -> Context:
        return Context(self.api, caller)

    async def run_command(self, caller: Caller, text: str) -> Reply:
        return await self.dispatcher.dispatch(self.context(caller), text)


@pytest.fixture(scope="session")
def migrated_db() -> Iterator[Path]:
    """An empty database with every migration applied, made once: a copy of it opens in
    well under a millisecond, where migrating a fresh file takes tens."""
    d = Path(tempfile.mkdtemp(prefix="sbdb", dir="/tmp"))

    async def make() -> None:
        store = await open_store(d / "switchboard.db")
        await store.db.close()

    asyncio.run(make())
    yield d / "switchboard.db"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def quiet_app(fake_settings: Settings, migrated_db: Path) -> AsyncIterator[QuietSwitchboard]:
    fake_settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_db, fake_settings.db_path)
    store = await open_store(fake_settings.db_path)
    core = Core(fake_settings, store, EventHub())
    try:
        yield QuietSwitchboard(fake_settings, store, core)
    finally:
        await store.db.close()  # the core never started: it holds nothing to stop


async def run(app: Switchboard | QuietSwitchboard, line: str) -> Reply:
    return await app.run_command(ADMIN, line)


def files_under(top: Path, suffix: str = "") -> Iterator[Path]:
    """Regular files under `top` (symlinks not followed), for a tree a live CLI is still
    writing: a directory it removes mid-walk (its `.claude.json.lock`) is skipped, where
    `Path.rglob` raises FileNotFoundError."""
    for root, _dirs, names in os.walk(top):
        for name in names:
            path = Path(root, name)
            if name.endswith(suffix) and path.is_file() and not path.is_symlink():
                yield path


async def wait_for(predicate: Callable[[], object], timeout: float = 60.0,
                   what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def settle(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """The synchronous `wait_for`, for tests that drive a supervisor subprocess: polls until
    `predicate()` is truthy and returns its value, or fails naming what it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class SeenProcess(psutil.Process):
    """A process as the table scan saw it: `name()` is the name it had then, and `status()`
    is `dead` once it has gone. An agent's CLI starts short-lived helpers; one that exits
    between the scan and a `p.name()` raised NoSuchProcess in the middle of a check about
    other processes (test_lifecycle_real failed so in a fresh-clone CI run)."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.seen_name = super().name()

    def name(self) -> str:
        return self.seen_name

    def status(self) -> str:
        """Its state now; `dead` once it has exited since the scan (never stopped, then)."""
        try:
            return str(super().status())
        except psutil.NoSuchProcess:
            return psutil.STATUS_DEAD


def processes_with_tag(tag: str) -> list[psutil.Process]:
    """The process-table check: every non-zombie process whose environment carries the tag."""
    needle = f"SWITCHBOARD_AGENT_TAG={tag}".encode()
    found: list[psutil.Process] = []
    for pid in psutil.pids():
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if needle not in fh.read():
                    continue
            proc = SeenProcess(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def host_pid(runner: object, inner: int) -> int:
    """The host pid of a process an agent reports by its pid inside its sandbox (the fake
    CLI's `BG STARTED <pid>`); the same pid when the agent is not sandboxed."""
    proc = runner.process  # type: ignore[attr-defined]
    if proc is None or not proc.sandboxed:
        return inner
    for pid in proc.members():
        if ns_pid(pid) == inner and pid != proc.launcher_pid:
            return pid
    raise AssertionError(f"no process of {runner} has pid {inner} in its namespace")


def descendants(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
