"""Processes as /proc shows them: an agent's tree, its members by their tag, pids inside a
namespace, and the sweep that ends whatever carries a tag (what a previous supervisor left, what
the kill switch misses). Signals are sent only here and in supervisor/process/agent.py."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from supervisor import launcher as launcher_module

if TYPE_CHECKING:  # the SDK costs about a second to import: only agents need it, not the
    # offline commands (status, kill from a shell, the container's health check)

    pass

logger = logging.getLogger(__name__)
TAG_VAR = launcher_module.TAG_VAR


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read()
    except OSError:
        return False
    return needle in data


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (every thread's), from /proc without a full scan."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def tree(pid: int) -> list[int]:
    """`pid` and every live descendant (walks /proc/<pid>/task/*/children)."""
    seen: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        if p in seen or not _live(p):
            continue
        seen.append(p)
        stack.extend(children_of(p))
    return seen


def trees(pids: Iterable[int]) -> set[int]:
    """Every live process at or under any of `pids`, each walked once: what a SIGKILL of those
    pids is about to end (a sandbox's init takes its whole namespace with it, and once it is
    dying its members can no longer be told from /proc, so they are counted before)."""
    seen: set[int] = set()
    stack = list(pids)
    while stack:
        p = stack.pop()
        if p in seen or not _live(p):
            continue
        seen.add(p)
        stack.extend(children_of(p))
    return seen


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """/proc/<pid>/stat after the command name (state, ppid, ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split() or None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0].decode() if fields else None


def _live(pid: int) -> bool:
    state = _state(pid)
    return state is not None and state not in "ZX"


def _stopped(pid: int) -> bool:
    """Stopped, or no longer there to run."""
    return _state(pid) in ("T", "t", "Z", None)


def ns_pid(pid: int) -> int | None:
    """The pid `pid` has inside its own (innermost) pid namespace."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _needle(prefix: str) -> bytes:
    return f"{TAG_VAR}={prefix}".encode()


def _scan(needle: bytes, known: Collection[int] = ()) -> tuple[dict[int, list[int]], set[int]]:
    """One pass over /proc: children of every live (non-zombie) process, and the pids whose
    environment contains `needle`. One pass per round keeps a 100-agent sweep fast. `known`:
    pids already SIGKILLed (dying), passed over without a read: reading a dying process's
    environment, or its stat, waits for the kernel's teardown of its memory, so a scan
    through 1,500 of them waited on each in turn (seconds on a loaded machine). A tagged
    process they started is still found by its own tag (a pid reused meanwhile is not ours
    to follow)."""
    children: dict[int, list[int]] = {}
    tagged: set[int] = set()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid in known:
            continue
        fields = _stat_fields(entry)
        if not fields or fields[0] == b"Z" or pid == me:
            continue
        children.setdefault(int(fields[1]), []).append(pid)
        if _environ_has(pid, needle):
            tagged.add(pid)
    return children, tagged


def _family(needle: bytes, known: Collection[int] = ()) -> set[int]:
    """Tagged processes and everything under them (a subreaper's orphans included); `known`
    as in `_scan`."""
    children, found = _scan(needle, known)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(os.getpid())
    return found


def tagged_pids(prefix: str) -> list[int]:
    """Live pids whose environment carries an agent tag starting with `prefix`."""
    return sorted(_scan(_needle(prefix))[1])


def tagged_family(prefix: str) -> set[int]:
    """Live processes tagged with `prefix` and everything under them (one /proc scan)."""
    return _family(_needle(prefix))


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, /proc stat's starttime), None if it is gone:
    with the pid, what names one process (a pid is reused, never with the same start)."""
    fields = _stat_fields(pid)
    return _started(fields) if fields else None


def _started(fields: list[bytes]) -> int | None:
    """starttime, from `_stat_fields` (field 22 of /proc/<pid>/stat)."""
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def kill_trees(pids: Iterable[int], started: Mapping[int, int] | None = None) -> set[int]:
    """SIGKILL pids known to be ours (the kill switch's sandbox inits and bwraps) and every
    process under each, each tree as soon as it has been counted: the root first (the kernel
    then ends its namespace whole, whatever forks meanwhile), then each member directly, as a
    direct kill would, so that no process waits on its init being scheduled to end it (on a
    loaded machine, with agents niced, that was the kill switch's slowest part). The first
    SIGKILLs go out after one agent's walk, not after all of them. Returns every pid counted.
    `started`: each root's start time when the caller learnt of it (`start_time`); a root that
    started at another time is passed over with its tree: the process the caller knew has
    ended, and its pid is another program's now (read from the stat the walk reads anyway)."""
    seen: set[int] = set()
    started = started or {}
    for pid in pids:
        stack, tree_pids = [pid], []
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            fields = _stat_fields(p)
            if not fields or fields[0] in (b"Z", b"X"):
                continue
            if p == pid and pid in started and _started(fields) != started[pid]:
                break  # not the process the caller knew
            seen.add(p)
            tree_pids.append(p)
            stack.extend(_kids(p, fields))
        if tree_pids:  # none: the root is gone, already counted, or not the one known
            _signal_all((pid,), signal.SIGKILL)
            _signal_all((p for p in tree_pids if p != pid), signal.SIGKILL)
    return seen


def _kids(pid: int, fields: list[bytes]) -> list[int]:
    """`children_of`, with one read instead of a directory listing and a read per thread for
    a process of one thread (its stat's num_threads): most of an agent's processes."""
    if len(fields) > 17 and fields[17] == b"1":
        try:
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
                return [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            return []
    return children_of(pid)


def sweep(prefix: str, *, rounds: int = 50, dying: Iterable[int] = ()) -> list[int]:
    """SIGKILL every process tagged with `prefix` and everything under them, all at once: freeze
    the lot, then kill the lot, until nothing is left. Used after crashes and by the kill switch.
    Synchronous and thread-safe: it must work while the event loop is busy. `dying`: pids
    already SIGKILLed (the kill switch's known trees), not signalled again but waited for like
    the rest (without them, the first scan found them all still dying and two more followed)."""
    needle = _needle(prefix)
    killed: set[int] = set(dying)
    for _ in range(rounds):
        pids = _family(needle, killed)
        if not pids:
            break
        # Only what has not had its SIGKILL yet: a process that has one is dying (nothing
        # blocks it, and it forks no more); signalling it again each round only cost time,
        # with the GIL held (os.kill keeps it), so the event loop waited on this thread.
        fresh = pids - killed
        if not fresh:
            # All that is left has had its SIGKILL and is dying (a killed process forks no
            # more): scanning again until the kernel has torn it down only spent the rounds
            # (with a network namespace per agent, 300 agents took 50 scans, ~600 ms).
            break
        _signal_all(fresh, signal.SIGSTOP)
        fresh = (fresh | _family(needle, killed)) - killed  # forked before the freeze
        killed.update(fresh)
        _signal_all(fresh, signal.SIGKILL)
        time.sleep(0.005)
    left = _wait_dead(killed, time.monotonic() + NUDGE_AFTER_S)
    if left:
        # Not seen gone (those not looked at yet included: a full look could take seconds):
        # slow to exit, or one of `dying` that was never signalled after all (a caller's
        # mistake must not leave a process). Each gets a SIGKILL of its own; one more to a
        # process already dying or gone changes nothing.
        _signal_all(left, signal.SIGKILL)
        _wait_dead(left, time.monotonic() + DYING_WAIT_S)
    return sorted(killed)


DYING_WAIT_S = 2.0  # bound on waiting for killed processes to finish exiting
# How long `sweep` waits for what it counts as dying before it SIGKILLs each survivor again:
# a killed process is gone in milliseconds; one nothing signalled would wait for ever.
NUDGE_AFTER_S = 0.25
# How often a polite kill looks whether the CLI has gone (one stat per agent). Not shorter: with
# 300 agents shutting down at once, 10 ms polls made the loop the bottleneck (shutdown 810-850 ms
# against 690-760 ms at 50 ms: the shutdown of 300 idle fake agents, two runs each).
POLITE_POLL_S = 0.05


def _wait_dead(pids: Iterable[int], deadline: float, *, batch: int = 0) -> list[int]:
    """Until every pid in `pids` is gone or a zombie (bounded: a pid reused meanwhile must not
    hold a kill up). A process in the middle of exiting has already dropped its memory, so its
    environment (the tag) reads empty and a scan no longer finds it; but it is still there:
    the init of a pid namespace, for one, stays until the kernel has reaped all of its
    namespace. Kill returns when they are really gone. Waited for through pidfds, which the
    kernel wakes at each exit, `PIDFD_BATCH` at a time (the open-files limit): no `/proc` read
    of a dying process, which waits for the kernel's teardown of its memory (a full pass over
    1,500 dying processes took seconds past the deadline). A pid no pidfd can be opened for
    (too many files open) is looked at through `/proc`. Returns the pids not seen gone by the
    deadline (`batch`: how many pidfds at once, PIDFD_BATCH by default)."""
    pending = list(pids)
    size = batch or PIDFD_BATCH
    left: list[int] = []
    while pending:
        some, pending = pending[:size], pending[size:]
        if time.monotonic() >= deadline:
            left.extend(some)
            continue
        left.extend(_wait_batch(some, deadline))
    return left


def _wait_batch(pids: list[int], deadline: float) -> list[int]:
    watching: dict[int, int] = {}  # pidfd -> pid
    unwatched: list[int] = []
    poller = select.poll()
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # reaped already
            except OSError:
                unwatched.append(pid)
                continue
            watching[fd] = pid
            poller.register(fd, select.POLLIN)
        while watching:
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            for fd, _ in poller.poll(max(1, int(remaining_ms))):
                poller.unregister(fd)
                os.close(fd)
                del watching[fd]
    finally:
        for fd in watching:
            os.close(fd)
    return list(watching.values()) + _wait_proc(unwatched, deadline)


def _wait_proc(pids: list[int], deadline: float) -> list[int]:
    """`_wait_dead` by `/proc` reads: each look stops at the first pid still there (a gone pid
    stays gone)."""
    left = list(pids)
    while True:
        while left and not _live(left[-1]):
            left.pop()
            if time.monotonic() >= deadline:
                return left
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.002)


PIDFD_BATCH = 256


def _exiting(pids: Iterable[int]) -> set[int]:
    """Those of `pids` still there and not yet zombies (or dead)."""
    return {pid for pid in pids if _live(pid)}


def _autogroup_nice(pid: int | str) -> int | None:
    """The nice of `pid`'s autogroup; None without autogroups. A session that never called
    setsid() since boot (a container's init and what it starts) is in the root group, for which
    the kernel prints nothing: it weighs as nice 0 (the launcher reads it the same way)."""
    try:
        with open(f"/proc/{pid}/autogroup") as fh:
            return int((fh.read().split() or ["0"])[-1])
    except (OSError, ValueError):
        return None


def lower_autogroup(pid: int, step: str) -> None:
    """Set the autogroup of `pid`'s session `step` nice levels below ours. The sandbox's init
    does it too, but the kernel lets a process without CAP_SYS_ADMIN change one autogroup a
    tenth of a second machine-wide; a supervisor that has the capability does it at once."""
    mine = _autogroup_nice("self")
    if mine is None or not step.isdigit() or int(step) <= 0:
        return
    with contextlib.suppress(OSError):  # no permission (not root), or the process is gone
        with open(f"/proc/{pid}/autogroup", "w") as fh:
            fh.write(str(min(19, mine + int(step))))
