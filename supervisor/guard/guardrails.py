"""Limits that stop runaway agents: fleet size, spawn depth and breadth, rate limits, memory
admission, session TTL, budgets, stall and crash-loop detection. Enforced here, not by prompts."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path

import psutil

from supervisor.clock import SYSTEM_CLOCK, Clock
from supervisor.errors import LimitExceeded

__all__ = ["LimitExceeded", "MemoryReading", "MemoryProbe", "RateLimiter", "CrashTracker",
           "day_start"]


@dataclass(frozen=True, slots=True)
class MemoryReading:
    used_bytes: int
    limit_bytes: int
    source: str

    @property
    def pct(self) -> float:
        return 100.0 * self.used_bytes / self.limit_bytes if self.limit_bytes else 0.0


class MemoryProbe:
    """cgroup v2 memory.current / memory.max when present (a container's real limit), psutil
    otherwise. `cgroup_dir` is injectable so tests can point it at a directory of fake files."""

    def __init__(self, cgroup_dir: Path | None = None) -> None:
        self.cgroup_dir = cgroup_dir if cgroup_dir is not None else self._own_cgroup()

    @staticmethod
    def _own_cgroup() -> Path | None:
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                if line.startswith("0::"):
                    path = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
                    if path.name == "supervisor" and (path.parent / "agents").is_dir():
                        path = path.parent  # our leaf (process/cpugroup.py): the limit is above
                    if (path / "memory.current").exists():
                        return path
        except OSError:
            return None
        return None

    def read(self) -> MemoryReading:
        if self.cgroup_dir is not None:
            try:
                current = int((self.cgroup_dir / "memory.current").read_text().strip())
                raw_max = (self.cgroup_dir / "memory.max").read_text().strip()
                if raw_max != "max":
                    return MemoryReading(current, int(raw_max), f"cgroup {self.cgroup_dir}")
                total = psutil.virtual_memory().total
                return MemoryReading(current, total, f"cgroup {self.cgroup_dir} (no limit)")
            except (OSError, ValueError):
                pass
        vm = psutil.virtual_memory()
        return MemoryReading(vm.total - vm.available, vm.total, "host memory")


class RateLimiter:
    """Sliding one-minute windows per key, in the clock's monotonic time."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._hits: dict[str, deque[float]] = defaultdict(deque)
        self._clock = clock

    def hit(self, key: str, per_minute: int, what: str) -> None:
        now = self._clock.monotonic()
        hits = self._hits[key]
        while hits and now - hits[0] >= 60.0:
            hits.popleft()
        if len(hits) >= per_minute:
            wait = 60.0 - (now - hits[0])
            raise LimitExceeded(f"rate limit: at most {per_minute} {what} per minute.",
                                f"Try again in {wait:.0f}s.")
        hits.append(now)


class CrashTracker:
    """Remembers recent crashes per agent, so a crashing CLI is not restarted in a loop."""

    def __init__(self, max_crashes: int, window_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.max_crashes = max_crashes
        self.window_s = window_s
        self._clock = clock
        self._crashes: dict[str, deque[float]] = defaultdict(deque)

    def record(self, agent_id: str, now: float | None = None) -> None:
        self._crashes[agent_id].append(self._clock.now() if now is None else now)

    def in_loop(self, agent_id: str, now: float | None = None) -> float | None:
        """Seconds until a restart is allowed again, or None if it is allowed now."""
        now = self._clock.now() if now is None else now
        crashes = self._crashes[agent_id]
        window = self.window_s
        while crashes and now - crashes[0] > window:
            crashes.popleft()
        if len(crashes) >= self.max_crashes:
            return window - (now - crashes[0])
        return None

    def clear(self, agent_id: str) -> None:
        self._crashes.pop(agent_id, None)


def day_start(now: float | None = None, clock: Clock = SYSTEM_CLOCK) -> float:
    """Start of the UTC day `now` falls in (the clock's now if not given): budgets are per
    day, and a raised budget is keyed by this day's start."""
    now = clock.now() if now is None else now
    return now - (now % 86400)
