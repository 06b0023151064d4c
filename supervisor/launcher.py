"""Agent launcher: the `cli_path` the SDK starts; builds the agent's sandbox and is its init.

Runs with `python -S -E` and imports only the standard library: one runs per agent, so it is kept
small. It (0) re-executes itself with only the allowlisted environment, so that not even its own
/proc/<pid>/environ shows what the supervisor's environment holds. Then, sandboxed (the usual
case, SWITCHBOARD_SANDBOX holds bwrap's argv): (1) it becomes bwrap, which builds the agent's
namespaces and mounts and runs this file again as pid 1 of the new pid namespace; (2) as that
init it starts the CLI (dropping to the agent uid when we are root), reaps orphans, obeys
pause/resume/terminate signals only from outside the namespace (an agent cannot signal its own
init otherwise: the kernel protects a namespace's pid 1), pauses with one kill(-1, SIGSTOP) that
no fork can race, and when the CLI exits it exits too, and the kernel kills everything left in
the namespace at once. Unsandboxed (allow_unisolated_agents): it becomes a session leader and a
child subreaper around the CLI, forwards signals, and kills what is left when the CLI exits.

Every agent's start waits for two interpreter starts of this file, so it loads next to nothing:
the supervisor runs it precompiled (supervisor/process/agent.py `install_launcher`), `_signal`
stands in for `signal` (whose enums import `enum`, about 3 ms a start) and bwrap's argv comes
hex-coded instead of as JSON (`json` imports `re`, about 5 ms more).
"""

import _signal as signal  # the C module under `signal`: the same calls, on plain ints
import os
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
TAG_VAR = "SWITCHBOARD_AGENT_TAG"
CLI_VAR = "SWITCHBOARD_REAL_CLI"
KEYS_VAR = "SWITCHBOARD_ENV_KEYS"
PARENT_VAR = "SWITCHBOARD_SUPERVISOR_PID"
STAGE_VAR = "SWITCHBOARD_LAUNCHER_STAGE"
SANDBOX_VAR = "SWITCHBOARD_SANDBOX"  # bwrap's argv up to the command: encode_argv()
UID_VAR = "SWITCHBOARD_AGENT_UID"  # "uid:gid" the CLI drops to (supervisor is root)
CWD_VAR = "SWITCHBOARD_AGENT_CWD"  # entered after the drop: a 0700 workspace is the agent's
NICE_VAR = "SWITCHBOARD_AGENT_NICE"  # how much lower than the supervisor's the agent's priority is
# The cgroup.procs file of the agents' CPU group (supervisor/process/cpugroup.py): the launcher
# joins it before bwrap or the CLI, so everything the agent ever starts is in it. Not in CONTROL:
# nothing after this first stage sees it.
CPU_GROUP_VAR = "SWITCHBOARD_CPU_GROUP"
# "<owner uid>:<owner gid>:<agent uid>:<agent gid>": the operator's --cwd belongs to someone else;
# mount it idmapped (the agent's ids stand for the owner's there, and only there): _map_workdir.
IDMAP_VAR = "SWITCHBOARD_AGENT_IDMAP"
# "<relay script>|<port>=<socket>|...": the agent has a network namespace of its own; the relay
# (supervisor/egress_relay.py) is its only way out, started before the CLI: _start_relay.
RELAY_VAR = "SWITCHBOARD_EGRESS_RELAY"
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_SYMLINK_NOFOLLOW = 0x100
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_IDMAP = 0x100000
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442  # the same on every arch
PAUSE_SIGNAL = signal.SIGUSR1
RESUME_SIGNAL = signal.SIGUSR2
# What the SDK itself sets for the CLI; everything else must be named by the supervisor.
SDK_NAMES = ("CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SDK_READS_SESSION_STATE",
             "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "PWD")
SDK_PREFIX = "CLAUDE_AGENT_SDK"
CONTROL = (TAG_VAR, CLI_VAR, PARENT_VAR, STAGE_VAR, SANDBOX_VAR, UID_VAR, CWD_VAR, NICE_VAR,
           IDMAP_VAR, RELAY_VAR)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _prctl(option, value):  # type: (int, object) -> int
    try:
        import ctypes  # here, not above: 8 ms of every agent's start, and a sandbox needs none

        if isinstance(value, bytes):
            value = ctypes.c_char_p(value)
        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0))
    except (OSError, AttributeError):
        return -1


