"""supervisor/heap.py: what exists at start-up is frozen out of later collections."""

from __future__ import annotations

import gc

from supervisor import heap


def test_settle_freezes_the_start_up_heap_and_grows_the_young_generation() -> None:
    before = gc.get_threshold()
    try:
        startup: list[list[int]] = [[]]  # a container the collector tracks
        assert any(o is startup for o in gc.get_objects())  # walked by every full collection
        frozen = heap.settle()
        assert frozen > 0 and gc.get_freeze_count() == frozen
        assert gc.get_threshold()[0] == heap.YOUNG
        assert not any(o is startup for o in gc.get_objects())  # frozen: no longer walked
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
