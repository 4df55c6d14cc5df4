"""Interleaved timing: run A and B in alternating rounds and report the median per-call time and ratio."""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable

__all__ = ["per_call", "versus"]


def per_call(fn: Callable[[], object], number: int) -> float:
    return timeit.timeit(fn, number=number) / number


def versus(
    a: Callable[[], object], b: Callable[[], object], number: int = 2000, rounds: int = 7
) -> tuple[float, float, float]:
    """Median seconds per call of a and b, and the median of the per-round ratios b/a (a's speed-up over b)."""
    a_times, b_times, ratios = [], [], []
    per_call(a, number // 10 or 1)
    per_call(b, number // 10 or 1)
    for _ in range(rounds):
        ta = per_call(a, number)
        tb = per_call(b, number)
        a_times.append(ta)
        b_times.append(tb)
        ratios.append(tb / ta)
    return statistics.median(a_times), statistics.median(b_times), statistics.median(ratios)
