"""Hostile agents after the supervisor's secrets and files: its environment (chat tokens, cloud
keys, our own), the GOOGLE_APPLICATION_CREDENTIALS key file, the database, the log, the settings
and policy files, the user's home, the operator's Claude config dir and another agent's
workspace. Every probe runs (the policy allows everything); the wall must hold anyway.

Before the sandbox these failed outright: the agent ran as the supervisor's user (root here), so
`cat /proc/<supervisor pid>/environ` printed every token, the key file and the database were one
`cat` away, and `echo x >> switchboard.log` or `rm switchboard.db` just worked. Only the
agent's own environment was already an allowlist.

Everything lives outside /tmp on purpose: the agent's /tmp is its own, so a data dir under the
host's /tmp would be hidden whatever the rest of the sandbox did. Files are world-readable on
purpose too: what hides them must be the sandbox, not their mode.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.app import Switchboard
from tests.conftest import PERMISSIVE_POLICY, agent_uid, files_under, make_settings, run, wait_for
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

MARK = "SBSECRET-"  # every fake secret starts so: an agent greps for it, never for a value


@dataclass
class Exposed:
    """A supervisor whose environment and files hold fake secrets, and where they are."""

    base: Path
    secrets: dict[str, str]
    key_file: Path
    config_file: Path
    policy_file: Path
    user_home: Path
    env_names: tuple[str, ...] = ("TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN",
                                  "AWS_SECRET_ACCESS_KEY", "MY_SECRET")
    extra: dict[str, Path] = field(default_factory=dict)

    def values(self) -> list[str]:
        return list(self.secrets.values())


def _secret(kind: str) -> str:
    return f"{MARK}{kind}-{secrets.token_hex(8)}"


def _world_readable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o644)


@pytest.fixture
def exposed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Exposed]:
    base = Path(tempfile.mkdtemp(prefix="sbsec", dir="/var/tmp"))
    base.chmod(0o711)  # the agent may walk through, as through any parent of a project
    host_tmp = Path(tempfile.mkdtemp(prefix="sbsec"))  # in the host's /tmp, not the agent's
    host_tmp.chmod(0o755)
    try:
        s = {kind: _secret(kind) for kind in ("telegram", "slack", "aws", "mine", "gcp-key",
                                               "settings", "policy", "db", "log", "home",
                                               "opconfig", "workspace", "host-tmp")}
        key = base / "gcp" / "service-account.json"
        _world_readable(key, '{"type": "service_account", "private_key": "-----BEGIN PRIVATE '
                        f'KEY-----\\nMIIE{s["gcp-key"]}\\n-----END PRIVATE KEY-----\\n"}}\n')
        config = base / "etc" / "switchboard.toml"
        _world_readable(config, f'telegram_token = "{s["telegram"]}"\n# {s["settings"]}\n')
        policy = base / "etc" / "policy.toml"
        _world_readable(policy, PERMISSIVE_POLICY.read_text() + f"# {s['policy']}\n")
        home = base / "operator"
        _world_readable(home / ".aws" / "credentials",
                        f"[default]\naws_secret_access_key = {s['aws']}\n# {s['home']}\n")
        for name, value in (("TELEGRAM_BOT_TOKEN", s["telegram"]), ("SLACK_BOT_TOKEN", s["slack"]),
                            ("AWS_SECRET_ACCESS_KEY", s["aws"]), ("MY_SECRET", s["mine"]),
                            ("GOOGLE_APPLICATION_CREDENTIALS", str(key)), ("HOME", str(home))):
            monkeypatch.setenv(name, value)
        _world_readable(host_tmp / "notes.txt", s["host-tmp"] + "\n")
        yield Exposed(base, s, key, config, policy, home, extra={"host_tmp": host_tmp})
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(host_tmp, ignore_errors=True)


@pytest.fixture
async def exposed_app(exposed: Exposed, mock_api) -> AsyncIterator[Switchboard]:
    settings = make_settings(exposed.base, mock_api, policy_file=exposed.policy_file,
                             config_file=exposed.config_file)
    opconfig = Path(settings.agent_env["CLAUDE_CONFIG_DIR"])  # the operator's, to be hidden
    _world_readable(opconfig / "settings.json",
                    json.dumps({"env": {"X": exposed.secrets["opconfig"]}}))
    settings.home.mkdir(parents=True, exist_ok=True)
    _world_readable(settings.log_path, f"INFO started token={exposed.secrets['log']}\n")
    exposed.extra.update(opconfig=opconfig)
    async with Switchboard(settings) as app:
        await app.store.kv.set("probe", {"secret": exposed.secrets["db"]})
        yield app


def all_results(mock) -> str:
    return "\n".join(c.result for c in tool_calls(mock))


async def victim_workspace(app: Switchboard, secret: str) -> Path:
    """Another agent, in a fresh workspace (under the data dir), with a secret file in it."""
    [victim] = await spawn_fleet(app, ["victim"], "TEXT: nothing to see")
    ws = Path(victim.cwd)
    _world_readable(ws / "secret.txt", secret + "\n")
    os.chown(ws / "secret.txt", *(agent_uid() or (os.getuid(), os.getgid())))
    return ws


async def test_no_secret_reaches_a_probing_agent(exposed, exposed_app, mock_api):
    """Every probe's output (all tool results the CLI sent back to the model) is free of every
    secret; two controls (a variable of its own in /proc/*/environ, a file of its own) show the
    probes do find what is there to find."""
    app, settings = exposed_app, exposed_app.settings
    victim_ws = await victim_workspace(app, exposed.secrets["workspace"])
    opconfig = exposed.extra["opconfig"]
    paths = {"DB": settings.db_path, "LOG": settings.log_path, "CFG": exposed.config_file,
             "POL": exposed.policy_file, "KEY": exposed.key_file, "SB": settings.home,
             "VICTIM": victim_ws, "UHOME": exposed.user_home, "OPCFG": opconfig,
             "BASE": exposed.base, "HOSTTMP": exposed.extra["host_tmp"]}
    script = "".join(f"{k}='{v}'\n" for k, v in paths.items()) + f"SUP={os.getpid()}\n" + rf"""
echo "control {MARK}control-1" > "$PWD/control.txt"
CONTROL={MARK}control-2 sleep 30 & CONTROL_PID=$!
# Until the background child has exec'd, its /proc/<pid>/environ is still the shell's.
for _ in $(seq 100); do
    grep -q control-2 /proc/$CONTROL_PID/environ 2>/dev/null && break; sleep 0.05
done
echo "== ps eww"; ps eww 2>&1 | head -60; ps axeww 2>&1 | head -60
echo "== grep environ"; grep -rao '{MARK}[A-Za-z0-9-]*' /proc/*/environ 2>&1 | head -20
kill $CONTROL_PID
grep -rao 'PRIVATE KEY[^[:cntrl:]]*' /proc/*/environ 2>&1 | head -5
echo "== supervisor environ"; tr '\0' '\n' < /proc/$SUP/environ 2>&1; echo "rc=$?"
echo "== init environ"; tr '\0' '\n' < /proc/1/environ 2>&1; echo "rc=$?"
echo "== own environ"; env | cut -d= -f1 | tr '\n' ' '; echo
echo "== key"; cat "$KEY" 2>&1; echo "rc=$?"
echo "== find"; timeout 60 find / -name switchboard.db -not -path '/proc/*' 2>/dev/null | head -40
echo "== db"; head -c 4000 "$DB" 2>&1; echo; echo "rc=$?"
sqlite3 "$DB" "select * from kv" 2>&1; echo "rc=$?"
echo "== log"; cat "$LOG" 2>&1; echo "rc=$?"
echo "== settings"; cat "$CFG" 2>&1; echo "rc=$?"
echo "== policy"; cat "$POL" 2>&1 | tail -3; echo "rc=$?"
echo "== data dir"; ls -la "$SB" "$SB/agents" 2>&1
echo "== victim"; ls -la "$VICTIM" 2>&1; cat "$VICTIM/secret.txt" 2>&1; echo "rc=$?"
echo "== user home"; ls -la "$UHOME" 2>&1; cat "$UHOME/.aws/credentials" 2>&1; echo "rc=$?"
echo "== operator config"; ls -la "$OPCFG" 2>&1; cat "$OPCFG/settings.json" 2>&1; echo "rc=$?"
echo "== host tmp"; ls -la /tmp "$HOSTTMP" 2>&1 | head -20; cat "$HOSTTMP/notes.txt" 2>&1
echo "== unmount the covers"
unshare -Urm sh -c "umount -l '$SB' || echo 'umount data dir refused'
    umount '$CFG' || echo 'umount settings refused'; umount '$KEY' || echo 'umount key refused'
    cat '$DB' '$CFG' '$KEY' 2>&1 | head -c 2000" 2>&1
echo "== grep everywhere"
timeout 60 grep -rao '{MARK}[A-Za-z0-9-]*' "$BASE" /etc /run /dev/shm /var/tmp "$PWD" 2>/dev/null \
    | head -40
echo "== done"
"""
    [spy] = await spawn_fleet(app, ["spy"], bash_script(script))
    out = all_results(mock_api)
    # The probes ran (the control secret in its own workspace was found) ...
    assert "== done" in out and f"{MARK}control-1" in out, out[-3000:]
    assert f"{MARK}control-2" in out.split("== grep environ")[1]  # /proc/*/environ is readable
    assert "ANTHROPIC_BASE_URL" in out.split("== own environ")[1]  # and so is its own
    # ... and found nothing of ours.
    leaked = [k for k, v in exposed.secrets.items() if v in out]
    assert not leaked, f"leaked {leaked}:\n{out}"
    assert "PRIVATE KEY" not in out.split("== key", 1)[1], out
    for name in exposed.env_names:
        assert f"{name}=" not in out, f"{name} is visible to the agent"
    found = out.split("== find", 1)[1].split("== db", 1)[0]
    assert str(settings.db_path) not in found
    for probe in ("umount data dir refused", "umount settings refused", "umount key refused"):
        assert probe in out, out.split("== unmount the covers", 1)[1]
    # Nothing of ours was copied anywhere the agent can read or write on the host either.
    for top in (Path(spy.cwd), settings.agents_dir / spy.id):
        for f in files_under(top):
            try:
                data = f.read_bytes()
            except FileNotFoundError:  # removed by the CLI since the walk saw it
                continue
            assert not [k for k, v in exposed.secrets.items() if v.encode() in data], f


def _snapshot(path: Path) -> tuple[bytes, int, int]:
    st = path.stat()
    return path.read_bytes(), st.st_mtime_ns, st.st_ino


async def test_database_log_and_settings_are_neither_readable_nor_writable(
        exposed, exposed_app, mock_api):
    """cat, append, python open(..., 'a'), truncate, touch, mv, rm and sqlite3 on each file: all
    fail as the agent sees it, and on the host the log, settings, policy, key and launcher keep
    their bytes, mtime and inode. The database changes all the time (the supervisor writes it),
    so for it: same inode, no trace of the agent's bytes, table or row, integrity intact. The
    log is seeded by the test: an in-process Switchboard logs to no file."""
    app, settings = exposed_app, exposed_app.settings
    files = {"DB": settings.db_path, "LOG": settings.log_path, "CFG": exposed.config_file,
             "POL": exposed.policy_file, "KEY": exposed.key_file}
    # The launcher the sandbox runs (as root, first) must be visible, but never writable: its
    # stub and the compiled code the stub loads.
    launcher = settings.run_dir / "claude-launcher"
    files["LAUNCHER"] = launcher
    files["CODE"] = settings.run_dir / "claude-launcher.code"
    before = {k: _snapshot(p) for k, p in files.items() if k != "DB"}
    db_inode = settings.db_path.stat().st_ino
    script = "".join(f"{k}='{v}'\n" for k, v in files.items()) + r"""
for f in "$DB" "$LOG" "$CFG" "$POL" "$KEY" "$LAUNCHER" "$CODE"; do
    echo "== $f"
    [ "$f" = "$LAUNCHER" ] || [ "$f" = "$CODE" ] || {
        cat "$f" > /tmp/c 2>/tmp/e; echo "read rc=$? bytes=$(wc -c < /tmp/c) $(cat /tmp/e)"; }
    (echo HOSTILE >> "$f") 2>/tmp/e; echo "append rc=$? $(cat /tmp/e)"
    python3 -c 'import sys; open(sys.argv[1], "a").write("HOSTILE")' "$f" 2>/tmp/e
    echo "python rc=$? $(tail -1 /tmp/e)"
    truncate -s 0 "$f" 2>/tmp/e; echo "truncate rc=$? $(cat /tmp/e)"
    touch "$f" 2>/tmp/e; echo "touch rc=$? $(cat /tmp/e)"
    mv "$f" "$f.moved" 2>/tmp/e; echo "mv rc=$? $(cat /tmp/e)"
    rm "$f" 2>/tmp/e; echo "rm rc=$? $(cat /tmp/e)"
done
echo "== sqlite"
sqlite3 "$DB" "create table pwned(x); insert into kv(key, value) values ('pwned', '1')" 2>/tmp/e
echo "sqlite rc=$? $(cat /tmp/e)"
echo "== done"
"""
    await spawn_fleet(app, ["vandal"], bash_script(script))
    out = all_results(mock_api)
    assert "== done" in out, out
    # Every attempt failed, as the agent saw it ...
    attempts = re.findall(r"^(read|append|python|truncate|touch|mv|rm|sqlite) rc=(\d+)(.*)$",
                          out, re.MULTILINE)
    assert len(attempts) == 5 * 7 + 2 * 6 + 1, out
    assert [a for a in attempts if a[1] == "0"] == [], out
    assert re.findall(r"^read rc=\d+ bytes=(\d+)", out, re.MULTILINE) == ["0"] * 5, out
    # ... and on the host nothing changed.
    for k, p in files.items():
        if k != "DB":
            assert _snapshot(p) == before[k], f"{p} changed"
    assert settings.db_path.stat().st_ino == db_inode
    for f in settings.home.glob("switchboard.db*"):
        assert b"HOSTILE" not in f.read_bytes(), f
    with sqlite3.connect(settings.db_path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "pwned" not in tables
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert await app.store.kv.get("pwned") is None
    assert await app.store.kv.get("probe") == {"secret": exposed.secrets["db"]}


def _two_projects(exposed: Exposed) -> tuple[Path, Path]:
    """projects/victim (holding a .env with a secret) and projects/spy, the agent user's."""
    uid = agent_uid() or (os.getuid(), os.getgid())
    projects = exposed.base / "projects"
    projects.mkdir(mode=0o755)
    for name in ("victim", "spy"):
        (projects / name).mkdir(mode=0o700)
        os.chown(projects / name, *uid)
    secret = projects / "victim" / ".env"
    _world_readable(secret, f"DATABASE_PASSWORD={exposed.secrets['workspace']}\n")
    os.chown(secret, *uid)
    return projects, secret


async def test_another_agents_project_directory_is_not_readable(exposed, exposed_app, mock_api):
    """An operator's --cwd project outside the data dir. Every agent runs as the same uid and
    sees the host read-only, so the project's own mode (0700, the agent user's) cannot keep
    another agent out: only the sandbox could."""
    app = exposed_app
    projects, secret = _two_projects(exposed)
    await spawn_fleet(app, ["victim"], "TEXT: working on my project", cwd=str(projects / "victim"))
    script = f"ls -la '{projects / 'victim'}' 2>&1; cat '{secret}' 2>&1; echo \"rc=$?\"\n"
    await spawn_fleet(app, ["spy"], bash_script(script), cwd=str(projects / "spy"))
    out = all_results(mock_api)
    assert "rc=" in out, out
    assert exposed.secrets["workspace"] not in out, (
        f"the spy read the victim's project ({secret}):\n{out}")


async def test_a_project_given_to_a_later_agent_is_hidden_from_a_running_one(
        exposed, exposed_app, mock_api):
    """The same, in the other order: the spy's sandbox is built (and its CLI keeps running)
    before the victim is spawned with its --cwd, so hiding the victim's project when the spy's
    sandbox is made cannot work; Switchboard must cover it inside the running sandbox."""
    app = exposed_app
    projects, secret = _two_projects(exposed)
    [spy] = await spawn_fleet(app, ["spy"], "TEXT: waiting", cwd=str(projects / "spy"))
    assert spy.process is not None and spy.process.alive()
    await spawn_fleet(app, ["victim"], "TEXT: working on my project", cwd=str(projects / "victim"))
    assert spy.process is not None and spy.process.alive()  # the same sandbox as before
    script = f"ls -la '{projects / 'victim'}' 2>&1; cat '{secret}' 2>&1; echo \"rc=$?\"\n"
    reply = await run(app, f"/ask spy {bash_script(script)}")
    assert reply.ok, reply.plain()
    await wait_for(lambda: "rc=" in all_results(mock_api), 60, "the spy's probe")
    out = all_results(mock_api)
    assert exposed.secrets["workspace"] not in out, (
        f"the running spy read the later victim's project ({secret}):\n{out}")


async def test_an_agent_cannot_make_the_supervisor_overwrite_a_host_file(
        exposed, exposed_app, mock_api):
    """The agent owns its private CLAUDE_CONFIG_DIR. It plants a symlink where the supervisor
    copies the operator's login credentials in (`.credentials.json`), pointing at a file only
    root may write, then gets itself restarted (stop, then a new message). The supervisor, as
    root, must not follow it: that would let any agent overwrite (and chmod 0600) any file on the
    host, the supervisor's own database or /etc/passwd included."""
    app = exposed_app
    opconfig = exposed.extra["opconfig"]
    (opconfig / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "fake"}}')
    vault = exposed.base / "root-only"
    vault.mkdir(mode=0o700)
    precious = vault / "precious.txt"
    precious.write_text("precious\n")
    precious.chmod(0o644)
    before = _snapshot(precious), precious.stat().st_mode
    script = (f"echo mine > '{precious}' 2>&1; echo \"direct rc=$?\"\n"
              f"ln -sf '{precious}' \"$CLAUDE_CONFIG_DIR/.credentials.json\"; echo \"ln rc=$?\"\n")
    [agent] = await spawn_fleet(app, ["planter"], bash_script(script))
    out = all_results(mock_api)
    assert "ln rc=0" in out and "direct rc=0" not in out, out
    assert (await run(app, "/stop planter")).ok
    reply = await run(app, "/ask planter TEXT: back again")
    assert reply.ok, reply.plain()
    await wait_for(lambda: agent.state in ("idle", "failed"), 60, "the restarted turn")
    assert (_snapshot(precious), precious.stat().st_mode) == before, (
        f"the supervisor followed the agent's symlink: {precious} now holds "
        f"{precious.read_text()!r}, mode {oct(precious.stat().st_mode)}")
