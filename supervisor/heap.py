"""The supervisor's garbage collector, settled once its start-up is done.

Nearly everything alive when the supervisor has started (its modules, classes, functions,
settings: over 100,000 objects the collector tracks) lives until the process exits. CPython's
full collections walk every tracked object, so under a message storm each one paused the event
loop for about 60 ms (bench/bus_throughput.py, see docs/benchmarks.md). `settle()` collects once
and moves what is left into the permanent generation (`gc.freeze`): later collections walk only
what was made since. Objects made before it are still freed by reference counting when they are
dropped; only a reference cycle among them would no longer be collected, and the collection just
before the freeze has already freed the cycles start-up left behind.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect, then freeze what survived. Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


__all__ = ["settle"]
