"""A throw-away PostgreSQL server for the tests: Debian's binaries, a cluster made in a temporary
directory, listening on a Unix socket in that directory only (no TCP port to collide with), and
a fresh database per test copied from a migrated template.

When the binaries are missing the PostgreSQL tests are skipped with the reason, except under CI
(`CI=true`), where a missing or failing server is an error: `.ci/run` installs `postgresql`.
"""

from __future__ import annotations

import asyncio
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Where Debian puts the server's programs (not on PATH); SWITCHBOARD_TEST_PG_BIN overrides.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
START_TIMEOUT_S = 60
TEMPLATE = "sb_template"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def find_bin() -> Path | None:
    """The directory holding initdb and pg_ctl, the newest version first."""
    given = os.environ.get("SWITCHBOARD_TEST_PG_BIN")
    if given:
        return Path(given) if (Path(given) / "initdb").exists() else None
    found = sorted(glob.glob(DEBIAN_BIN_GLOB),
                   key=lambda p: [int(x) for x in Path(p).parent.name.split(".") if x.isdigit()])
    for candidate in reversed(found):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def unavailable(reason: str) -> None:
    """Skip (a developer's machine without PostgreSQL), or fail (CI, which installs it)."""
    if in_ci():
        pytest.fail(f"PostgreSQL is required under CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason} (apt-get install postgresql; "
                "CI=true makes this an error)")


class Cluster:
    """One server. initdb refuses to run as root: as root the cluster belongs to `nobody`."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="sbpg-"))  # short: a socket path's limit
        self.data = self.dir / "data"
        self._as: Callable[[], None] | None = None
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)

            def drop() -> None:
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)

            self._as = drop
        self._ids = itertools.count(1)

    def _run(self, *args: str) -> None:
        proc = subprocess.run([str(self.bin / args[0]), *args[1:]], preexec_fn=self._as,  # noqa: PLW1509 - only drops to nobody
                              capture_output=True, text=True, timeout=START_TIMEOUT_S,
                              cwd=self.dir, check=False)
        if proc.returncode != 0:
            log = self.dir / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}"
                               f"{tail}")

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8", "--locale=C")
        self.serve()

    def halt(self) -> None:
        """Stop the server at once (its clients' connections break), keeping its data."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")

    def serve(self) -> None:
        """Start the server on the cluster made by `start` (again, after `halt`)."""
        # fsync off: a test cluster thrown away after the run needs no durability.
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-w",
                  "-t", str(START_TIMEOUT_S), "-o",
                  f"-k {self.dir} -c listen_addresses='' -c fsync=off "
                  "-c synchronous_commit=off -c full_page_writes=off", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.dir}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.encode())

    def new_database(self) -> str:
        """A fresh database with the schema (a copy of the migrated template): its URL. The
        files are copied whole (FILE_COPY), not block by block through the WAL (WAL_LOG, the
        default): 0.1-0.4 s against 0.2-1.7 s a database on a loaded two-core machine."""
        name = f"t{os.getpid()}_{next(self._ids)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.split("?")[0].rsplit("/", 1)[1]
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def started(bin_dir: Path) -> Cluster:
    """A running server with the migrated template (`new_database` copies it); stopped again
    and the error raised when it cannot start. The session fixture's, and the scale-out
    bench's (bench/scale_out.py)."""
    cluster = Cluster(bin_dir)
    try:
        cluster.start()
        cluster.admin(f"CREATE DATABASE {TEMPLATE}")
        asyncio.run(_migrate(cluster.url(TEMPLATE)))
    except Exception:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """One PostgreSQL server for the session (per xdist worker), with the migrated template.
    Imported by the conftest of each directory whose tests use it."""
    bin_dir = find_bin()
    if bin_dir is None:
        unavailable("no initdb found (Debian's postgresql package, or the directory "
                    "SWITCHBOARD_TEST_PG_BIN names)")
    assert bin_dir is not None
    try:
        cluster = started(bin_dir)
    except Exception as exc:  # a server that cannot start is an error, never a skip
        pytest.fail(f"the test PostgreSQL server did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def database(pg_cluster: Cluster) -> Iterator[str]:
    """A fresh, migrated database on the session's server, dropped after the test."""
    url = pg_cluster.new_database()
    try:
        yield url
    finally:
        pg_cluster.drop_database(url)


async def _migrate(url: str) -> None:
    from store.pg import PgDatabase

    async with PgDatabase(url):
        pass
