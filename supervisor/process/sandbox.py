"""The wall around each agent: one bubblewrap sandbox per agent, and what the host can do.

Every agent (the launcher's inner half, the CLI and everything they start) runs in its own pid
namespace with its own view of the filesystem: the host read-only, the supervisor's data
directory, settings, policy, credentials and the user's home hidden, only the agent's workspace
and its private directory (HOME, CLAUDE_CONFIG_DIR, /tmp) writable. When the supervisor runs as
root, bwrap runs as root to build the mounts and the CLI then drops to an unprivileged uid; as a
normal user, bwrap uses an unprivileged user namespace and the agent keeps that uid. The policy
is the speed bump; this module is the wall: it must hold when the policy is wrong.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from supervisor import launcher as launcher_module
from supervisor.config import Settings

logger = logging.getLogger(__name__)

AGENT_USER = "switchboard-agent"
CREDENTIAL_FILES = (".credentials.json",)
# Sockets that hand out root to whoever can open them.
DANGEROUS_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock",
                     "/run/containerd/containerd.sock", "/run/podman/podman.sock")
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Isolation:
    """What the host offers. `ok` means agents run sandboxed; otherwise `problem` says why and
    `fix` what to change; agents then start only with `allow_unisolated_agents = true`."""

    ok: bool
    detail: str
    problem: str = ""
    fix: str = ""
    bwrap: str | None = None
    uid: int | None = None  # the agents' uid when the supervisor is root, else None (same uid)
    gid: int | None = None

    @property
    def drops_uid(self) -> bool:
        return self.uid is not None


@dataclass(frozen=True, slots=True)
class AgentDirs:
    """An agent's private directory under the data directory, shown only to that agent."""

    root: Path
    home: Path
    config: Path
    tmp: Path
    etc: Path  # passwd and group files made for the sandbox


@dataclass(slots=True)
class _Mounts:
    args: list[str] = field(default_factory=list)
    hidden: list[Path] = field(default_factory=list)  # tmpfs roots we made: parents need --dir
    made: set[Path] = field(default_factory=set)

    def dirs_for(self, target: Path) -> None:
        """Create the parents of `target` that lie inside one of our tmpfs mounts, world-
        traversable (bwrap would otherwise copy the host's 0700 and the agent uid could not
        reach its own workspace)."""
        for root in self.hidden:
            if target != root and _under(target, root):
                chain = []
                p = target.parent
                while p != root and _under(p, root):
                    chain.append(p)
                    p = p.parent
                for d in reversed(chain):
                    if d not in self.made:
                        self.args += ["--perms", "0755", "--dir", str(d)]
                        self.made.add(d)
                return

    def tmpfs(self, path: Path) -> None:
        self.dirs_for(path)
        self.args += ["--perms", "0755", "--tmpfs", str(path)]
        self.hidden.append(path)

    def bind(self, src: Path, dest: Path, *, writable: bool) -> None:
        self.dirs_for(dest)
        self.args += ["--bind" if writable else "--ro-bind", str(src), str(dest)]

    def blank(self, path: Path) -> None:
        """Hide one file: its content becomes empty. Its parents are made first, world-
        traversable: bwrap would make missing ones 0700, and a later --dir does not change an
        existing directory (regression: blanking the policy file under /tmp made /tmp/<repo>
        0700, so the agent uid could not reach the CLI beside it)."""
        self.dirs_for(path)
        self.args += ["--ro-bind", "/dev/null", str(path)]


def _under(path: Path, root: Path) -> bool:
    """`path` is `root` or lies under it (lexically, as `root in path.parents` but without
    making a Path for every parent: a spawn asks this about 75 times)."""
    parts = root.parts
    return path.parts[:len(parts)] == parts


