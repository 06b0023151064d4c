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
"""

import ctypes
import json
import os
import signal
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
SANDBOX_VAR = "SWITCHBOARD_SANDBOX"  # JSON: bwrap's argv up to the command
UID_VAR = "SWITCHBOARD_AGENT_UID"  # "uid:gid" the CLI drops to (supervisor is root)
CWD_VAR = "SWITCHBOARD_AGENT_CWD"  # entered after the drop: a 0700 workspace is the agent's
PAUSE_SIGNAL = signal.SIGUSR1
RESUME_SIGNAL = signal.SIGUSR2
# What the SDK itself sets for the CLI; everything else must be named by the supervisor.
SDK_NAMES = ("CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SDK_READS_SESSION_STATE",
             "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "PWD")
SDK_PREFIX = "CLAUDE_AGENT_SDK"
CONTROL = (TAG_VAR, CLI_VAR, PARENT_VAR, STAGE_VAR, SANDBOX_VAR, UID_VAR, CWD_VAR)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _prctl(option, value):
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        return -1


def _children(pid):
    """Pids whose parent is `pid`, read from /proc (a subreaper collects orphans here)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _reap_nohang():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _kill_rest():
    """SIGKILL every remaining descendant (orphans come back to us) until none is left."""
    me = os.getpid()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = _children(me)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not _reap_nohang() and not kids:
            return
        time.sleep(0.01)


def _clean_env():
    keys = set(filter(None, os.environ.get(KEYS_VAR, "").split(",")))
    return {
        k: v
        for k, v in os.environ.items()
        if k in keys or k in SDK_NAMES or k.startswith(SDK_PREFIX) or k in CONTROL
    }


def _enter_sandbox(argv):
    """Become bwrap; it runs this file again, as the init of the agent's pid namespace."""
    bwrap = json.loads(os.environ[SANDBOX_VAR])
    env = {k: v for k, v in os.environ.items() if k not in (SANDBOX_VAR, PARENT_VAR)}
    env[STAGE_VAR] = "inner"
    # The interpreter itself, not a venv's link to it: the venv may lie in a hidden directory.
    python = os.path.realpath(sys.executable)
    inner = [python, "-S", "-E", os.path.abspath(__file__)] + argv[1:]
    try:
        # Out of the supervisor's session and process group: a Ctrl-C at the console (sent to
        # the foreground group) must not reach bwrap, whose death would end the sandbox.
        os.setsid()
    except OSError:
        pass  # already a session leader
    try:
        os.execve(bwrap[0], bwrap + ["--"] + inner, env)
    except OSError as exc:
        sys.stderr.write("switchboard launcher: cannot run bwrap: %s\n" % exc)
        return 2


def _drop_to(ids):
    uid, gid = (int(x) for x in ids.split(":"))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not drop to uid %d" % uid)


def _inner(argv, real_cli):
    """pid 1 of the agent's namespace: start the CLI, reap, obey only the supervisor."""
    ids = os.environ.get(UID_VAR)
    env = {k: v for k, v in os.environ.items() if k not in CONTROL or k == TAG_VAR}
    waited = {signal.SIGCHLD, PAUSE_SIGNAL, RESUME_SIGNAL} | set(FORWARDED)
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    _prctl(PR_SET_NAME, ctypes.c_char_p(b"sb-sandbox"))
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
    while True:
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


def _kill_all(sig):
    """Every process of the namespace but us, in one call: the kernel holds off forks while
    it signals, so a fork chain cannot outrun it."""
    try:
        os.kill(-1, sig)
    except ProcessLookupError:
        pass


def _reap(cli_pid, status):
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True, status
        if pid == 0:
            return False, status
        if pid == cli_pid:
            return True, os.waitstatus_to_exitcode(raw)


def main(argv):
    real_cli = os.environ.get(CLI_VAR)
    if not real_cli:
        sys.stderr.write("switchboard launcher: %s is not set\n" % CLI_VAR)
        return 2
    stage = os.environ.get(STAGE_VAR)
    if stage == "inner":
        return _inner(argv, real_cli)
    if stage != "2":
        env = _clean_env()
        env[STAGE_VAR] = "2"
        try:
            os.execve(sys.executable, [sys.executable, "-S", "-E", os.path.abspath(argv[0])]
                      + argv[1:], env)
        except OSError as exc:
            sys.stderr.write("switchboard launcher: cannot re-execute: %s\n" % exc)
            return 2
    expected_parent = os.environ.get(PARENT_VAR)
    if os.environ.get(SANDBOX_VAR):
        # bwrap's --die-with-parent takes over from here; refuse if the supervisor is gone.
        if expected_parent and str(os.getppid()) != expected_parent:
            return 1
        return _enter_sandbox(argv)
    env = {k: v for k, v in os.environ.items() if k not in (CLI_VAR, PARENT_VAR, STAGE_VAR)}
    pending = []

    def early(signum, _frame):
        pending.append(signum)  # the CLI does not exist yet: deliver once it does

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, early)
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader
    _prctl(PR_SET_NAME, ctypes.c_char_p(b"sb-launcher"))  # what ps and top show
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

    def forward(signum, _frame):
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
