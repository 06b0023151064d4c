"""A real `switchboard run` subprocess for tests: console lines in, output lines out."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import FAKE_CLAUDE, MODEL, PERMISSIVE_POLICY
from tests.zygote import Forked, Zygote


class Supervisor:
    """`switchboard run --console` in a subprocess; lines in on stdin, lines out collected."""

    def __init__(self, home: Path, console: bool = True, *, env: dict[str, str] | None = None,
                 preexec_fn: Callable[[], None] | None = None,
                 prefix: tuple[str, ...] = (), cold: bool = False) -> None:
        """`env` is added to the test's environment (SWITCHBOARD_* variables dropped);
        `prefix` runs the supervisor under another command (e.g. without namespaces). The
        supervisor is forked from the worker's zygote (tests/zygote.py), a second's CPU less
        than a cold interpreter; `cold`, a prefix or a preexec_fn start one cold."""
        # PORT too: set, it would turn on every supervisor's HTTP listener on one port.
        full = {k: v for k, v in os.environ.items()
                if not k.startswith("SWITCHBOARD_") and k != "PORT"}
        full["SWITCHBOARD_HOME"] = str(home)
        full.update(env or {})
        args = ["run", "--console" if console else "--headless"]
        root = Path(__file__).resolve().parents[2]
        self.proc: subprocess.Popen[str] | Forked
        if prefix or preexec_fn is not None or cold:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "bot.cli", *args],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=full, text=True, cwd=root, preexec_fn=preexec_fn,
            )
        else:  # forked from a warm interpreter: see tests/zygote.py
            self.proc = Zygote.get().spawn(args, full, root)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.ended = threading.Event()  # the output is read to its end
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout
        with self.proc.stdout:  # closed at its end: an unclosed pipe is a ResourceWarning
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
        self.ended.set()

    def rest(self, timeout: float = 10) -> list[str]:
        """Every line not yet seen, once the process has closed its output."""
        self.ended.wait(timeout)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return self.seen

    def send(self, line: str) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, needle: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"never saw {needle!r}; output so far:\n" + "\n".join(self.seen))

    def expect_all(self, needles: list[str], timeout: float = 90) -> None:
        """Each needle once, in any order."""
        left = list(needles)
        deadline = time.monotonic() + timeout
        while left:
            line = self.expect("", max(0.1, deadline - time.monotonic()))
            left = [n for n in left if n not in line]

    def stop(self, timeout: float = 30) -> None:
        """A clean stop (SIGTERM) if it still runs, waited for up to `timeout`, then `close`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        self.close()

    def close(self) -> None:
        """Kill the supervisor if it still runs and close its stdin (the pump closes stdout at
        its end: an agent left behind may hold it open)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):  # a line the dead process never read
                self.proc.stdin.close()


def write_config(home: Path, mock=None, *, fake: bool = False, permissive: bool = False,
                 **extra: object) -> None:
    home.mkdir(parents=True, exist_ok=True)
    # Agents at the supervisor's priority, as in tests/conftest.py make_settings: niced, a test's
    # agents starve behind the other workers' supervisors on two cores (and theirs behind ours).
    lines = [f'model = "{MODEL}"', "kill_grace_s = 2"]
    if "agent_nice" not in extra:
        lines.append("agent_nice = 0")
    if "notice_digest_s" not in extra:
        lines.append("notice_digest_s = 0")  # each notice on its own, as tests wait for them
    if permissive:
        lines.append(f'policy_file = "{PERMISSIVE_POLICY}"')
    if fake:
        lines.append(f'claude_cli = "{FAKE_CLAUDE}"')
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    lines.append("[agent_env]")
    if mock is not None:
        env = mock.cli_env(home.parent / "claude", tmpdir=home.parent / "t")
        lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    (home / "switchboard.toml").write_text("\n".join(lines) + "\n")
