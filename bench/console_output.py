"""The console's output against a slow terminal: the event loop must not wait for it.

Run from the repository root:  .venv/bin/python bench/console_output.py
(or `make bench ONLY=console_output`; BENCH_SMOKE=1 for a small answer)

A 200,000-character answer (1,000,000 at full size) is printed to a pipe whose reader takes
64 KiB every 20 ms (about 3 MB/s, a slow remote terminal), while a probe on the event loop
sleeps 10 ms at a time. Measured: the loop's worst lateness while the answer is written, with
the console's output (bot/console/output.py: queued, written by a thread) against the
baseline in the same run, the console before issue 25 (a blocking write on the loop). Goal:
the worst lateness under 50 ms, whatever the terminal's speed. Also: the time until the last
byte reached the reader, both ways (the output falls behind the terminal, not further).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import result, smoke  # noqa: E402
from bot.console.output import Printer  # noqa: E402
from bot.console.render import Line  # noqa: E402

SUITE = {"timeout_s": 120}
CHARS = 200_000 if smoke() else 1_000_000
READ_CHUNK = 1 << 16
READ_EVERY_S = 0.020
PROBE_S = 0.010
GOAL_MS = 50.0


def slow_reader(fd: int, got: list[int], done: threading.Event) -> None:
    """A terminal that takes READ_CHUNK bytes every READ_EVERY_S, until EOF."""
    while chunk := os.read(fd, READ_CHUNK):
        got[0] += len(chunk)
        time.sleep(READ_EVERY_S)
    done.set()


async def probe(stop: asyncio.Event) -> float:
    worst = 0.0
    while not stop.is_set():
        t = time.monotonic()
        await asyncio.sleep(PROBE_S)
        worst = max(worst, (time.monotonic() - t - PROBE_S) * 1000)
    return worst


async def run(write: Callable[[object, str], Awaitable[None]], text: str) -> tuple[float, float]:
    """The loop's worst lateness (ms) and the time until the reader had every byte (s)."""
    r, w = os.pipe()
    stdout = os.fdopen(w, "w", encoding="utf-8")
    got, done = [0], threading.Event()
    threading.Thread(target=slow_reader, args=(r, got, done), daemon=True).start()
    stop = asyncio.Event()
    lag = asyncio.create_task(probe(stop))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await write(stdout, text)
    stdout.close()
    await asyncio.to_thread(done.wait, 120)
    elapsed = time.monotonic() - started
    stop.set()
    worst = await lag
    os.close(r)
    assert got[0] == len(text.encode()) + 1, f"lost output: {got[0]} of {len(text) + 1} bytes"
    return worst, elapsed


async def on_the_loop(stdout: object, text: str) -> None:
    """The console before issue 25: `write` and `flush` on the loop's thread."""
    stdout.write(text + "\n")  # type: ignore[attr-defined]
    stdout.flush()  # type: ignore[attr-defined]


async def queued(stdout: object, text: str) -> None:
    """The console now: put on the printer's queue; the writer thread does the rest."""
    printer = Printer(lambda line, at: line.text, stdout)  # type: ignore[arg-type]
    task = asyncio.create_task(printer.run())
    printer.put(Line(text))
    await printer.drain(120)
    task.cancel()


async def main() -> int:
    text = "".join(f"L{i:06d} {'.' * 91}\n" for i in range(CHARS // 100))[:CHARS - 1]
    print(f"console output: {CHARS:,} characters to a terminal taking {READ_CHUNK // 1024} KiB "
          f"every {READ_EVERY_S * 1000:g} ms", flush=True)
    base_lag, base_s = await run(on_the_loop, text)
    new_lag, new_s = await run(queued, text)
    print(f"  before (write on the loop): worst loop lateness {base_lag:.1f} ms, "
          f"all written in {base_s:.2f} s")
    print(f"  now (queued, a writer thread): worst loop lateness {new_lag:.1f} ms, "
          f"all written in {new_s:.2f} s")
    result(f"loop lateness while {CHARS:,} characters go to a slow terminal",
           new_lag, "ms", goal=f"< {GOAL_MS:g} ms", baseline=base_lag,
           ratio=new_lag / base_lag if base_lag else None,
           passed=None if smoke() else new_lag < GOAL_MS)
    result("  same: until the terminal had it all", new_s, "s", baseline=base_s,
           ratio=new_s / base_s if base_s else None)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
