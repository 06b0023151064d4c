"""Helpers shared by the benchmarks: percentiles, polling, quiet logging, scratch dirs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (the 'inclusive' method), q in [0, 100]."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


async def wait_until(pred: Callable[[], bool], timeout: float, what: str, *,
                     interval: float) -> None:
    """Poll ``pred`` every ``interval`` seconds; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


async def loop_lateness(window_s: float, every_s: float = 0.010) -> list[float]:
    """For `window_s` seconds, sleep `every_s` at a time on the running loop; each sleep's
    overshoot in ms (how late the loop ran the timer: what blocked it)."""
    lateness = []
    end = time.monotonic() + window_s
    while time.monotonic() < end:
        t = time.monotonic()
        await asyncio.sleep(every_s)
        lateness.append((time.monotonic() - t - every_s) * 1000)
    return lateness


async def spawn_idle(pool: Any, n: int, prompt: str, timeout_s: float) -> list[Any]:
    """Spawn agents a000..a<n-1> with `prompt` in `pool` and wait until every one is idle;
    an agent that failed or was killed, or `timeout_s` passing, ends the bench."""
    runners = [await pool.spawn(f"a{i:03d}", prompt) for i in range(n)]
    deadline = time.monotonic() + timeout_s
    while not all(r.state == "idle" for r in runners):
        bad = [r for r in runners if r.state in ("failed", "killed")]
        if bad:
            raise RuntimeError(f"{bad[0].name} is {bad[0].state}: {bad[0].last_error}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{n} agents not idle after {timeout_s:g}s")
        await asyncio.sleep(0.1)
    return runners


def quiet_logging() -> None:
    """Errors only; and none from the SDK's reader, which logs every SIGTERM-ended CLI."""
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("claude_agent_sdk").setLevel(logging.CRITICAL)


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory directly under /tmp, removed on exit.

    Short on purpose: the CLI puts a unix socket under it (~107-byte path limit).
    """
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# -- the suite's result protocol (bench/run.py collects these) ------------------------------------

RESULT_PREFIX = "BENCH-RESULT "


def smoke() -> bool:
    """True under `make bench-smoke`: small sizes, one repetition, no timing verdicts."""
    return os.environ.get("BENCH_SMOKE") == "1"


def result(figure: str, measured: float, unit: str, *, goal: str = "",
           baseline: float | None = None, ratio: float | None = None,
           passed: bool | None = None, note: str = "") -> None:
    """Print one machine-readable row on stdout: `BENCH-RESULT {json}`. `goal` is the goal as
    text ("< 50 ms", "<= 2x"); `passed` is None for a figure without a goal. The runner shows
    every row and fails the suite when a row with a goal did not pass."""
    row = {"figure": figure, "measured": round(measured, 3), "unit": unit, "goal": goal,
           "baseline": None if baseline is None else round(baseline, 3),
           "ratio": None if ratio is None else round(ratio, 3), "pass": passed, "note": note}
    print(RESULT_PREFIX + json.dumps(row), flush=True)
