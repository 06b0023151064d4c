"""A warm `python -m bot.cli` for tests: one process per pytest worker that has imported the
supervisor once (about a CPU-second, nearly all of it the Agent SDK and the `mcp` package it
loads) and forks a fresh `python -m bot.cli <args>` from there for each supervisor a test starts.

The child is a process of its own, as `switchboard run` is: its own pid, stdin and stdout,
environment, working directory and argv, its module `__main__` run anew by `runpy` exactly as
`-m` does, and a normal interpreter exit (atexit, thread joins). What it shares with a cold start
is only the modules already imported, which read nothing of the environment at import
(`tests/unit/test_zygote.py` holds them to that). Supervisors that need an exec (run under
another command, a preexec_fn) are started cold, and `tests/e2e/test_cli.py` starts the CLI cold.

Protocol, over a unix socket, one connection per child: the client sends one JSON line
(`argv`, `env`, `cwd`) with the child's stdin, stdout and stderr as SCM_RIGHTS; the zygote
answers `{"pid": n}` once forked and `{"status": code}` (Popen's returncode: -N for signal N)
once it has reaped it. The zygote ends when its stdin (a pipe from the worker) closes.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_MAX_REQUEST = 1 << 20


# -- the zygote ---------------------------------------------------------------------------------


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        msg, anc, _flags, _addr = conn.recvmsg(_MAX_REQUEST, socket.CMSG_LEN(3 * fds.itemsize))
        if not msg:
            raise EOFError("the client went away before its request was whole")
        data += msg
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _child(request: dict[str, Any], fds: list[int], set_at_import: dict[str, str]) -> int:
    """In the forked child: become `python -m bot.cli <args>` and return its exit code.
    `set_at_import` is what the zygote's imports put in the environment (a setdefault), put
    in the child's unless it sets it itself, as those imports would in a cold start."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for key, value in set_at_import.items():
        os.environ.setdefault(key, value)
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdio
    sys.stdout = open(1, "w", closefd=False, buffering=-1 if not unbuffered else 1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
    sys.argv = ["-m", *request["argv"]]
    # As `-m` does: `__main__` is a fresh run of bot/cli.py, and a later `import bot.cli` (if
    # any) another module, not the zygote's copy.
    sys.modules.pop("bot.cli", None)
    try:
        runpy.run_module("bot.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


class _Server:
    """The zygote's loop: accept a request, fork; reap a child, tell its client."""

    def __init__(self, path: str, set_at_import: dict[str, str]) -> None:
        self.set_at_import = set_at_import
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.children: dict[int, socket.socket] = {}

    def run(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.listener, self.wake_r, 0], [], [])
            except InterruptedError:
                continue
            if 0 in ready and not os.read(0, 4096):
                break  # the worker has gone
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
            self.reap()
            if self.listener in ready:
                self.accept()
        self.listener.close()

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError):  # its client went away
                conn.sendall(json.dumps(
                    {"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = _recv_request(conn)
        except (EOFError, OSError, ValueError):
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.listener.close()
            conn.close()
            for other in self.children.values():
                other.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            # Out of the loop and out of serve(): the child ends as an interpreter does.
            raise SystemExit(_child(request, fds, self.set_at_import))
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def serve(path: str) -> int:
    """Listen on `path` until stdin closes; fork a `bot.cli` for every request."""
    before = dict(os.environ)
    import bot.app  # noqa: F401 - the warm part: every module a supervisor imports
    import bot.cli  # noqa: F401

    set_at_import = {k: v for k, v in os.environ.items() if before.get(k) != v}
    if threading.active_count() != 1:  # forking a process with threads is not safe
        print(f"zygote: {threading.active_count()} threads after the imports", file=sys.stderr)
        return 1
    server = _Server(path, set_at_import)
    print("ready", flush=True)
    server.run()
    return 0


# -- the client ---------------------------------------------------------------------------------


class Forked:
    """What a test holds of a supervisor forked by the zygote: the parts of `subprocess.Popen`
    the tests use (pid, stdin, stdout, poll, wait, send_signal, kill, terminate, returncode).
    Its stdout carries its stderr too (Popen's stderr=STDOUT), both as text."""

    def __init__(self, zygote: Zygote, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.args = [sys.executable, "-m", "bot.cli", *argv]
        self.returncode: int | None = None
        self._log = zygote.log
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(zygote.path)
            request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode() + b"\n"
            self._conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                            array.array("i", [in_r, out_w, out_w]))])
        finally:
            os.close(in_r)
            os.close(out_w)
        self.stdin = open(in_w, "w")  # noqa: SIM115 - closed by the test, like Popen's
        self.stdout = open(out_r)  # noqa: SIM115 - closed by the reader at its end
        self._buf = b""
        self.pid = int(self._message(30.0)["pid"])

    def _message(self, timeout: float | None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError(f"the test zygote went away: its log is {self._log}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = int(self._message(timeout)["status"])
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                return self.wait(0)
            except subprocess.TimeoutExpired:
                return None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)  # not yet reaped: the pid is still this child's

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The worker's zygote, started at first use and ended with the worker."""

    _lock = threading.Lock()
    _it: Zygote | None = None

    def __init__(self) -> None:
        import tempfile

        self.where = Path(tempfile.mkdtemp(prefix="sbz", dir="/tmp"))
        self.path = str(self.where / "z.sock")
        self.log = self.where / "zygote.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        env["PYTHONDONTWRITEBYTECODE"] = ""
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote", self.path], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, cwd=ROOT, env=env, text=True)
        assert self.proc.stdout is not None
        with self.proc.stdout:
            first = self.proc.stdout.readline()
        if first.strip() != "ready":
            self.proc.wait(10)
            raise RuntimeError(f"the test zygote did not start: {self.log.read_text()}")
        atexit.register(self.close)

    def close(self) -> None:
        """End it (its stdin closes) and reap it; its children, if any, are not touched."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.where, ignore_errors=True)

    @classmethod
    def get(cls) -> Zygote:
        with cls._lock:
            if cls._it is None or cls._it.proc.poll() is not None:
                cls._it = cls()
            return cls._it

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> Forked:
        """`python -m bot.cli <argv>` with exactly `env`, in `cwd`."""
        return Forked(self, argv, env, cwd)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
