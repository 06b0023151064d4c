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


def test_holds_on_the_collector_overlap_and_it_comes_back_with_the_last() -> None:
    """A kill's bookkeeping during a shutdown: two holds, released out of order. The collector
    stays off until the last is released, then is on again; a release called twice counts
    once."""
    assert gc.isenabled()
    first = heap.hold_cyclic_gc()
    second = heap.hold_cyclic_gc()
    try:
        assert not gc.isenabled()
        first()
        first()  # once only
        assert not gc.isenabled()
        with heap.no_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        second()
    assert gc.isenabled()


def test_a_hold_leaves_a_collector_that_was_off_off() -> None:
    gc.disable()
    try:
        with heap.no_cyclic_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
