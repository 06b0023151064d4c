"""`/status`, `/cost` and the budget check on a database a long-lived fleet leaves behind.

Run from the repository root:  .venv/bin/python bench/status_cost.py [--events N]

The database (made in seconds with executemany, bench/_fill.py): 300 agents, 1M events, 100k
turns and their costs, 100k finished-turn notices delivered. The commands go through the real
dispatcher, API and store (an audit row each), with the pool not started (no agent processes;
the pool's runners are not what is measured). Median of `--runs` runs after one warm-up.
Goal: each under 20 ms. Baseline: the reads these commands made before the aggregates (a scan
of turns grouped by agent; of costs grouped by model; the budget's SUM over today's turns), on
the same database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import quiet_logging, scratch_dir  # noqa: E402
from bench._figures import Figure, table  # noqa: E402
from bench._fill import fill  # noqa: E402
from commands.base import Caller, Context, Role  # noqa: E402
from commands.dispatcher import Dispatcher  # noqa: E402
from store import open_store  # noqa: E402
from supervisor.api import SupervisorAPI  # noqa: E402
from supervisor.config import Settings  # noqa: E402
from supervisor.core import Core  # noqa: E402
from supervisor.events import EventHub  # noqa: E402
from supervisor.guard.guardrails import day_start  # noqa: E402

GOAL_MS = 20.0
ADMIN = Caller("bench:admin", "bench", Role.ADMIN, "bench")
OLD_STATUS = ("SELECT agent_id AS key, SUM(cost_usd) AS c, SUM(input_tokens) AS i,"
              " SUM(output_tokens) AS o, COUNT(*) AS n FROM turns GROUP BY agent_id")
OLD_BY_MODEL = ("SELECT model AS key, SUM(cost_usd) AS c, SUM(input_tokens) AS i,"
                " SUM(output_tokens) AS o, COUNT(DISTINCT turn_id) AS n FROM costs"
                " GROUP BY model ORDER BY c DESC")
OLD_BUDGET = "SELECT SUM(cost_usd) AS c FROM turns WHERE started_at >= ?"


async def median_ms(fn: Callable[[], Awaitable[Any]], runs: int) -> float:
    await fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    quiet_logging()
    print(f"/status and /cost, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"{args.events:,} events, {args.turns:,} turns", flush=True)
    with scratch_dir("sbs") as home:
        settings = Settings(home=home)
        settings.db_path.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        fill(settings.db_path, events=args.events, turns=args.turns, notices=args.turns,
             frontends=("console",))
        size = settings.db_path.stat().st_size
        print(f"  filled in {time.perf_counter() - t:.1f}s: {size / 1e6:,.0f} MB", flush=True)
        store = await open_store(settings.db_path)
        try:
            api = SupervisorAPI.over(Core(settings, store, EventHub()))
            dispatcher = Dispatcher()

            async def command(line: str) -> None:
                reply = await dispatcher.dispatch(Context(api, ADMIN), line)
                assert reply.ok, reply.plain()

            today = day_start()
            status = await median_ms(lambda: command("/status"), args.runs)
            cost = await median_ms(lambda: command("/cost"), args.runs)
            budget = await median_ms(lambda: store.turns.spent_since(today, None), args.runs)
            old_status = await median_ms(lambda: store.db.fetchall(OLD_STATUS), args.runs)

            async def old_cost() -> None:
                await store.db.fetchall(OLD_STATUS)
                await store.db.fetchall(OLD_BY_MODEL)

            old_cost_ms = await median_ms(old_cost, args.runs)
            old_budget = await median_ms(lambda: store.db.fetchall(OLD_BUDGET, (today,)),
                                         args.runs)
        finally:
            await store.db.close()
    at = f"at {args.events / 1e6:g}M events"
    figures = [
        Figure(f"/status {at}", f"< {GOAL_MS:.0f} ms", status, old_status, "ms",
               status < GOAL_MS),
        Figure(f"/cost {at}", f"< {GOAL_MS:.0f} ms", cost, old_cost_ms, "ms",
               cost < GOAL_MS),
        Figure("budget check (spend today, all agents)", f"< {GOAL_MS:.0f} ms", budget,
               old_budget, "ms", budget < GOAL_MS),
    ]
    print("  (baseline: the reads these made before the aggregates, on the same database)\n")
    print(table(figures))
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
