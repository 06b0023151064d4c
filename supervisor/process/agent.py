"""One agent's OS processes: the claude CLI under our launcher, driven by ClaudeSDKClient.

The only module (with the launcher) that sends signals. Sandboxed, an agent is its pid namespace:
the launcher becomes bwrap, whose child is the namespace's init (our launcher again), and
everything the agent starts lives under that init; killing the init ends the namespace at once,
and pausing asks the init to stop every process in it with one kill(-1). Unsandboxed, every
process either descends from the launcher (a child subreaper) or carries the agent tag in its
environment, and `members()` is the union. The tag also lets a sweep find every agent of a data
directory from outside, with no supervisor running (the kill switch, `switchboard kill`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import re
import select
import shutil
import signal
import sys
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from supervisor import egress_relay
from supervisor import launcher as launcher_module
from supervisor.errors import ConfigError
from supervisor.process import proctable
from supervisor.process.cpugroup import member_of
from supervisor.process.proctable import ProcTable, Snapshot
from supervisor.process.tree import (
    DYING_WAIT_S,
    POLITE_POLL_S,
    _environ_has,
    _family,
    _live,
    _needle,
    _signal_all,
    _stopped,
    _wait_dead,
    children_of,
    lower_autogroup,
    ns_pid,
    start_time,
    sweep,
    tagged_pids,
    tree,
)

if TYPE_CHECKING:  # the SDK costs about a second to import: only agents need it, not the
    # offline commands (status, kill from a shell, the container's health check)
    from claude_agent_sdk import ClaudeAgentOptions
    from claude_agent_sdk.types import Message

    from supervisor.config import Settings

logger = logging.getLogger(__name__)

# The SDK logs ERROR ("Fatal error in message reader: Command failed with exit code 143") for a
# CLI ended by a signal, which is what /stop, /kill and the shutdown do on purpose. The runner
# reports a process that died on its own (as a warning, with its stderr); a signalled one is
# no error here, so the SDK's line is kept as a warning.
SIGNALLED_EXIT = re.compile(r"Fatal error in message reader: .*exit code:? (-9|-15|137|143)\b")


def _signalled_exit_is_no_error(record: logging.LogRecord) -> bool:
    if record.levelno >= logging.ERROR and SIGNALLED_EXIT.search(record.getMessage()):
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True


logging.getLogger("claude_agent_sdk._internal.query").addFilter(_signalled_exit_is_no_error)

TAG_VAR = launcher_module.TAG_VAR
STDERR_LINES = 40


def bundled_cli() -> Path | None:
    spec = importlib.util.find_spec("claude_agent_sdk")  # found, not imported
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "_bundled" / "claude"
    return path if path.exists() else None


def resolve_cli(settings: Settings) -> Path:
    """The claude CLI agents run: the configured one, else the SDK's bundled one, else PATH's."""
    if settings.claude_cli:
        path = settings.claude_cli
        if not path.exists():
            raise ConfigError(f"claude_cli is set to {path}, which does not exist")
        return path
    found = bundled_cli() or (Path(p) if (p := shutil.which("claude")) else None)
    if found is None:
        raise ConfigError(
            "no claude CLI found: install claude-agent-sdk (it bundles one) or set "
            "SWITCHBOARD_CLAUDE_CLI to its path"
        )
    return found


# The executable the SDK starts (and bwrap starts again as the sandbox's init): it runs the
# launcher compiled once, here, from the file beside it. A script is compiled at every start
# (about 3.5 ms of CPU for the launcher), and every agent's start waits for two of them.
LAUNCHER_STUB = """#!{python} -SE
# Switchboard's agent launcher (supervisor/launcher.py), compiled into the file beside this one.
import marshal
with open(__file__ + ".code", "rb") as fh:
    exec(marshal.loads(fh.read()))
"""


def launcher_files(launcher: Path) -> tuple[Path, Path, Path]:
    """The launcher's executable, its compiled code and the egress relay it starts in a sandbox
    with a network of its own: what a sandbox needs to see of them."""
    return (launcher, launcher.with_name(launcher.name + ".code"),
            launcher.with_name("egress-relay.py"))


def install_launcher(run_dir: Path) -> Path:
    """Write the launcher for this interpreter (an executable stub and the launcher's code,
    compiled, beside it); return the stub's path. Rewritten whenever either differs."""
    import marshal

    run_dir.mkdir(parents=True, exist_ok=True)
    target, code_file, relay = launcher_files(run_dir / "claude-launcher")
    source = Path(launcher_module.__file__).read_text()
    code = marshal.dumps(compile(source, launcher_module.__file__, "exec", dont_inherit=True))
    # The code first: a stub is never there without the code it loads.
    for path, data, mode in ((code_file, code, 0o644),
                             (target, LAUNCHER_STUB.format(python=sys.executable).encode(), 0o755),
                             (relay, Path(egress_relay.__file__).read_bytes(), 0o644)):
        if not path.exists() or path.read_bytes() != data:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.chmod(mode)
            tmp.replace(path)
    return target


