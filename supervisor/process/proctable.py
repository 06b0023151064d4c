"""Shared /proc snapshots: one scan per round for every agent being killed, taken in a thread.

Killing or shutting down N agents used to scan the whole of /proc on the event loop once per
agent and per poll: O(agents x processes), with the loop blocked for seconds at 300 agents. Here a
`Snapshot` is one pass over /proc (parents, states, agent tags), and `ProcTable.snapshot()` hands
the same pass to every caller that asked while it was being taken or before the next one began: a
caller always gets a scan that started after it asked (so it sees what it just signalled), and
N agents asking at once cost one or two scans, not N. `closing_slot()` is the other bound of a
mass ending: how many SDK clients disconnect at once.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

from supervisor import launcher as launcher_module

_TAG = f"{launcher_module.TAG_VAR}=".encode()


@dataclass(slots=True)
class Snapshot:
    """Live (non-zombie) processes: their children and the agent tag each carries, if any."""

    children: dict[int, list[int]] = field(default_factory=dict)
    tags: dict[int, bytes] = field(default_factory=dict)  # pid -> its tag's value
    live: set[int] = field(default_factory=set)
    _by_tag: dict[bytes, list[int]] | None = None  # tags -> pids, built on first exact lookup

    def tree(self, pid: int | None) -> set[int]:
        """`pid` and every live descendant."""
        found: set[int] = set()
        stack = [pid] if pid is not None and pid in self.live else []
        while stack:
            p = stack.pop()
            if p not in found:
                found.add(p)
                stack.extend(self.children.get(p, ()))
        return found

    def family(self, prefix: bytes) -> set[int]:
        """Processes whose tag starts with `prefix` (b"<tag>\\0" for an exact tag), and
        everything under them."""
        exact = prefix.endswith(b"\0")
        want = prefix.rstrip(b"\0")
        found: set[int] = set()
        if exact:
            # An index, not a pass over every tag: 300 agents shutting down each look their
            # own tag up in the same snapshot, all in one turn of the event loop; a pass each
            # was 300 x 1,500 comparisons there.
            if self._by_tag is None:
                self._by_tag = {}
                for pid, tag in self.tags.items():
                    self._by_tag.setdefault(tag, []).append(pid)
            for pid in self._by_tag.get(want, ()):
                found |= self.tree(pid)
        else:
            for pid, tag in self.tags.items():
                if tag.startswith(want):
                    found |= self.tree(pid)
        found.discard(os.getpid())
        return found


def scan() -> Snapshot:
    """One pass over /proc. Synchronous: run it in a thread (`ProcTable`) or from one."""
    snap = Snapshot()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X") or pid == me:
            continue
        snap.live.add(pid)
        snap.children.setdefault(int(fields[1]), []).append(pid)
        tag = _tag_of(entry)
        if tag is not None:
            snap.tags[pid] = tag
    return snap


def _tag_of(pid: str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return None
    at = env.find(_TAG)
    if at < 0 or (at > 0 and env[at - 1] != 0):
        return None
    start = at + len(_TAG)
    end = env.find(b"\0", start)
    return env[start:] if end < 0 else env[start:end]


class ProcTable:
    """Coalesces snapshot requests: whoever asks while no scan is pending starts one (in a
    thread); whoever asks while one is running waits for the next, which they all share."""

    def __init__(self) -> None:
        self._pending: asyncio.Future[Snapshot] | None = None
        self._worker: asyncio.Task[None] | None = None
        self.scans = 0  # how many scans it took (for benches and tests)

    async def snapshot(self) -> Snapshot:
        loop = asyncio.get_running_loop()
        if self._pending is None:
            self._pending = loop.create_future()
        pending = self._pending
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run(), name="proctable-scan")
        # Shielded: one caller's cancel must not cancel the scan the others wait for.
        return await asyncio.shield(pending)

    async def _run(self) -> None:
        while self._pending is not None:
            pending, self._pending = self._pending, None
            try:
                snap = await asyncio.to_thread(scan)
            except BaseException as exc:  # noqa: BLE001 - handed to every waiter
                if not pending.done():
                    pending.set_exception(exc if isinstance(exc, Exception)
                                          else RuntimeError("the /proc scan was cancelled"))
                if not isinstance(exc, Exception):
                    raise
                continue
            self.scans += 1
            if not pending.done():
                pending.set_result(snap)


_TABLES: dict[asyncio.AbstractEventLoop, ProcTable] = {}
_SLOTS: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
# SDK clients disconnecting at once. Each disconnect is about 0.5 ms of event-loop work (its
# tasks cancelled, its pipes closed, the process waited for), spread over a few turns of the
# loop; 300 agents ending together put all of theirs in the same turns, which held the loop for
# 100-400 ms. A handful at a time keeps every turn short; the last one ends about as soon.
CLOSING_AT_ONCE = 16


def closing_slot() -> asyncio.Semaphore:
    """The running loop's bound on SDK clients disconnecting at once (`CLOSING_AT_ONCE`)."""
    loop = asyncio.get_running_loop()
    for other in [lp for lp in _SLOTS if lp.is_closed()]:
        del _SLOTS[other]
    slot = _SLOTS.get(loop)
    if slot is None:
        slot = _SLOTS[loop] = asyncio.Semaphore(CLOSING_AT_ONCE)
    return slot


def shared() -> ProcTable:
    """The running loop's table: every agent process of this loop shares its scans."""
    loop = asyncio.get_running_loop()
    for other in [lp for lp in _TABLES if lp.is_closed()]:
        del _TABLES[other]
    table = _TABLES.get(loop)
    if table is None:
        table = _TABLES[loop] = ProcTable()
    return table
