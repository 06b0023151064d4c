"""The supervisor's garbage collector, settled once its start-up is done.

Nearly everything alive when the supervisor has started (its modules, classes, functions,
settings: over 100,000 objects the collector tracks) lives until the process exits. CPython's
full collections walk every tracked object, so under a message storm each one paused the event
loop for about 60 ms (bench/bus_throughput.py, see docs/benchmarks.md). `settle()` collects once
and moves what is left into the permanent generation (`gc.freeze`): later collections walk only
what was made since. Objects made before it are still freed by reference counting when they are
dropped; only a reference cycle among them would no longer be collected, and the collection just
before the freeze has already freed the cycles start-up left behind.

It also lets the youngest generation grow to `YOUNG` objects before it is collected (CPython's
default is 700). Under a storm hundreds of messages are in flight at any moment (their futures,
rows and replies); a young collection every 700 allocations found them alive each time and
promoted them, to be walked again by the older generations: about 2 µs a message of the bus's
30 (bench/bus_throughput.py). Garbage that is not a cycle is freed when dropped, as before;
a cycle is freed at most 10,000 allocations later instead of 700.
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # allocations between collections of the youngest generation


def settle() -> int:
    """Collect, freeze what survived, and let the youngest generation grow to YOUNG. Returns
    how many objects were frozen."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG, older, oldest)
    return gc.get_freeze_count()


__all__ = ["settle"]