def _resolved(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def agent_dirs(settings: Settings, agent_id: str) -> AgentDirs:
    root = settings.agents_dir.resolve() / agent_id
    return AgentDirs(root, root / "home", root / "claude", root / "tmp", root / "etc")


def agent_ids(settings: Settings) -> tuple[int | None, int | None]:
    """(uid, gid) the agents run as: an unprivileged user when we are root, else our own."""
    if os.geteuid() != 0:
        return None, None
    if settings.sandbox_uid is not None:
        return settings.sandbox_uid, settings.sandbox_gid or settings.sandbox_uid
    try:
        import pwd

        entry = pwd.getpwnam(AGENT_USER)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 61000, 61000


def hidden_paths(settings: Settings, agent_env: Mapping[str, str]) -> tuple[list[Path], list[Path]]:
    """(directories, files) an agent must not see: ours, the user's home, credentials."""
    dirs: list[Path] = [settings.home.resolve()]
    user_home = _resolved(Path.home())
    if user_home != Path("/"):
        dirs.append(user_home)
    config_dirs = [settings.claude_config_dir, agent_env.get("CLAUDE_CONFIG_DIR"),
                   Path.home() / ".claude"]
    for d in config_dirs:
        if d and Path(d).expanduser().is_dir():
            dirs.append(_resolved(d))
    for extra in settings.sandbox_hide:
        p = _resolved(extra)
        if p.is_dir():
            dirs.append(p)
    files: list[Path] = []
    candidates: list[Path | str | None] = [
        settings.config_file, settings.policy_file,
        # Also the file the process environment names: google-auth reads it from there
        # whatever our settings say, so it is a credential of this process either way.
        settings.gcs_credentials_file, os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"),
        settings.repo_ssh_key,  # the key Switchboard's own git fetches with
        *DANGEROUS_SOCKETS,
        *(p for p in settings.sandbox_hide),
    ]
    for f in candidates:
        if f and os.path.exists(f) and not os.path.isdir(f):
            files.append(_resolved(f))
    # Parents first, so a nested hide lands inside the outer tmpfs.
    return sorted(set(dirs), key=lambda p: len(p.parts)), sorted(set(files))


def _closed_ancestor(iso: Isolation, ws: Path, hidden: list[Path]) -> Path | None:
    """The highest directory above `ws` the agent uid cannot pass through (a 0700 home above an
    operator's --cwd), or None. It is covered with an empty tmpfs in the sandbox and `ws` bound
    back into it: the agent reaches its project and still sees nothing else of that home."""
    if iso.uid is None:
        return None
    for p in reversed(ws.parents):
        if p == Path("/") or any(_under(p, h) for h in hidden):
            continue  # "/" is everyone's; under a hidden one, parents are ours to make
        try:
            st = p.stat()
        except OSError:
            return None
        bit = 0o100 if st.st_uid == iso.uid else 0o010 if st.st_gid == iso.gid else 0o001
        if not st.st_mode & bit:
            return p
    return None


def prepare(settings: Settings, iso: Isolation, dirs: AgentDirs, workspace: Path,
            agent_env: Mapping[str, str], *, login: bool = True) -> None:
    """Create the agent's private directory and hand it (and a workspace we created) to the
    agent uid; copy the CLI's login credentials in (`login`), so the operator's config dir
    stays hidden. Without `login` (the model gateway holds the key) a copy left from before
    is removed: the agent holds no credential at all."""
    # The root stays ours (0700, never shown to the agent: only its subdirectories are bound
    # into the sandbox), so the agent cannot swap home/ or claude/ for a link elsewhere.
    for d in (dirs.root, dirs.home, dirs.config, dirs.tmp, dirs.etc):
        d.mkdir(parents=True, exist_ok=True)
        if d.is_symlink():
            raise OSError(f"{d} is a symbolic link; refusing to use it")
    dirs.root.chmod(0o700)
    source = agent_env.get("CLAUDE_CONFIG_DIR") or settings.claude_config_dir \
        or Path.home() / ".claude"
    for name in CREDENTIAL_FILES:
        src = Path(source).expanduser() / name
        if not login:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dirs.config / name)
        elif src.is_file():
            _place_file(src.read_bytes(), dirs.config / name, iso)
    shared = settings.context_dir
    shared.mkdir(parents=True, exist_ok=True)
    if iso.drops_uid:
        _write_identity(dirs, iso)
        for d in (dirs.home, dirs.config, dirs.tmp):
            _chown_tree(d, iso)
        # Every agent writes the shared context (they share one uid); only it, and no link
        # is followed (the tree walk does not follow links, chown is told not to).
        _chown_tree(shared, iso)
        ws = workspace.resolve()
        if _under(ws, settings.workspaces.resolve()):
            _chown_tree(ws, iso)