def _children():  # type: () -> list[int]
    """Our direct children, from /proc/self/task/*/children (a subreaper collects orphans
    here): no scan of the whole of /proc."""
    found = []  # type: list[int]
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open("/proc/self/task/%s/children" % tid, "rb") as fh:
                found.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return found


def _set_name(name):  # type: (bytes) -> None
    """What ps and top show (PR_SET_NAME, through /proc: no ctypes to load)."""
    try:
        with open("/proc/self/comm", "wb") as fh:
            fh.write(name)
    except OSError:
        pass


def _reap_nohang():  # type: () -> bool
    """Reap every exited child; False once we have no children at all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _kill_rest():  # type: () -> None
    """SIGKILL every remaining descendant until none is left. A subreaper's orphans come back to
    us as their parents die (before the parent can be reaped), so: kill our children, wait for
    a child to exit (SIGCHLD, bounded), reap, and again, until we have no child at all. Woken
    by exits, not by a timer; nothing rescans /proc."""
    deadline = time.monotonic() + 10
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while time.monotonic() < deadline:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not _reap_nohang():
            return
        signal.sigtimedwait({signal.SIGCHLD}, max(0.0, min(1.0, deadline - time.monotonic())))


def _lower_priority():  # type: () -> str | None
    """Give this process (so everything it starts) a lower CPU priority than the supervisor's.
    NICE_VAR is "<step>" as the supervisor sets it, "<step>:<autogroup nice>" once the
    launcher has read the supervisor's autogroup (before its setsid). Two levers: the nice
    value, which only a privileged process can lower again; and, as we have just become a
    session leader (bwrap's --new-session makes the sandbox's init one too), our session's
    autogroup nice, which weighs our whole session against the supervisor's when the scheduler
    groups by session (the kernel default), and which only a privileged process can set below 0.
    """
    try:
        step, _, group = (os.environ.get(NICE_VAR) or "0").partition(":")
        step_n = int(step)
        group_n = int(group) if group else min(19, _autogroup_nice() + step_n)
    except ValueError:
        return None
    if step_n <= 0 and not group:
        return None
    if step_n > 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0,
                           min(19, os.getpriority(os.PRIO_PROCESS, 0) + step_n))
        except OSError:
            pass
    return "0:%d" % group_n  # what a stage after a new setsid() applies: the autogroup only


def _apply_autogroup(value):  # type: (str | None) -> None
    """Set our session's autogroup nice from a "<step>:<nice>" value; anything else: nothing."""
    group = (value or "").partition(":")[2]
    if group.isdigit():
        _set_autogroup_nice(int(group))


