"""The garbage collector set for a long-running server, once it is set up: `settle_heap()`.

A server's heap is mostly what it built at startup (modules, pydantic schemas, keys, stores: tens of thousands of
objects) and never frees. Python's cyclic collector walks all of it at every full collection, and each
transaction's short-lived objects, promoted at the default thresholds (700, 10, 10), bring one on every few
hundred transactions. `settle_heap` collects once, then freezes what is alive (gc.freeze: moved to the permanent
generation, never walked again, never freed, which what is alive after startup would not be anyway), and lets the
youngest generation grow to YOUNG_THRESHOLD objects before a collection, so fewer short-lived objects live long
enough to be walked or promoted. Garbage is still collected, cycles included; reference counting frees the rest at
once as before. Called by hatp_mcp.mcp.serve.serve, which every server ends in, before it takes its first request.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_heap"]

YOUNG_THRESHOLD = 10_000  # allocations minus frees before the youngest generation is collected (default 700)


def settle_heap() -> None:
    """Collect, freeze what is alive now, and raise the youngest generation's threshold (the older two stay)."""
    gc.collect()
    gc.freeze()
    young, middle, oldest = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, oldest)