def _place_file(data: bytes, dest: Path, iso: Isolation) -> None:
    """Write `dest` in a directory the agent owns without following anything it planted: a new
    file opened O_EXCL|O_NOFOLLOW, made 0600 and the agent's through its descriptor, then
    renamed over `dest` (a rename replaces a symbolic link; it does not write through it).
    Regression: copyfile + chmod as root followed an agent's link to any host file."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        if iso.uid is not None and iso.gid is not None:
            os.fchown(fd, iso.uid, iso.gid)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, dest)


def _chown_tree(top: Path, iso: Isolation) -> None:
    assert iso.uid is not None and iso.gid is not None
    os.chown(top, iso.uid, iso.gid, follow_symlinks=False)
    for base, subdirs, files in os.walk(top):
        for n in (*subdirs, *files):
            p = os.path.join(base, n)
            st = os.lstat(p)
            if st.st_uid != iso.uid:
                os.chown(p, iso.uid, iso.gid, follow_symlinks=False)


def _write_identity(dirs: AgentDirs, iso: Isolation) -> None:
    """passwd/group for the sandbox: the host's system accounts plus the agent user, so tools
    that look the uid up (git, ssh, ps) work and nothing else of the host's users shows."""
    def system_lines(path: str, keep_ids: int) -> list[str]:
        out = []
        try:
            for line in Path(path).read_text().splitlines():
                parts = line.split(":")
                if len(parts) > 3 and parts[2].isdigit() and int(parts[2]) < keep_ids:
                    out.append(line)
        except OSError:
            pass
        return out

    passwd = system_lines("/etc/passwd", 1000)
    passwd = [ln for ln in passwd if not ln.startswith(f"{AGENT_USER}:")]
    passwd.append(f"{AGENT_USER}:x:{iso.uid}:{iso.gid}:Switchboard agent:{dirs.home}:/bin/sh")
    group = system_lines("/etc/group", 1000)
    group.append(f"{AGENT_USER}:x:{iso.gid}:")
    (dirs.etc / "passwd").write_text("\n".join(passwd) + "\n")
    (dirs.etc / "group").write_text("\n".join(group) + "\n")


def bwrap_args(settings: Settings, iso: Isolation, dirs: AgentDirs, workspace: Path,
               agent_env: Mapping[str, str], real_cli: Path,
               ro_extra: Iterable[Path] = (), peers: Iterable[Path] = (),
               binds: Iterable[tuple[Path, Path, bool]] = (),
               net: Iterable[tuple[Path, Path]] | None = None) -> list[str]:
    """bwrap's argv (up to and without the command) for one agent. `peers` are other agents'
    working directories (an operator's --cwd projects): hidden, so agents that share the
    agent uid cannot read each other's projects. `binds` (source, target, writable) are
    mounted after the workspace, in order: a worktree's repository (supervisor/repos). `net`
    (host socket, path inside): the agent gets a network namespace of its own, whose only
    way out is these Unix sockets (supervisor/process/network.py)."""
    assert iso.bwrap is not None
    m = _Mounts()
    m.args += [iso.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--tmpfs", "/dev/shm"]
    m.bind(dirs.tmp, Path("/tmp"), writable=True)
    m.hidden.append(Path("/tmp"))  # parents of things bound under /tmp are ours to make
    hide_dirs, hide_files = hidden_paths(settings, agent_env)
    ws = workspace.resolve()
    # First, so that what is hidden inside it is laid over it, not under it.
    if (closed := _closed_ancestor(iso, ws, [*m.hidden, *hide_dirs])) is not None:
        m.tmpfs(closed)
    for d in hide_dirs:
        if not _under(d, Path("/tmp")):  # /tmp is the agent's own already
            m.tmpfs(d)
    inside, outside = _peer_dirs(settings, ws, peers)
    for d in outside:
        m.tmpfs(d)
    writable = [ws, dirs.home, dirs.config]
    shared = settings.context_dir.resolve()
    if shared.is_dir() and not shared.is_symlink():
        writable.append(shared)  # the shared context: every agent's, inside the hidden home
    for w in writable:
        m.bind(w, w, writable=True)
    for src, dest, rw in binds:
        m.bind(src, dest, writable=rw)
    _network(m, net)
    # A hidden file inside a bound directory (a settings file in the workspace's parent...)
    # must stay hidden: blank files after the binds.
    for f in hide_files:
        m.blank(f)
    for d in inside:  # another agent's project inside this one's: hidden over our bind
        m.args += ["--perms", "0755", "--tmpfs", str(d)]
    if iso.drops_uid:
        m.bind(dirs.etc / "passwd", Path("/etc/passwd"), writable=False)
        m.bind(dirs.etc / "group", Path("/etc/group"), writable=False)
    _bind_needed(m, [real_cli, *ro_extra])
    m.args += list(NAMESPACES)
    if iso.drops_uid:
        # bwrap runs as root to build the mounts; the inner launcher keeps only what it needs
        # to drop to the agent uid, and the CLI has no capability at all.
        m.args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                   "--cap-add", "CAP_KILL"]
    return m.args


