"""The agents' CPU as one group below the supervisor: a cgroup the launcher puts each agent's
sandbox in (before bwrap, so everything in it inherits the group), or the autogroup arrangement
where the host allows no cgroup (docs/benchmarks.md, "Agent priority").

In order, where `agent_cpu_group` is auto: (1) cgroup v2 with our own cgroup delegated (the cpu
controller offered to it and its files ours to write): every process of our cgroup moves to a
leaf `supervisor/` (a cgroup with children may hold no process), agents go to `agents/`; (2) a
cgroup v1 cpu hierarchy we may write (root on a hybrid host): a group `switchboard-<data dir
id>` in ours with the same two leaves, weighing against the rest of the host what the
supervisor and a full fleet weighed there as autogroups; (3) otherwise each agent's session is
niced as before. The agents' group weighs as one process `agent_nice` levels below the
supervisor's, however many agents and processes it holds, and a process in a cgroup other than
the root one has no autogroup: an agent's `setsid` no longer earns it a share of its own.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from supervisor.errors import ConfigError

logger = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
# The kernel's weight of a task at nice 0..19 (kernel/sched/core.c sched_prio_to_weight).
NICE_WEIGHT = (1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
               110, 87, 70, 56, 45, 36, 29, 23, 18, 15)
V2_DEFAULT_WEIGHT = 100  # cgroup v2's cpu.weight of a group at nice 0 (the supervisor's leaf)
V1_MAX_SHARES = 262144
EBUSY_WAIT_S = 2.0  # a killed process leaves its cgroup as it finishes exiting: not at once
# An empty group younger than this is not taken for a dead supervisor's: one being made has no
# process in it yet, and a process running two Switchboards (tests) is in only one leaf.
STALE_AFTER_S = 600.0
FIX = ("to use a cgroup, run the supervisor as root on a host with a writable cgroup v1 cpu "
       "hierarchy, or give it a delegated cgroup v2 subtree (Docker: --cgroupns=private and a "
       "writable /sys/fs/cgroup; systemd: Delegate=cpu in its unit)")


class Kind(StrEnum):
    CGROUP2 = "cgroup v2"
    CGROUP1 = "cgroup v1"
    AUTOGROUP = "autogroup"


@dataclass(frozen=True, slots=True)
class Arrangement:
    """What holds the agents' CPU. `procs`: the cgroup.procs file the launcher joins (None:
    autogroups); `weight`: the agents group's cpu.weight (v2) or cpu.shares (v1), `whole`:
    v1, the shares of Switchboard's group against the rest of the host; `why`: why this one
    and not a better one; `made`: groups to remove at release, deepest first; `home`: the
    cgroup our processes came from, where they go back."""

    kind: Kind
    why: str
    procs: Path | None = None
    weight: int = 0
    made: tuple[Path, ...] = field(default=())
    home: Path | None = None
    whole: int = 0

    def describe(self) -> str:
        if self.procs is None:
            return f"autogroup (each agent's session niced): {self.why}"
        unit = "cpu.weight" if self.kind == Kind.CGROUP2 else "cpu.shares"
        whole = f", Switchboard's group {self.whole}" if self.whole else ""
        return (f"{self.kind}: agents in {self.procs.parent} ({unit} {self.weight}, the "
                f"supervisor's leaf {_read(self.procs.parent.parent / 'supervisor' / unit)}"
                f"{whole}); {self.why}")

    def release(self) -> None:
        """Remove the groups we made, once empty (a group that still holds a process stays:
        the next start with this data directory reuses it); our processes go back to the
        cgroup they came from (v2: the cpu controller given back first)."""
        for group in self.made:
            if group.name == "supervisor" and self.home is not None:
                if self.kind == Kind.CGROUP2:
                    with contextlib.suppress(OSError):
                        (self.home / "cgroup.subtree_control").write_text("-cpu")
                try:
                    _move_all(group, self.home)
                except OSError as exc:
                    logger.warning("cpu group: cannot move back path=%s error=%s", group, exc)
            _rmdir(group)


def _rmdir(group: Path) -> None:
    deadline = time.monotonic() + EBUSY_WAIT_S
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                logger.warning("cpu group not removed path=%s error=%s", group, exc)
                return
            time.sleep(0.02)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "?"


def weight_v1(agent_nice: int) -> int:
    """cpu.shares of a group that weighs as one task `agent_nice` levels below nice 0."""
    return NICE_WEIGHT[max(0, min(19, agent_nice))]


def weight_v2(agent_nice: int) -> int:
    return max(1, round(V2_DEFAULT_WEIGHT * weight_v1(agent_nice) / NICE_WEIGHT[0]))


def _own_paths(self_cgroup: Path) -> tuple[str | None, str | None]:
    """Our cgroup path in the unified (v2) hierarchy and in v1's cpu hierarchy, as
    /proc/self/cgroup names them (None where we are in none)."""
    v2 = v1 = None
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "" and line.startswith("0::"):
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _within(mount: Path, path: str) -> Path:
    """Our cgroup's directory under `mount`; the mount itself where our path is not under it
    (a container that sees its own cgroup as the hierarchy's root)."""
    own = mount / path.lstrip("/")
    return own if own.is_dir() else mount


def _v2_group(root: Path, self_cgroup: Path) -> tuple[Path | None, str]:
    """Our delegated v2 cgroup, or None and why not."""
    unified = next((m for m in (root, root / "unified") if (m / "cgroup.controllers").exists()),
                   None)
    path, _ = _own_paths(self_cgroup)
    if unified is None or path is None:
        return None, "no cgroup v2 hierarchy here"
    own = _within(unified, path)
    if own.name == "supervisor" and (own.parent / "agents").is_dir():
        own = own.parent  # arranged before, by this process (a second supervisor in it)
    try:
        offered = (own / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return None, f"cgroup v2: cannot read {own}/cgroup.controllers ({exc.strerror})"
    if "cpu" not in offered:
        return None, f"cgroup v2: the cpu controller is not offered to our cgroup {path}"
    needed = (own, own / "cgroup.subtree_control", own / "cgroup.procs")
    if not all(os.access(p, os.W_OK) for p in needed):
        return None, f"cgroup v2: our cgroup {path} is not delegated to us (not writable)"
    return own, ""


def _v1_group(root: Path, self_cgroup: Path) -> tuple[Path | None, str]:
    """The directory our v1 cpu group goes in, or None and why not."""
    mount = next((m for m in (root / "cpu", root / "cpu,cpuacct")
                  if (m / "cpu.shares").exists()), None)
    _, path = _own_paths(self_cgroup)
    if mount is None or path is None:
        return None, "no cgroup v1 cpu hierarchy here"
    own = _within(mount, path)
    if own.name == "supervisor" and own.parent.name.startswith("switchboard-"):
        own = own.parent.parent  # arranged before, by this process (a second supervisor in it)
    if not os.access(own, os.W_OK):
        return None, f"cgroup v1: the cpu hierarchy at {own} is not writable"
    return own, ""


def plan(mode: str, *, root: Path = CGROUP_ROOT,
         self_cgroup: Path = SELF_CGROUP) -> tuple[Kind, Path | None, str]:
    """What `arrange` would use, changing nothing (for `switchboard doctor`): the kind, the
    directory the groups go in (None: autogroups) and why."""
    if mode == "autogroup":
        return Kind.AUTOGROUP, None, "agent_cpu_group = autogroup"
    why_not: list[str] = []
    for kind, find in ((Kind.CGROUP2, _v2_group), (Kind.CGROUP1, _v1_group)):
        where, why = find(root, self_cgroup)
        if where is not None:
            return kind, where, "; ".join([f"agent_cpu_group = {mode}", *why_not])
        why_not.append(why)
    return Kind.AUTOGROUP, None, "; ".join(why_not)


def doctor_text(mode: str, agent_nice: int, *, root: Path = CGROUP_ROOT,
                self_cgroup: Path = SELF_CGROUP) -> tuple[bool, str]:
    """`switchboard doctor`'s line: which arrangement a start would use, and why (False: the
    setting asks for a cgroup and none can be made)."""
    kind, where, why = plan(mode, root=root, self_cgroup=self_cgroup)
    if where is not None:
        return True, (f"agents' CPU: one {kind} group in {where}, weighing as one process "
                      f"{agent_nice} nice level(s) below the supervisor ({why})")
    text = (f"agents' CPU: autogroup arrangement, each agent's session {agent_nice} nice "
            f"level(s) below the supervisor; a session an agent starts itself escapes it "
            f"({why})")
    if mode == "autogroup":
        return True, text
    return mode != "cgroup", f"{text}; {FIX}"


def arrange(mode: str, agent_nice: int, instance: str, fleet: int, *,
            root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> Arrangement:
    """Make the agents' group (or reuse one a crashed run left); fall back to autogroups where
    no cgroup can be made, or raise ConfigError where `mode` is cgroup and none can."""
    why_not: list[str] = []
    if mode != "autogroup":
        for find, make in ((_v2_group, _make_v2), (_v1_group, _make_v1)):
            where, why = find(root, self_cgroup)
            if where is None:
                why_not.append(why)
                continue
            try:
                made = make(where, agent_nice, instance, fleet)
            except OSError as exc:
                why_not.append(f"{where}: {exc.strerror or exc}")
                continue
            return replace(made, why="; ".join([f"agent_cpu_group = {mode}", *why_not]))
    if mode == "cgroup":
        raise ConfigError(f"agent_cpu_group = cgroup, but no cgroup can hold the agents here: "
                          f"{'; '.join(why_not)}. Either {FIX}, or set agent_cpu_group = auto")
    why = "; ".join(why_not) if why_not else "agent_cpu_group = autogroup"
    return Arrangement(Kind.AUTOGROUP, why)


def _make_v2(own: Path, agent_nice: int, _instance: str, _fleet: int) -> Arrangement:
    made = []
    for name in ("agents", "supervisor"):
        with contextlib.suppress(FileExistsError):
            (own / name).mkdir()
            made.append(own / name)
    try:
        _move_all(own, own / "supervisor")  # no process may stay beside the children
        (own / "cgroup.subtree_control").write_text("+cpu")
        weight = weight_v2(agent_nice)
        (own / "agents" / "cpu.weight").write_text(str(weight))
    except OSError:
        Arrangement(Kind.CGROUP2, "", made=tuple(made), home=own).release()
        raise
    return Arrangement(Kind.CGROUP2, "", own / "agents" / "cgroup.procs", weight,
                       (own / "agents", own / "supervisor"), own)


def _make_v1(own: Path, agent_nice: int, instance: str, fleet: int) -> Arrangement:
    """Switchboard's group in ours, weighing against the rest of the host as the supervisor and
    `fleet` agents did as autogroups (so a shared host's other work does not starve the fleet
    more than before), with the supervisor's leaf and the agents' in it. v1 lets a group hold
    processes beside children: only the supervisor moves."""
    base = own / f"switchboard-{instance}"
    _clean_stale(own, base)
    made = []
    for group in (base, base / "supervisor", base / "agents"):
        with contextlib.suppress(FileExistsError):
            group.mkdir()
            made.append(group)
    weight = weight_v1(agent_nice)
    whole = min(V1_MAX_SHARES, NICE_WEIGHT[0] + fleet * weight)
    arranged = Arrangement(Kind.CGROUP1, "", base / "agents" / "cgroup.procs", weight,
                           (base / "agents", base / "supervisor", base), own, whole)
    try:
        (base / "cpu.shares").write_text(str(whole))
        (base / "supervisor" / "cpu.shares").write_text(str(NICE_WEIGHT[0]))
        (base / "agents" / "cpu.shares").write_text(str(weight))
        (base / "supervisor" / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        Arrangement(Kind.CGROUP1, "", made=tuple(reversed(made)), home=own).release()
        raise
    return arranged


def _clean_stale(own: Path, keep: Path) -> None:
    """Remove the groups of supervisors that are gone (killed, crashed: nothing removed them):
    a live one is always in its own `supervisor/` leaf, so a group with no process in it or its
    leaves, made more than STALE_AFTER_S ago, has none. Groups still holding processes stay."""
    for base in own.glob("switchboard-*"):
        leaves = (base / "agents", base / "supervisor")
        if base == keep or any(_read(g / "cgroup.procs") for g in (*leaves, base)):
            continue
        try:
            if time.time() - base.stat().st_mtime < STALE_AFTER_S:
                continue
        except OSError:
            continue
        for group in (*leaves, base):
            try:
                group.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                break  # taken meanwhile, or not ours to remove
        else:
            logger.info("cpu group of a supervisor that is gone removed path=%s", base)


def _move_all(source: Path, target: Path) -> None:
    """Every process of cgroup `source` into `target` (one that ends meanwhile is skipped)."""
    try:
        pids = (source / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        return
    for pid in pids:
        try:
            (target / "cgroup.procs").write_text(pid)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise


def member_of(pid: int, procs: Path) -> bool:
    """Whether `pid` is in the group whose cgroup.procs file is `procs`."""
    try:
        return str(pid) in procs.read_text().split()
    except OSError:
        return False