def _autogroup_nice():  # type: () -> int
    try:
        with open("/proc/self/autogroup") as fh:
            return int(fh.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return 0


def _set_autogroup_nice(nice):  # type: (int) -> bool
    """True once set, or once it is clear it never can be (no autogroups here, no permission);
    False when the kernel said to try again later (EAGAIN: its rate limit)."""
    try:
        with open("/proc/self/autogroup", "w") as fh:
            fh.write(str(nice))
    except BlockingIOError:
        return False
    except OSError:
        return True  # no autogroups in this kernel, or they are off
    return True


def _join_cpu_group():  # type: () -> None
    """Into the agents' CPU group, before anything of the agent exists: all it starts inherits
    the group, and only a process that may write the group's files (not the agent: its user,
    a read-only /sys) can take it out."""
    path = os.environ.get(CPU_GROUP_VAR)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except OSError as exc:  # the agent runs, weighed by its autogroup as without a group
        sys.stderr.write("switchboard launcher: cannot join the agents' CPU group %s: %s\n"
                         % (path, exc))


def _clean_env():  # type: () -> dict[str, str]
    keys = set(filter(None, os.environ.get(KEYS_VAR, "").split(",")))
    return {
        k: v
        for k, v in os.environ.items()
        if k in keys or k in SDK_NAMES or k.startswith(SDK_PREFIX) or k in CONTROL
    }


def encode_argv(argv):  # type: (list[str]) -> str
    """An argv as one environment value, exactly (any byte but NUL, which no argument holds),
    read back without an import: its arguments NUL-joined, in hex."""
    return b"\0".join(os.fsencode(a) for a in argv).hex()


def decode_argv(value):  # type: (str) -> list[bytes]
    return bytes.fromhex(value).split(b"\0")


def _enter_sandbox(argv, clean):  # type: (list[str], dict[str, str]) -> int
    """Become bwrap; it runs this file again, as the init of the agent's pid namespace.
    `clean`: the allowlisted environment, all bwrap (so its /proc/<pid>/environ) gets."""
    bwrap = decode_argv(clean[SANDBOX_VAR])
    env = {k: v for k, v in clean.items() if k not in (SANDBOX_VAR, PARENT_VAR)}
    env[STAGE_VAR] = "inner"
    # The interpreter itself, not a venv's link to it: the venv may lie in a hidden directory.
    python = os.path.realpath(sys.executable)
    inner = [python, "-S", "-E", os.path.abspath(__file__)] + argv[1:]
    lowered = _lower_priority()  # bwrap, the init and the whole sandbox inherit the nice value
    if lowered:
        env[NICE_VAR] = lowered  # the init sets its session's autogroup: bwrap makes a new one
    if env.get(IDMAP_VAR):
        why = _map_workdir(env.get(CWD_VAR, ""), env[IDMAP_VAR])
        if why:
            sys.stderr.write("switchboard launcher: cannot map %s: %s\n" % (env.get(CWD_VAR), why))
            return 2
    try:
        # Out of the supervisor's session and process group: a Ctrl-C at the console (sent to
        # the foreground group) must not reach bwrap, whose death would end the sandbox.
        os.setsid()
    except OSError:
        pass  # already a session leader
    try:
        os.execve(bwrap[0], bwrap + [b"--"] + inner, env)
    except OSError as exc:
        sys.stderr.write("switchboard launcher: cannot run bwrap: %s\n" % exc)
        return 2


def _map_workdir(path, spec):  # type: (str, str) -> str | None
    """Mount `path` over itself, idmapped, in a mount namespace of our own that bwrap (and so
    the sandbox) inherits: there, files of the owner's uid/gid show as the agent's, and what
    the agent creates is stored as the owner's. Nothing changes on the host: no chown, no ACL,
    no mount it can see. Only the mount's own tree (no submount) and no set-user-ID execution
    through it. Returns why not, or None."""
    import ctypes  # here: only an agent in someone else's directory pays for it

    owner_uid, owner_gid, uid, gid = (int(x) for x in spec.split(":"))
    libc = ctypes.CDLL(None, use_errno=True)

    def failed(what):  # type: (str) -> str
        return "%s: %s" % (what, os.strerror(ctypes.get_errno()))

    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        return str(exc)
    if st.st_mode & 0o170000 != 0o040000 or (st.st_uid, st.st_gid) != (owner_uid, owner_gid):
        return "it is no longer a directory of uid %d, gid %d" % (owner_uid, owner_gid)
    userns = _idmap_userns(libc, "%d %d 1\n" % (owner_uid, uid), "%d %d 1\n" % (owner_gid, gid))
    if userns < 0:
        return failed("user namespace for the mapping")
    try:
        if libc.unshare(CLONE_NEWNS) != 0:
            return failed("unshare")
        # Nothing we mount from here may propagate back to the host.
        if libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_SLAVE), None) != 0:
            return failed("make / a slave")
        c_long = ctypes.c_long
        tree = libc.syscall(c_long(SYS_OPEN_TREE), c_long(AT_FDCWD), os.fsencode(path),
                            c_long(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW))
        if tree < 0:
            return failed("open_tree")
        try:
            attr = (ctypes.c_uint64 * 4)(MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                         0, 0, userns)
            if libc.syscall(c_long(SYS_MOUNT_SETATTR), c_long(tree), b"", c_long(AT_EMPTY_PATH),
                            attr, ctypes.c_size_t(ctypes.sizeof(attr))) != 0:
                return failed("idmapped mount (Linux 5.12 or later and a filesystem that "
                              "supports it)")
            if libc.syscall(c_long(SYS_MOVE_MOUNT), c_long(tree), b"", c_long(AT_FDCWD),
                            os.fsencode(path), c_long(MOVE_MOUNT_F_EMPTY_PATH)) != 0:
                return failed("move_mount")
        finally:
            os.close(tree)
    finally:
        os.close(userns)
    st = os.stat(path)
    if (st.st_uid, st.st_gid) != (uid, gid):
        return "the mapping did not take (uid %d, gid %d there)" % (st.st_uid, st.st_gid)
    return None


