"""Aggregation as the published benchmark does it, with bootstrap intervals.

Run score = max over iterations; task score = mean over runs; overall = unweighted mean over
tasks. Uncertainty: resample runs with replacement within each task, recompute the statistic;
the 95% interval is the 2.5th-97.5th percentile of the resampled values and the standard error
their standard deviation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float
    se: float
    n: int


def bootstrap_overall(
    scores_by_task: Mapping[str, Sequence[float]], *, resamples: int = 10_000, seed: int = 0
) -> Estimate:
    """Mean over tasks of the mean run score, with a bootstrap over runs within each task."""
    tasks = [np.asarray(v, dtype=np.float64) for v in scores_by_task.values() if len(v)]
    if not tasks:
        raise ValueError("no scores to aggregate")
    rng = np.random.default_rng(seed)
    means = np.empty((len(tasks), resamples))
    for row, scores in enumerate(tasks):
        picks = rng.integers(0, scores.size, size=(resamples, scores.size))
        means[row] = scores[picks].mean(axis=1)
    overall = means.mean(axis=0)
    point = float(np.mean([scores.mean() for scores in tasks]))
    low, high = np.percentile(overall, [2.5, 97.5])
    return Estimate(point, float(low), float(high), float(overall.std(ddof=1)), sum(t.size for t in tasks))


def bootstrap_mean(scores: Sequence[float], *, resamples: int = 10_000, seed: int = 0) -> Estimate:
    """Mean of one task's run scores with its bootstrap interval."""
    return bootstrap_overall({"task": scores}, resamples=resamples, seed=seed)


def median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None
