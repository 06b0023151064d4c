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