def _network(m: _Mounts, net: Iterable[tuple[Path, Path]] | None) -> None:
    """A network namespace of its own, with only `net`'s sockets as ways out; None: the
    host's network."""
    if net is not None:
        m.args.append("--unshare-net")
        for sock, inside in net:
            m.bind(sock, inside, writable=False)


# The namespaces of every sandbox, the probe's included.
NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--hostname", "switchboard-agent", "--die-with-parent", "--new-session",
              "--as-pid-1")

# Never hidden for a peer's sake: an operator who gives an agent --cwd /usr must not take
# /usr away from every other agent.
SYSTEM_DIRS = tuple(Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                                      "/etc", "/dev", "/proc", "/sys", "/run", "/var", "/opt",
                                      "/boot", "/tmp"))


def _bind_needed(m: _Mounts, extra: Iterable[Path]) -> None:
    """What the sandbox itself needs to start (the interpreter, and `extra`: the CLI, the
    launcher it runs), read-only, where it lives under something hidden (a checkout under /tmp
    or a home); once each, and not again inside what is already bound."""
    needed = [Path(sys.base_prefix).resolve(), Path(sys.executable).resolve(),
              *(Path(p).resolve() for p in extra)]
    bound: list[Path] = []
    for p in needed:
        if any(_under(p, h) for h in m.hidden) and not any(_under(p, b) for b in bound):
            m.bind(p, p, writable=False)
            bound.append(p)


def _peer_dirs(settings: Settings, ws: Path,
               peers: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """Other agents' directories to hide: (inside this agent's workspace, elsewhere)."""
    home = settings.home.resolve()
    inside: list[Path] = []
    outside: list[Path] = []
    for raw in peers:
        p = _resolved(raw)
        if p == ws or _under(ws, p) or _under(p, home) or not p.is_dir():
            continue  # ours, an ancestor of ours (we are bound over it), or already hidden
        if any(_under(sysdir, p) for sysdir in SYSTEM_DIRS) or any(
                _under(p, Path(d)) for d in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32",
                                             "/lib64", "/dev", "/proc", "/sys")):
            continue
        (inside if _under(p, ws) else outside).append(p)
    return sorted(set(inside), key=lambda x: len(x.parts)), \
        sorted(set(outside), key=lambda x: len(x.parts))


def hide_in(init_pid: int, path: Path) -> str | None:
    """Hide `path` inside a running sandbox (an agent spawned later got it as its --cwd):
    enter the sandbox's mount namespace and mount an empty tmpfs over it. Returns why not."""
    target = ["--target", str(init_pid), "--mount"]
    if os.geteuid() != 0:
        target.insert(2, "--user")  # the sandbox's namespaces belong to its user namespace
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        return "nsenter (util-linux) is not installed"
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv
            [nsenter, *target, "--", "mount", "-t", "tmpfs", "-o", "size=4k,mode=0755",
             "switchboard-hidden", str(path)],
            capture_output=True, text=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        err = done.stderr.strip()
        if "No such file" in err or "does not exist" in err:
            return None  # not visible in that sandbox at all
        return err or f"exit code {done.returncode}"
    return None


def sandbox_env(iso: Isolation, dirs: AgentDirs, bwrap: list[str],
                workspace: Path, idmap: str | None = None) -> dict[str, str]:
    """What the launcher needs to build the sandbox, and what the agent sees inside it.
    `idmap`: the workspace belongs to someone else (supervisor/process/workdir.py)."""
    env = {
        launcher_module.CWD_VAR: str(workspace.resolve()),
        "HOME": str(dirs.home),
        "CLAUDE_CONFIG_DIR": str(dirs.config),
        "TMPDIR": "/tmp",
        launcher_module.SANDBOX_VAR: launcher_module.encode_argv(bwrap),
    }
    if iso.drops_uid:
        env["USER"] = env["LOGNAME"] = AGENT_USER
        env[launcher_module.UID_VAR] = f"{iso.uid}:{iso.gid}"
        if idmap:
            env[launcher_module.IDMAP_VAR] = idmap
    return env


