"""A supervisor's shutdown of every agent at once, in slices (issue 32): 300 agents' SIGTERMs
and wake-ups in one pass held the event loop 20-100 ms, and their loops' cancellations as
much again; a turn of the loop every `SLICE` agents keeps chat, the console and the HTTP
listener answering meanwhile."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from supervisor.agents.runner import AgentRunner
from supervisor.heap import no_cyclic_gc

logger = logging.getLogger(__name__)

SLICE = 32  # agents a shutdown signals, or whose loops it cancels, per turn of the event loop
LOOPS_STOP_S = 10.0  # bound on the loops' ending: one that ignores its cancel must not hang it


async def end_all(runners: Sequence[AgentRunner], loops: Sequence[asyncio.Task[None]]) -> None:
    """Every SIGTERM first, in one pass, then the waits (the agents die side by side); then
    the agents' loops cancelled, each slice waited for (each unwinds a turn's worth of state
    at once), all of it bounded. No cyclic GC meanwhile (`no_cyclic_gc`)."""
    with no_cyclic_gc():
        for i, r in enumerate(runners, 1):
            r.begin_shutdown()
            if i % SLICE == 0:
                await asyncio.sleep(0)
        await asyncio.gather(*(r.close_for_shutdown() for r in runners),
                             return_exceptions=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOOPS_STOP_S
        for i in range(0, len(loops), SLICE):
            for task in loops[i:i + SLICE]:
                task.cancel()
            _, stuck = await asyncio.wait(loops[i:i + SLICE],
                                          timeout=max(0.0, deadline - loop.time()))
            for task in stuck:
                logger.error("agent loop did not stop task=%s", task.get_name())
