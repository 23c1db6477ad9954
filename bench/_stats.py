"""Summary statistics of a figure's samples."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence


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


def bootstrap_interval(
    statistic: Callable[[Sequence[float], Sequence[float]], float],
    samples: Sequence[float],
    baseline: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """A percentile bootstrap interval of `statistic(samples, baseline)`.

    1a and 2c are a difference and a ratio of two medians, each of 60 or 20
    CLI runs whose start varies by tens of ms: the same code gives figures
    several ms apart from run to run. The interval says how far this run's
    figure could be from the one a longer run would find, so a target just
    met or just missed reads as what it is. Seeded: the same samples give the
    same interval.
    """
    if not samples or not baseline:
        raise ValueError("no samples to summarize")
    rng = random.Random(0)
    estimates = sorted(
        statistic(
            rng.choices(samples, k=len(samples)), rng.choices(baseline, k=len(baseline))
        )
        for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    return (
        estimates[int(tail * resamples)],
        estimates[min(resamples - 1, int((1 - tail) * resamples))],
    )