# -- detection -------------------------------------------------------------------------------

_FIX = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) on a kernel with user "
    "namespaces enabled (sysctl kernel.unprivileged_userns_clone=1 and "
    "user.max_user_namespaces > 0). In a container, allow namespaces and a fresh /proc: "
    "docker run --security-opt seccomp=deploy/seccomp-sandbox.json --security-opt "
    "apparmor=unconfined --security-opt systempaths=unconfined (deploy/docker-compose.yml "
    "does this). Or set allow_unisolated_agents = true to run agents "
    "without the sandbox: they can then read and change whatever this user can, including "
    "Switchboard's database."
)


_probed: dict[tuple[object, ...], Isolation] = {}


def probe(settings: Settings, real_cli: Path | None = None) -> Isolation:
    """Build a real sandbox the way agents get one and run a check inside it (once per
    process for the same settings: the answer does not change while we run)."""
    key = (settings.bwrap_path, settings.sandbox_uid, settings.sandbox_gid, real_cli,
           os.geteuid())
    if key not in _probed:
        _probed[key] = _probe(settings, real_cli)
    return _probed[key]


def _probe(settings: Settings, real_cli: Path | None) -> Isolation:
    bwrap = str(settings.bwrap_path) if settings.bwrap_path else shutil.which("bwrap")
    if not bwrap or not os.path.exists(bwrap):
        return Isolation(False, "none", problem="bubblewrap (bwrap) is not installed"
                         + (f" at {settings.bwrap_path}" if settings.bwrap_path else ""),
                         fix=_FIX)
    uid, gid = agent_ids(settings)
    # The same view an agent gets of what it needs: /tmp and the hidden directories replaced,
    # the interpreter and the CLI bound back where they lie under them.
    m = _Mounts()
    m.args += [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--perms", "1777", "--tmpfs", "/tmp"]
    m.hidden.append(Path("/tmp"))
    for d in hidden_paths(settings, {})[0]:
        if not _under(d, Path("/tmp")):
            m.tmpfs(d)
    _bind_needed(m, [real_cli] if real_cli is not None else [])
    args = [*m.args, *NAMESPACES]  # the agents' own: a refused one is found here, not per spawn
    check = ["import os, sys",
             "assert os.getpid() == 1, 'not in a pid namespace of its own'"]
    if uid is not None:
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        check += ["os.setgroups([])", f"os.setresgid({gid}, {gid}, {gid})",
                  f"os.setresuid({uid}, {uid}, {uid})"]
    if real_cli is not None:
        check.append(f"assert os.access({str(real_cli.resolve())!r}, os.X_OK), "
                     f"'the agent user cannot run the claude CLI at {real_cli}'")
    check.append("print('sandbox ok')")
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv
            [*args, os.path.realpath(sys.executable), "-S", "-E", "-c", "\n".join(check)],
            capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env={"PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(False, "none", problem=f"bwrap could not be run: {exc}", fix=_FIX,
                         bwrap=bwrap)
    if done.returncode != 0 or "sandbox ok" not in done.stdout:
        err = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return Isolation(False, "none", problem=f"bwrap cannot build a sandbox here: {err}",
                         fix=_FIX, bwrap=bwrap)
    version = ""
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True,  # noqa: S603
                                 timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    who = (f"as uid {uid} (the supervisor is root)" if uid is not None
           else f"as this user (uid {os.getuid()}) in a user namespace")
    detail = (f"bubblewrap ({version or bwrap}): own pid, mount, ipc and uts namespaces per "
              f"agent, agents run {who}; data directory, settings and home hidden")
    return Isolation(True, detail, bwrap=bwrap, uid=uid, gid=gid)


def describe(iso: Isolation, allowed: bool) -> str:
    if iso.ok:
        return iso.detail
    if allowed:
        return (f"NONE: {iso.problem}. allow_unisolated_agents = true, so agents run without "
                "a sandbox, as this user, and can read everything it can")
    return f"NONE: {iso.problem}. Agents are refused until this is fixed. {iso.fix}"
