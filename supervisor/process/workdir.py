"""What an operator's --cwd may be, and how the agent gets to write there whoever owns it.

Refused: the host's system trees, `/` and every directory that holds one, a home directory
itself (and its dot-directories: configuration and keys), Switchboard's data directory and what
the sandbox hides. Otherwise, when Switchboard runs as root and the directory belongs to
someone other than the agent uid, the launcher mounts it over itself idmapped (launcher.py
`_map_workdir`): inside that one mount the agent's uid/gid stand for the owner's, so it edits
the owner's files and what it creates is the owner's, while everywhere else it is still the
unprivileged agent uid on a read-only host. Nothing of the host is chowned or given an ACL.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from supervisor import launcher as launcher_module
from supervisor.config import Settings
from supervisor.errors import InvalidRequest
from supervisor.process.sandbox import Isolation, hidden_paths

# The directory and everything under it: the system itself, its state and its logs.
SYSTEM_TREES = tuple(Path(p) for p in (
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev",
    "/proc", "/sys", "/run", "/var/lib", "/var/log", "/var/spool", "/var/cache", "/var/mail",
    "/var/backups", "/var/run", "/snap"))
# The directory itself (a project may lie under it): it holds other people's things.
SHARED_ROOTS = tuple(Path(p) for p in (
    "/", "/root", "/home", "/tmp", "/var", "/var/tmp", "/opt", "/srv", "/mnt", "/media"))
REPO_HINT = ("or register it as a repository (/repo add <name> <url-or-path>) and spawn with "
             "--repo <name>: the agent then works in a worktree of its own")
CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Workdir:
    """An operator's --cwd, accepted. `owner`: the (uid, gid) the agent's ids stand for there
    (an idmapped mount), or None when the agent's own ids can write it as it is."""

    path: Path
    owner: tuple[int, int] | None = None

    def idmap(self, iso: Isolation) -> str | None:
        """The launcher's IDMAP_VAR value, or None."""
        if self.owner is None or iso.uid is None or iso.gid is None:
            return None
        return f"{self.owner[0]}:{self.owner[1]}:{iso.uid}:{iso.gid}"


def _under(path: Path, root: Path) -> bool:
    return path.parts[:len(root.parts)] == root.parts


def _homes() -> set[Path]:
    homes = {Path(os.path.realpath(os.path.expanduser("~")))}
    for entry in pwd.getpwall():
        if entry.pw_dir and entry.pw_dir != "/" and os.path.isdir(entry.pw_dir):
            homes.add(Path(os.path.realpath(entry.pw_dir)))
    return homes


def refusal(settings: Settings, path: Path) -> str | None:
    """Why `path` (resolved) would hand the agent more than a project, or None."""
    hidden, _ = hidden_paths(settings, {})
    homes = _homes()
    data = settings.home.resolve()
    for tree in SYSTEM_TREES:
        if _under(path, tree):
            return f"it is part of the system ({tree})"
    for point in (*SYSTEM_TREES, *SHARED_ROOTS, *homes, data, *hidden):
        if _under(point, path):
            what = ("Switchboard's data directory" if point == data
                    else "a home directory" if point in homes
                    else "hidden from agents" if point in hidden else "shared by the system")
            return (f"it is {what}" if point == path
                    else f"it holds {point} ({what})")
    if _under(path, data):
        return f"it lies in Switchboard's data directory ({data})"
    for h in hidden:
        if _under(path, h) and h not in homes:
            return f"it lies in {h}, which the sandbox hides from agents"
    for home in homes:
        if _under(path, home) and path.parts[len(home.parts)].startswith("."):
            return (f"it lies in {home / path.parts[len(home.parts)]}, a home's configuration "
                    "and keys")
    return None


def examine(settings: Settings, iso: Isolation | None, raw: str | Path, *,
            check_mapping: bool = True) -> Workdir:
    """Accept an operator's --cwd, or raise InvalidRequest saying why and what to do.
    `check_mapping`: try the idmapped mount in a throwaway process (at a spawn; a restart
    finds out in the launcher)."""
    path = Path(os.path.realpath(os.path.expanduser(str(raw))))
    if not path.is_dir():
        raise InvalidRequest(f"--cwd {raw} is not an existing directory")
    if why := refusal(settings, path):
        raise InvalidRequest(
            f"--cwd {path} is refused: {why}, and an agent would write there. Give the "
            f"project's own directory (for example ~/src/tool), {REPO_HINT}.")
    if iso is None or not iso.ok:
        return Workdir(path)
    if iso.uid is None:
        if not os.access(path, os.W_OK | os.X_OK):
            me = pwd.getpwuid(os.getuid()).pw_name if _known(os.getuid()) else str(os.getuid())
            raise InvalidRequest(
                f"--cwd {path} is not writable by {me} (uid {os.getuid()}), the user Switchboard "
                "and its agents run as. Run Switchboard as root (agents then write there as the "
                f"directory's owner), make it writable by {me}, {REPO_HINT}.")
        return Workdir(path)
    st = path.stat()
    if not st.st_mode & 0o200:
        raise InvalidRequest(f"--cwd {path} is not writable even by its owner ({_name(st.st_uid)}):"
                             f" chmod u+w {path} first, {REPO_HINT}.")
    if st.st_uid == iso.uid:
        return Workdir(path)
    if st.st_uid == 0 and _reachable_by_others(path):
        raise InvalidRequest(
            f"--cwd {path} belongs to root and other users can reach it. An agent writes there "
            "as the directory's owner, so it could leave a set-user-ID root program for them. "
            f"Give the directory to a regular user (chown -R <user>: {path}), {REPO_HINT}.")
    owner = (st.st_uid, _group_for(st.st_uid, st.st_gid))
    wd = Workdir(path, owner)
    if check_mapping and (why := _try_mapping(wd, iso)):
        raise InvalidRequest(
            f"--cwd {path} belongs to {_name(st.st_uid)}, and this host cannot let the agent "
            f"write there as that user ({why}). {REPO_HINT[0].upper()}{REPO_HINT[1:]}.")
    return wd


def _known(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _name(uid: int) -> str:
    return f"{pwd.getpwuid(uid).pw_name} (uid {uid})" if _known(uid) else f"uid {uid}"


def _group_for(uid: int, gid: int) -> int:
    """The group the agent's gid stands for: the directory's, unless that is root's group and
    the owner is not root (then the owner's own group: no file of the agent's is root's)."""
    if gid != 0 or uid == 0:
        return gid
    try:
        return pwd.getpwuid(uid).pw_gid or uid
    except KeyError:
        return uid


def _reachable_by_others(path: Path) -> bool:
    """Every directory down to `path` lets anyone through (o+x)."""
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def _try_mapping(wd: Workdir, iso: Isolation) -> str | None:
    """The launcher's own mapping code, in a throwaway process: why it fails here, or None."""
    env = {"PATH": "/usr/bin:/bin", launcher_module.CLI_VAR: "-",
           launcher_module.STAGE_VAR: "idmap-check",
           launcher_module.CWD_VAR: str(wd.path), launcher_module.IDMAP_VAR: wd.idmap(iso) or ""}
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv
            [os.path.realpath(sys.executable), "-S", "-E", launcher_module.__file__],
            capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    return done.stdout.strip() or done.stderr.strip() or f"exit code {done.returncode}"
