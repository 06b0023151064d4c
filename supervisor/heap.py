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

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator

YOUNG = 10_000  # allocations between collections of the youngest generation


def settle() -> int:
    """Collect, freeze what survived, and let the youngest generation grow to YOUNG. Returns
    how many objects were frozen."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG, older, oldest)
    return gc.get_freeze_count()


_gc_lock = threading.Lock()
_gc_holds = 0  # holders of `hold_cyclic_gc` not yet released
_gc_was_enabled = True


def hold_cyclic_gc() -> Callable[[], None]:
    """No cyclic garbage collection until the returned release is called (once; later calls do
    nothing). Holds overlap (a kill's bookkeeping during a shutdown, from any thread): the
    collector is back on, as it was before the first, when the last is released. For many
    agents ended at once (a shutdown, the kill switch): ending 300 agents makes enough
    short-lived objects to set off a full collection of the whole heap, which walks every
    object the fleet holds (about 370 an agent, 110,000 at 300 agents, 73 ms; 270 ms with
    start-up's objects not frozen), all of it on the event loop. Reference counting still frees
    nearly everything meanwhile; the collection after it walks what is left, the fleet gone."""
    global _gc_holds, _gc_was_enabled
    with _gc_lock:
        if _gc_holds == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holds += 1
    released = False

    def release() -> None:
        global _gc_holds
        nonlocal released
        with _gc_lock:
            if released:
                return
            released = True
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_was_enabled:
                gc.enable()

    return release


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """`hold_cyclic_gc` for a block."""
    release = hold_cyclic_gc()
    try:
        yield
    finally:
        release()


__all__ = ["hold_cyclic_gc", "no_cyclic_gc", "settle"]
