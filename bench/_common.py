"""Helpers shared by the benchmarks: percentiles, polling, quiet logging, scratch dirs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
