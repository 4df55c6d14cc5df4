"""settle_heap (hatp_mcp/runtime/gc_tuning.py): what is alive when a server is set up is frozen, the youngest
generation's threshold is raised, and garbage made afterwards, cycles included, is still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from hatp_mcp.runtime.gc_tuning import YOUNG_THRESHOLD, settle_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_settle_heap_freezes_what_is_alive_and_raises_only_the_youngest_threshold(restored_gc: None) -> None:
    kept = [_Node() for _ in range(10)]
    _, middle, oldest = gc.get_threshold()
    settle_heap()
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, oldest)


def test_a_cycle_made_after_settling_is_still_collected(restored_gc: None) -> None:
    settle_heap()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # a cycle: reference counting alone does not free it
    gc.collect()
    assert gone() is None