def _idmap_userns(libc, uid_map, gid_map):  # type: (object, str, str) -> int
    """A user namespace holding only `uid_map`/`gid_map`, as an fd (a child makes it and exits
    once we hold it open); -1 on failure."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(hold_w)
        ok = libc.unshare(CLONE_NEWUSER) == 0  # type: ignore[attr-defined]
        os.write(ready_w, b"1" if ok else b"0")
        os.read(hold_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    fd = -1
    try:
        if os.read(ready_r, 1) == b"1":
            for name, text in (("uid_map", uid_map), ("setgroups", "deny"), ("gid_map", gid_map)):
                with open("/proc/%d/%s" % (pid, name), "w") as fh:
                    fh.write(text)
            fd = os.open("/proc/%d/ns/user" % pid, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    finally:
        os.close(ready_r)
        os.close(hold_w)
        os.waitpid(pid, 0)
    return fd


def _drop_to(ids):  # type: (str) -> None
    uid, gid = (int(x) for x in ids.split(":"))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not drop to uid %d" % uid)


def _inner(argv, real_cli):  # type: (list[str], str) -> int
    """pid 1 of the agent's namespace: start the CLI, reap, obey only the supervisor."""
    ids = os.environ.get(UID_VAR)
    env = {k: v for k, v in os.environ.items() if k not in CONTROL or k == TAG_VAR}
    waited = {signal.SIGCHLD, PAUSE_SIGNAL, RESUME_SIGNAL} | set(FORWARDED)
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    _set_name(b"sb-sandbox")
    _start_relay(ids)
    cli_pid = os.fork()
    if cli_pid == 0:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if ids:
                _drop_to(ids)
            if os.environ.get(CWD_VAR):
                os.chdir(os.environ[CWD_VAR])
            os.execve(real_cli, [real_cli] + argv[1:], env)
        except OSError as exc:
            sys.stderr.write("switchboard launcher: cannot run %s: %s\n" % (real_cli, exc))
        os._exit(127)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    status = 0
    # Our session (bwrap's --new-session made it) has an autogroup of its own, at nice 0. The
    # kernel lets a process without CAP_SYS_ADMIN (bwrap dropped ours) change one autogroup a
    # tenth of a second, machine-wide: retry while the CLI starts, never delaying it. A
    # supervisor with the capability sets it for us at once (process.lower_autogroup), so each
    # try first looks whether it is done; and the tries back off (50 ms, doubling up to 1 s):
    # 300 agents started at once, each retrying every 50 ms for the 30 s the kernel's rate
    # takes to serve them all, kept a third of a 2-core machine busy while the fleet was idle.
    regroup = (os.environ.get(NICE_VAR) or "").partition(":")[2]
    regroup_until = time.monotonic() + 30
    regroup_wait = 0.05
    while True:
        if not regroup.isdigit() or time.monotonic() > regroup_until:
            regroup = ""
        elif _autogroup_nice() >= int(regroup) or _set_autogroup_nice(int(regroup)):
            regroup = ""
        if regroup:
            info = signal.sigtimedwait(waited, regroup_wait)
            if info is None:
                regroup_wait = min(1.0, regroup_wait * 2)
                continue
        else:
            info = signal.sigwaitinfo(waited)
        if info.si_signo == signal.SIGCHLD:
            done, status = _reap(cli_pid, status)
            if done:
                break
            continue
        if info.si_pid != 0:
            continue  # sent from inside the sandbox: the agent does not steer its own init
        if info.si_signo == PAUSE_SIGNAL:
            _kill_all(signal.SIGSTOP)
        elif info.si_signo == RESUME_SIGNAL:
            _kill_all(signal.SIGCONT)
        else:
            _kill_all(signal.SIGCONT)
            try:
                os.kill(cli_pid, info.si_signo)
            except ProcessLookupError:
                pass
    # Returning ends the namespace: the kernel SIGKILLs every process left in it.
    if status < 0:
        return 128 - status
    return status


