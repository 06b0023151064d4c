"""A hostile agent spawned with --cwd in a directory another user owns, Switchboard as root
(issue 25). The agent must be able to edit the project, and what it makes there must be the
owner's; it tries to write the project's parent, a sibling directory of the same owner (also
through a symlink it plants), a world-writable directory outside, the host's /tmp and
Switchboard's data directory, and leaves no trace of its own uid anywhere. The policy allows
everything: only the sandbox stands in the way.

Everything lives under /var/tmp, not /tmp: the agent's /tmp is its own, so a tree under the
host's /tmp would be out of reach whatever the rest of the sandbox did.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.app import Switchboard
from tests.conftest import PERMISSIVE_POLICY, agent_uid, make_settings, run
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

OWNER = 61500  # another user: neither root nor the agents' uid


@pytest.fixture
def tree() -> Iterator[Path]:
    if agent_uid() is None:
        pytest.skip("the owner mapping is for a supervisor running as root")
    base = Path(tempfile.mkdtemp(prefix="sbcwd", dir="/var/tmp"))
    base.chmod(0o711)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def app(tree: Path, mock_api) -> AsyncIterator[Switchboard]:
    (tree / "t").mkdir()
    settings = make_settings(tree, mock_api, policy_file=PERMISSIVE_POLICY)
    async with Switchboard(settings) as sb:
        yield sb


def _owned(path: Path, mode: int, text: str | None = None) -> Path:
    if text is None:
        path.mkdir(mode=mode)
    else:
        path.write_text(text)
    path.chmod(mode)
    os.chown(path, OWNER, OWNER)
    return path


def _everything_under(top: Path) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for base, dirs, files in os.walk(top):
        for n in (*dirs, *files):
            p = os.path.join(base, n)
            st = os.lstat(p)
            data = Path(p).read_bytes() if n in files and stat.S_ISREG(st.st_mode) else b""
            out[p] = (st.st_uid, st.st_gid, data)
    return out


async def test_an_agent_edits_another_users_project_and_nothing_else(app: Switchboard, tree: Path,
                                                                      mock_api) -> None:
    home = _owned(tree / "owner", 0o755)
    project = _owned(home / "project", 0o755)
    notes = _owned(project / "notes.txt", 0o644, "before\n")
    sibling = _owned(home / "sibling", 0o755)
    _owned(sibling / "keep.txt", 0o644, "sibling\n")
    open_dir = tree / "open"  # world-writable, outside the project: the agent uid could write
    open_dir.mkdir()          # here on the host itself
    open_dir.chmod(0o1777)
    host_tmp = Path(tempfile.mkdtemp(prefix="sbcwd"))  # the host's /tmp, not the agent's
    host_tmp.chmod(0o1777)
    data = app.settings.home.resolve()
    outside_before = {p: _everything_under(p) for p in (home, open_dir, host_tmp, data)}
    outside_before[home] = {p: v for p, v in outside_before[home].items()  # the project may
                            if p != str(project) and not p.startswith(f"{project}/")}  # change

    attempts = {
        "parent": f"echo x > '{home}/parent.txt'",
        "sibling": f"echo x > '{sibling}/pwned.txt'",
        "sibling-edit": f"echo x >> '{sibling}/keep.txt'",
        "link": f"ln -s '{sibling}' '{project}/link' && echo x > '{project}/link/via-link.txt'",
        "open": f"echo x > '{open_dir}/pwned.txt'",
        "hosttmp": f"echo x > '{host_tmp}/pwned.txt'",
        "data": f"echo x > '{data}/pwned.txt'",
        "db": f"echo x >> '{app.settings.db_path}'",
        # Its own uid inside is the owner's outside (a no-op chown); another one it cannot give.
        "chown-root": f"mkdir '{project}/mine' && chown -h 0 '{project}/mine'",
        "chgrp-root": f"chgrp -h 0 '{project}/notes.txt'",
    }
    script = [f"cd '{project}'", "echo after >> notes.txt; echo \"edit rc=$?\"",
              "mkdir -p src && echo 'print(1)' > src/new.py; echo \"new rc=$?\""]
    script += [f"( {cmd} ) 2>/dev/null; echo \"{name} rc=$?\"" for name, cmd in attempts.items()]
    [agent] = await spawn_fleet(app, ["editor"], bash_script("\n".join(script) + "\n"),
                                cwd=str(project))
    out = "\n".join(c.result for c in tool_calls(mock_api))
    assert "edit rc=0" in out and "new rc=0" in out, out
    for name in attempts:
        assert f"{name} rc=" in out, out
        assert f"{name} rc=0" not in out, f"the agent managed {name}:\n{out}"

    # The project: edited, and what the agent made is the owner's, not the agent uid's.
    assert notes.read_text() == "before\nafter\n"
    new = project / "src" / "new.py"
    assert new.read_text() == "print(1)\n"
    for p in (new, new.parent, notes):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (OWNER, OWNER), (p, st.st_uid, st.st_gid)
    agent_ids = agent_uid()
    assert agent_ids is not None
    for p, (uid, _gid, _data) in _everything_under(project).items():
        assert uid != agent_ids[0], f"{p} is the agent uid's"
    # Outside it: not one byte or owner changed, nothing new.
    for top, before in outside_before.items():
        after = _everything_under(top)
        if top == home:
            after = {p: v for p, v in after.items() if not p.startswith(f"{project}/")}
            del after[str(project)]
        if top == data:  # the supervisor's own files change as it runs; look for the agent's
            assert not any(uid == agent_ids[0] and p not in before and "/agents/" not in p
                           and "/context" not in p for p, (uid, _g, _d) in after.items())
            assert not (data / "pwned.txt").exists()
            continue
        assert after == before, f"{top} changed"
    # And the mapping was the sandbox's alone: the host has no mount of the project.
    assert str(project) not in Path("/proc/self/mountinfo").read_text()
    shutil.rmtree(host_tmp, ignore_errors=True)
    await run(app, f"/kill {agent.name}")


async def test_refused_directories_say_what_to_do(app: Switchboard, tree: Path) -> None:
    rootproj = tree / "rootproj"
    rootproj.mkdir(mode=0o755)  # root's, and anyone can reach it
    for where in ("/etc", "/", "/usr/lib", str(app.settings.home), str(tree), str(rootproj)):
        reply = await run(app, f"/spawn bad --cwd {where} BASH: id")
        text = reply.plain()
        assert not reply.ok, text
        assert "/repo add" in text and "--repo" in text, text
        assert "61000:61000" not in text, text
    assert await app.store.agents.live_name_taken("bad") is False
