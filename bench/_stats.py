"""Summary statistics of a figure's samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median(samples: Sequence[float]) -> float:
    """The median; raises `ValueError` on no samples, since a figure needs some."""
    if not samples:
        raise ValueError("no samples to summarize")
    return statistics.median(samples)


def p95(samples: Sequence[float]) -> float:
    """The 95th percentile by nearest rank.

    Nearest rank returns a sample that was actually observed, which with 10 to
    20 runs is more honest than an interpolated value: it is the worst or the
    second worst run, and the table says how many runs there were.
    """
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def low5(samples: Sequence[float]) -> float:
    """The 5th percentile by nearest rank: the bad end of a higher-is-better figure."""
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.05 * len(ordered)) - 1)]
