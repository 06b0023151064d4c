"""What an operator's --cwd may be (supervisor/process/workdir.py), on the real filesystem and
the real account database: the refused directories, and that every refusal says what to do
(issue 25: the old message told root to `chown -R 61000:61000` even /etc, never --repo)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.config import Settings
from supervisor.errors import InvalidRequest
from supervisor.process.sandbox import Isolation
from supervisor.process.workdir import Workdir, examine
from tests.conftest import agent_uid

ROOT_ISO = Isolation(True, "test", bwrap="/usr/bin/bwrap", uid=61000, gid=61000)
OTHER = 61500  # a uid that is neither ours nor the agents'


@pytest.fixture
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="sbwd", dir="/var/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def settings_in(base: Path) -> Settings:
    return Settings(home=base / "sb")


def refused(settings: Settings, path: str | Path, iso: Isolation | None = ROOT_ISO) -> str:
    with pytest.raises(InvalidRequest) as err:
        examine(settings, iso, path, check_mapping=False)
    text = str(err.value)
    assert "/repo add" in text and "--repo" in text, text
    assert "61000:61000" not in text, text
    return text


@pytest.mark.parametrize("path", ["/", "/etc", "/etc/ssh", "/usr", "/usr/lib", "/var",
                                  "/var/lib", "/boot", "/home", "/tmp", "/var/tmp", "/proc"])
def test_system_directories_are_refused(base: Path, path: str) -> None:
    text = refused(settings_in(base), path)
    assert "refused" in text and "chown" not in text, text


def test_a_home_directory_and_its_dot_directories_are_refused(
        base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = base / "alice"
    (home / ".ssh").mkdir(parents=True)
    (home / "src" / "tool").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    s = settings_in(base)
    assert "a home directory" in refused(s, home)
    assert ".ssh" in refused(s, home / ".ssh")
    assert examine(s, None, "~/src/tool").path == home / "src" / "tool"  # a project in it is fine


def test_the_data_directory_and_what_holds_it_are_refused(base: Path) -> None:
    s = settings_in(base)
    (s.home / "agents").mkdir(parents=True)
    assert "data directory" in refused(s, s.home)
    assert "data directory" in refused(s, s.home / "agents")
    assert "holds" in refused(s, base)


def test_a_missing_directory_says_so(base: Path) -> None:
    with pytest.raises(InvalidRequest, match="not an existing directory"):
        examine(settings_in(base), ROOT_ISO, base / "nope")


def test_the_agents_own_directory_needs_no_mapping(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    d = base / "mine"
    d.mkdir()
    os.chown(d, 61000, 61000)
    assert examine(settings_in(base), ROOT_ISO, d) == Workdir(d, None)


def test_another_users_directory_is_mapped_to_its_owner(base: Path) -> None:
    if agent_uid() is None:
        pytest.skip("the mapping is for a supervisor running as root")
    d = base / "theirs"
    d.mkdir()
    os.chown(d, OTHER, OTHER)
    wd = examine(settings_in(base), ROOT_ISO, d)  # the real mapping, tried in a child
    assert wd.owner == (OTHER, OTHER)
    assert wd.idmap(ROOT_ISO) == f"{OTHER}:{OTHER}:61000:61000"


def test_a_root_group_is_not_handed_to_the_agent(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    d = base / "theirs"
    d.mkdir()
    os.chown(d, OTHER, 0)
    wd = examine(settings_in(base), ROOT_ISO, d, check_mapping=False)
    assert wd.owner == (OTHER, OTHER)  # no passwd entry: the owner's uid as its group


def test_a_root_directory_others_can_reach_is_refused(base: Path) -> None:
    """The agent writes as the owner: in a root-owned tree any local user can reach, it could
    leave a set-user-ID root program behind."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    d = base / "rootproj"
    d.mkdir(mode=0o755)
    text = refused(settings_in(base), d)
    assert "set-user-ID" in text and "chown -R <user>:" in text, text
    d.parent.chmod(0o700)  # only root reaches it now (as under /root): allowed
    try:
        assert examine(settings_in(base), ROOT_ISO, d, check_mapping=False).owner == (0, 0)
    finally:
        d.parent.chmod(0o755)


def test_a_directory_its_owner_cannot_write_is_refused(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    d = base / "frozen"
    d.mkdir(mode=0o555)
    os.chown(d, OTHER, OTHER)
    assert "chmod u+w" in refused(settings_in(base), d)


def test_unprivileged_supervisor_says_to_run_as_root_or_use_a_repo(base: Path) -> None:
    iso = Isolation(True, "test", bwrap="/usr/bin/bwrap")  # agents keep our uid
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    text = refused(settings_in(base), "/usr/share")
    assert "refused" in text
    d = base / "ro"
    d.mkdir(mode=0o555)
    assert "Run Switchboard as root" in refused(settings_in(base), d, iso)