def _has_exited(pid: int) -> bool:
    """`pid` is a zombie or gone, asked without a /proc read (a pidfd is readable once its
    process has exited); through /proc where no pidfd can be opened."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:
        return not _live(pid)
    try:
        return bool(select.select([fd], [], [], 0)[0])
    finally:
        os.close(fd)


def _resolve(fut: asyncio.Future[None]) -> None:
    """A pidfd became readable: its process has exited."""
    if not fut.done():
        fut.set_result(None)


async def _pid_exit(pid: int, timeout_s: float) -> bool:
    """Until `pid` has exited (a zombie or gone), at most `timeout_s`; True if it has. Watched
    through a pidfd that wakes the loop when it exits: no `/proc` read on the loop, where
    reading a dying process's stat waits for the kernel's teardown of it (the loop's stalls
    in a 300-agent shutdown were nearly all such reads). Without a pidfd (too many files
    open, an old kernel) it is polled in a thread."""
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # gone (reaped) already
    except OSError:
        await asyncio.to_thread(_wait_dead, {pid}, time.monotonic() + timeout_s)
        return not await asyncio.to_thread(_live, pid)
    try:
        gone: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _resolve, gone)
        try:
            async with asyncio.timeout(timeout_s):
                await gone
        except TimeoutError:
            return False
        return True
    finally:
        loop.remove_reader(fd)
        os.close(fd)


class AgentProcess:
    """The CLI process tree of one agent and the SDK client that talks to it."""

    def __init__(
        self,
        *,
        tag: str,
        options: ClaudeAgentOptions,
        on_stderr: Callable[[str], None] | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self.tag = tag
        # Called once, as the process is ended on purpose (kill, close): the model gateway
        # revokes its token, so a response in flight ends before the signals even go out.
        self._on_end = on_end
        self.options = options
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self._on_stderr = on_stderr
        options.stderr = self._stderr
        from claude_agent_sdk import ClaudeSDKClient

        self.client = ClaudeSDKClient(options)
        self.launcher_pid: int | None = None  # bwrap's outer process when sandboxed
        self.init_pid: int | None = None  # the sandbox's pid 1, seen from here
        # When bwrap and the init started (/proc stat's starttime): the kill switch kills a
        # known pid only while it is still that process, not one that reused its pid.
        self.started: dict[int, int] = {}
        self.cli_pid: int | None = None
        self.sandboxed = bool(options.env.get(launcher_module.SANDBOX_VAR))
        self.paused = False
        self._closed = False
        self._terminated_at: float | None = None  # when the polite SIGTERM went out

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    def _stderr(self, line: str) -> None:
        self.stderr_tail.append(line)
        if self._on_stderr:
            self._on_stderr(line)

    def stderr_text(self, lines: int = 10) -> str:
        return "\n".join(list(self.stderr_tail)[-lines:])

    async def start(self, timeout_s: float = 90.0) -> None:
        async with asyncio.timeout(timeout_s):  # not wait_for: see close()
            await self.client.connect()
        info = await self.client.get_server_info() or {}
        pid = info.get("pid")
        if self.sandboxed:
            self._find_sandbox(pid if isinstance(pid, int) else None)
            self._check_cpu_group()
            return
        if isinstance(pid, int):
            self.cli_pid = pid
            with contextlib.suppress(psutil.NoSuchProcess):
                parent = psutil.Process(pid).ppid()
                if _environ_has(parent, f"{TAG_VAR}={self.tag}\0".encode()):
                    self.launcher_pid = parent
        if self.launcher_pid is None:
            # Fall back to the tag: the launcher is the tagged process whose parent is us.
            for p in tagged_pids(self.tag + "\0"):
                with contextlib.suppress(psutil.NoSuchProcess):
                    if psutil.Process(p).ppid() == os.getpid():
                        self.launcher_pid = p
        self._check_cpu_group()

    def _check_cpu_group(self) -> None:
        """The launcher joined the agents' CPU group (process/cpugroup.py), or it is said: the
        agent then weighs as its session's autogroup, as without a group."""
        group = self.options.env.get(launcher_module.CPU_GROUP_VAR)
        if group and self.launcher_pid and not member_of(self.launcher_pid, Path(group)):
            logger.warning("agent outside the agents' CPU group tag=%s group=%s stderr=%s",
                           self.tag, group, self.stderr_text(2))

    def _find_sandbox(self, inner_cli_pid: int | None) -> None:
        """Host pids of bwrap (our child), the namespace's init and the CLI."""
        # bwrap is our own child: look among our children, not through the whole of /proc.
        needle = f"{TAG_VAR}={self.tag}\0".encode()
        for p in children_of(os.getpid()):
            if _environ_has(p, needle):
                self.launcher_pid = p
        if self.launcher_pid is None:
            return
        kids = children_of(self.launcher_pid)
        self.init_pid = kids[0] if kids else None
        if self.init_pid is not None:
            lower_autogroup(self.init_pid, self.options.env.get(launcher_module.NICE_VAR, ""))
        if self.init_pid is not None:
            for child in children_of(self.init_pid):
                if inner_cli_pid is None or ns_pid(child) == inner_cli_pid:
                    self.cli_pid = child
                    break
        for known in (self.launcher_pid, self.init_pid):
            if known and (at := start_time(known)) is not None:
                self.started[known] = at

    async def query(self, prompt: str, note: str | None = None) -> str:
        """Send a turn; returns the uuid it was sent with, which the CLI names in the result
        of the turn that took it in (a turn the CLI began on its own names none of ours).
        `note` (from Switchboard, e.g. "you were restarted") goes first, as a text block of
        its own: the prompt stays the message's last text block."""
        sent = str(uuid.uuid4())
        content: str | list[dict[str, str]] = prompt if note is None else [
            {"type": "text", "text": note}, {"type": "text", "text": prompt}]

        async def message() -> AsyncIterator[dict[str, Any]]:
            yield {"type": "user", "parent_tool_use_id": None, "uuid": sent,
                   "message": {"role": "user", "content": content}}

        await self.client.query(message())
        return sent

    def responses(self) -> AsyncIterator[Message]:
        """Everything the CLI says, turn after turn (the caller stops at its result)."""
        return self.client.receive_messages()

    async def interrupt(self) -> None:
        await self.client.interrupt()

    # -- membership and signals -------------------------------------------------------------

    def members(self) -> list[int]:
        """Every live process of this agent. Sandboxed: bwrap, the init and everything in the
        namespace (orphans are reparented to the init, so the tree under it is complete).
        Otherwise: tagged processes and everything under them."""
        if self.sandboxed:
            return sorted(tree(self.launcher_pid)) if self.launcher_pid else []
        return sorted(_family(_needle(self.tag + "\0")))

    def agent_pids(self) -> list[int]:
        """The processes the agent runs: members less bwrap and the init (ours, not its)."""
        ours = {self.launcher_pid, self.init_pid}
        return [p for p in self.members() if p not in ours]

    def alive(self) -> bool:
        """Whether the launcher (bwrap, our child) has not exited. Asked through a pidfd, not
        `/proc/<pid>/stat`: on the loop, where reading a dying process's stat waits for the
        kernel's teardown of its memory (the idle checks of 300 agents during a kill)."""
        pid = self.launcher_pid or self.cli_pid
        if pid is None:
            return not self._closed
        return not _has_exited(pid)

    def pause(self) -> list[int]:
        """Freeze every process of the agent. Sandboxed: the init stops the whole namespace
        in one kill(-1, SIGSTOP); we then check, and stop directly whatever is still running.
        Otherwise SIGSTOP every member, repeated until no new member appears."""
        if self.sandboxed and self.init_pid:
            _signal_all([self.init_pid], launcher_module.PAUSE_SIGNAL)
            deadline = time.monotonic() + 2.0
            while True:
                running = [p for p in self.agent_pids() if not _stopped(p)]
                if not running or time.monotonic() > deadline:
                    break
                _signal_all(running, signal.SIGSTOP)
                time.sleep(0.002)
            # Then our own two, so that every process of the sandbox shows stopped; resume
            # continues them first.
            ours = [p for p in (self.init_pid, self.launcher_pid) if p]
            _signal_all(ours, signal.SIGSTOP)
            # A signal is delivered, not done: wait (bounded) until they show stopped, so that
            # what pause reports is what the process table says.
            deadline = time.monotonic() + 1.0
            while not all(_stopped(p) for p in ours) and time.monotonic() < deadline:
                time.sleep(0.002)
            self.paused = True
            return self.members()
        stopped: set[int] = set()
        for _ in range(20):
            todo = [p for p in self.members() if p not in stopped]
            if not todo:
                break
            _signal_all(todo, signal.SIGSTOP)
            stopped.update(todo)
        self.paused = True
        return sorted(stopped)

    def resume(self) -> list[int]:
        if self.sandboxed and self.init_pid:
            _signal_all([p for p in (self.launcher_pid, self.init_pid) if p], signal.SIGCONT)
            _signal_all([self.init_pid], launcher_module.RESUME_SIGNAL)
        pids = self.members()
        _signal_all(pids, signal.SIGCONT)
        self.paused = False
        return pids

    def members_in(self, snap: Snapshot) -> set[int]:
        """`members()`, read from a shared snapshot instead of from /proc."""
        if self.sandboxed:
            return snap.tree(self.launcher_pid) if self.launcher_pid else set()
        return snap.family(_needle(self.tag + "\0")[len(TAG_VAR) + 1:])

    async def kill(self, grace_s: float, table: ProcTable | None = None, *,
                   sweep: bool = True) -> list[int]:
        """SIGTERM, a bounded wait, SIGKILL of every member, then the tag sweep. Returns the
        pids that had to be force-killed. Safe to call more than once and under cancellation.
        Every /proc read is a snapshot shared with the other agents being killed at the same
        time (`table`, the loop's by default), taken in a thread: killing N agents at once
        costs a few scans, and none of them on the event loop. `sweep=False` (a supervisor's
        shutdown, which sweeps its whole tag once at the end): a sandboxed agent's tag is not
        swept here, as the SIGKILL of its init ends every process of its namespace; the scans
        of 300 agents ending at once kept a core busy, at the supervisor's weight, that the
        dying agents needed (the shutdown took 4-5x a direct SIGTERM)."""
        self._ended()
        table = table or proctable.shared()
        last: set[int] = set()
        try:
            sent = self.terminate() if grace_s > 0 else None
            if sent is not None:
                deadline = sent + grace_s
                polite = (self.cli_pid or self.launcher_pid) if self.sandboxed else None
                if polite is not None:  # the CLI's exit wakes the loop (see `_still_there`)
                    left = max(0.0, deadline - time.monotonic())
                    last = set() if await _pid_exit(polite, left) else {polite}
                else:
                    last = await self._still_there(table)
                while last and time.monotonic() < deadline:
                    await asyncio.sleep(POLITE_POLL_S)
                    last = await self._still_there(table)
            else:
                if self.paused:
                    self.resume()
                last = self.members_in(await table.snapshot())
        finally:
            # Whatever ends the wait (its deadline, a cancel, an error), the SIGKILL happens at
            # once, synchronously, so a cancelled kill still kills; the sweep that follows is
            # the synchronous one if we are being cancelled.
            forced = sorted(self._kill_known(last))
            ours = {p for p in (self.init_pid, self.launcher_pid) if p}
            # The SDK's disconnect (loop work: its tasks, pipes and the launcher's exit) runs
            # beside the sweep (a /proc scan in a thread) instead of after it: with 300
            # agents shutting down at once that was 200 ms of disconnects queued behind it.
            closing = asyncio.ensure_future(self.close(kill=False))
            try:
                if sweep or not self.sandboxed:
                    forced = sorted(set(forced) | await self._sweep_shared(table))
                await self._exited({*forced, *ours})
            except asyncio.CancelledError:
                self.kill_now()
                raise
            finally:
                await asyncio.shield(closing)
        return forced

    def terminate(self) -> float | None:
        """The polite half of `kill`, synchronous: resume if paused, then SIGTERM the CLI
        (sandboxed, through the init, which forwards it; bwrap would just die). Once only;
        returns when it was sent, None if there is no process to wait for. A shutdown sends it
        to every agent in one pass before any of them is waited for (`kill` then only waits)."""
        polite = self.init_pid if self.sandboxed else self.launcher_pid
        if self._terminated_at is None and polite:
            if self.paused:
                self.resume()
            _signal_all([polite], signal.SIGTERM)
            self._terminated_at = time.monotonic()
        return self._terminated_at

    @staticmethod
    async def _exited(pids: set[int]) -> None:
        """Until each killed pid has finished exiting (a zombie or gone: see `_wait_dead`),
        bounded; one at a time, each through a pidfd (`_pid_exit`)."""
        deadline = time.monotonic() + DYING_WAIT_S
        for pid in pids:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await _pid_exit(pid, left)

    async def _still_there(self, table: ProcTable) -> set[int]:
        """What the polite wait waits for. Sandboxed: the CLI, one stat per poll and no scan
        (the SIGTERM was for it, to end its session cleanly; once it is gone, the SIGKILL of
        the init that follows ends the rest of the namespace at once, without waiting for the
        init and then bwrap to notice and exit in turn, each a wake-up of a niced process).
        Otherwise: every member, from the shared snapshot."""
        if self.sandboxed:
            pid = self.cli_pid or self.launcher_pid
            return {pid} if pid and _live(pid) else set()
        return self.members_in(await table.snapshot())

    def _kill_known(self, pids: set[int]) -> set[int]:
        """SIGKILL the init and bwrap (the kernel then ends the whole namespace) and `pids`."""
        ours = [p for p in (self.init_pid, self.launcher_pid) if p] if self.sandboxed else []
        _signal_all([*ours, *pids], signal.SIGKILL)
        self.paused = False
        return set(pids)

    async def _sweep_shared(self, table: ProcTable, rounds: int = 50) -> set[int]:
        """`sweep` of this agent's tag (and, sandboxed, its tree), from shared snapshots:
        freeze what is left, then kill it, until a snapshot shows nothing."""
        killed: set[int] = set()
        needle = _needle(self.tag + "\0")[len(TAG_VAR) + 1:]
        for _ in range(rounds):
            snap = await table.snapshot()
            pids = snap.family(needle) | self.members_in(snap)
            fresh = pids - killed  # the rest has its SIGKILL and is dying: see `sweep`
            if not fresh:
                # Nothing new since the last round: what is left is dying and forks no more.
                # Asking for scans until the kernel has torn it down kept a /proc scan going
                # back to back through a 300-agent shutdown, CPU the dying processes needed;
                # the caller waits for them (`_exited`) a pid at a time instead.
                break
            _signal_all(fresh, signal.SIGSTOP)
            _signal_all(fresh, signal.SIGKILL)
            killed |= fresh
        return killed

    def kill_now(self) -> list[int]:
        """Immediate SIGKILL of the whole tree and every tagged process (no await). Sandboxed,
        the init goes first: the kernel then ends every process of the namespace at once."""
        self._ended()
        forced: list[int] = []
        if self.sandboxed and self.launcher_pid:
            forced = self.members()
            _signal_all([p for p in (self.init_pid, self.launcher_pid) if p], signal.SIGKILL)
        forced = sorted(set(forced) | set(sweep(self.tag + "\0")))
        self.paused = False
        return forced

    async def close(self, *, kill: bool = True, timeout_s: float = 10.0) -> None:
        """Disconnect the SDK client (it closes stdin, waits, then terminates), bounded."""
        self._ended()
        if self._closed:
            return
        self._closed = True
        if self.paused:
            self.resume()
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for returns normally when a cancel
            # lands just as the disconnect finishes, and the cancel is lost (the runner's loop
            # then ran on through shutdown: "agent loop did not stop"). Shielded: a cancel
            # leaves the disconnect running to its end; the SIGKILL below happens regardless.
            with contextlib.suppress(Exception):  # the client may already be dead; never raise here
                async with asyncio.timeout(timeout_s), proctable.closing_slot():
                    await asyncio.shield(self.client.disconnect())
        finally:
            # The SDK closes the message stream's receive side only when disconnect() gets to
            # its end; one that raised or ran out of time leaves it open (a ResourceWarning
            # once collected). We are its only reader, and done with it.
            query = getattr(self.client, "_query", None)
            if query is not None:
                with contextlib.suppress(Exception):
                    query.close_receive_stream()
            if kill:
                self._kill_known(set())
                table = proctable.shared()
                try:
                    ours = {p for p in (self.init_pid, self.launcher_pid) if p}
                    await self._exited(await self._sweep_shared(table) | ours)
                except asyncio.CancelledError:
                    self.kill_now()
                    raise
