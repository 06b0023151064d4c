"""Agent launcher: the `cli_path` the SDK starts. Session leader and child subreaper around the CLI.

Runs with `python -S -E` and imports only the standard library: one runs per agent, so it is kept
small. It (0) re-executes itself with only the allowlisted environment, so that not even its own
/proc/<pid>/environ shows what the supervisor's environment holds; (1) becomes a session leader;
(2) marks itself a child subreaper, so that every process the agent starts, including background
commands that leave the CLI's session, is reparented to it; (3) runs the real CLI as its child,
forwarding SIGTERM/SIGINT/SIGHUP to it; and (4) when the CLI exits, kills and reaps everything
left, then exits with the CLI's status.
"""

import ctypes
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
# What the SDK itself sets for the CLI; everything else must be named by the supervisor.
SDK_NAMES = ("CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SDK_READS_SESSION_STATE",
             "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "PWD")
SDK_PREFIX = "CLAUDE_AGENT_SDK"
CONTROL = (TAG_VAR, CLI_VAR, PARENT_VAR, STAGE_VAR)


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


def main(argv):
    real_cli = os.environ.get(CLI_VAR)
    if not real_cli:
        sys.stderr.write("switchboard launcher: %s is not set\n" % CLI_VAR)
        return 2
    if os.environ.get(STAGE_VAR) != "2":
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
    expected_parent = os.environ.get(PARENT_VAR)
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