def _start_relay(ids):  # type: (str | None) -> None
    """The egress relay, listening before the CLI starts (it says so on a pipe; a relay that
    failed closes it unsaid, and the CLI then finds no way out at all). Started as we are, so
    the interpreter can be read wherever it lies; it drops to the agent's uid itself."""
    spec = os.environ.get(RELAY_VAR)
    if not spec:
        return
    parts = spec.split("|")
    r, w = os.pipe()
    if os.fork() == 0:
        try:
            os.close(r)
            os.set_inheritable(w, True)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.execve(sys.executable, [sys.executable, "-S", "-E", parts[0], str(w), ids or "-"]
                      + parts[1:], {"PATH": "/usr/bin:/bin"})
        except OSError as exc:
            sys.stderr.write("switchboard launcher: cannot start the egress relay: %s\n" % exc)
        os._exit(127)
    os.close(w)
    os.read(r, 1)
    os.close(r)


def _kill_all(sig):  # type: (int) -> None
    """Every process of the namespace but us, in one call: the kernel holds off forks while
    it signals, so a fork chain cannot outrun it."""
    try:
        os.kill(-1, sig)
    except ProcessLookupError:
        pass


def _reap(cli_pid, status):  # type: (int, int) -> tuple[bool, int]
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True, status
        if pid == 0:
            return False, status
        if pid == cli_pid:
            return True, os.waitstatus_to_exitcode(raw)


def main(argv):  # type: (list[str]) -> int
    real_cli = os.environ.get(CLI_VAR)
    if not real_cli:
        sys.stderr.write("switchboard launcher: %s is not set\n" % CLI_VAR)
        return 2
    stage = os.environ.get(STAGE_VAR)
    if stage == "idmap-check":
        # The supervisor asks, at a spawn, whether this mapping can be made here: the same
        # code, in a throwaway process (the namespace dies with it).
        why = _map_workdir(os.environ.get(CWD_VAR, ""), os.environ.get(IDMAP_VAR, ""))
        sys.stdout.write(why or "ok")
        return 1 if why else 0
    if stage == "inner":
        # os._exit, not a return: pid 1's exit ends the namespace, and an interpreter's
        # teardown (about a millisecond of CPU) would only delay that, 300 times over when a
        # fleet shuts down at once. Nothing is buffered but stderr.
        code = _inner(argv, real_cli)
        sys.stderr.flush()
        os._exit(code)
    expected_parent = os.environ.get(PARENT_VAR)
    _join_cpu_group()
    if os.environ.get(SANDBOX_VAR):
        # Straight to bwrap with the allowlisted environment (the exec is what clears our
        # /proc/<pid>/environ; no re-execution of ourselves first: one interpreter start less
        # on every spawn). bwrap's --die-with-parent takes over from here; refuse if the
        # supervisor is gone.
        if expected_parent and str(os.getppid()) != expected_parent:
            return 1
        return _enter_sandbox(argv, _clean_env())
    if stage != "2":
        env = _clean_env()
        env[STAGE_VAR] = "2"
        try:
            os.execve(sys.executable, [sys.executable, "-S", "-E", os.path.abspath(argv[0])]
                      + argv[1:], env)
        except OSError as exc:
            sys.stderr.write("switchboard launcher: cannot re-execute: %s\n" % exc)
            return 2
    env = {k: v for k, v in os.environ.items() if k not in (CLI_VAR, PARENT_VAR, STAGE_VAR)}
    pending = []

    def early(signum, _frame):  # type: (int, object) -> None
        pending.append(signum)  # the CLI does not exist yet: deliver once it does

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, early)
    lowered = _lower_priority()
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader
    _apply_autogroup(lowered)
    _prctl(PR_SET_NAME, b"sb-launcher")  # what ps and top show
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # If the supervisor dies, SIGTERM us: the CLI then ends and we clean up after it.
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if expected_parent and str(os.getppid()) != expected_parent:
        return 1  # the supervisor died before PDEATHSIG was armed

    cli_pid = os.fork()
    if cli_pid == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execve(real_cli, [real_cli] + argv[1:], env)
        except OSError as exc:
            sys.stderr.write("switchboard launcher: cannot run %s: %s\n" % (real_cli, exc))
            os._exit(127)

    def forward(signum, _frame):  # type: (int, object) -> None
        try:
            os.kill(cli_pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    for signum in pending:
        forward(signum, None)
    # Our copies of the pipes would keep the SDK from seeing EOF; the CLI has its own.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)

    status = 0
    while True:
        try:
            pid, raw = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if pid == cli_pid:
            status = os.waitstatus_to_exitcode(raw)
            break
    _kill_rest()
    if status < 0:
        return 128 - status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
