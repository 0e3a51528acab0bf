"""Aggregation as the published benchmark does it, with bootstrap intervals.

Run score = max over iterations; task score = mean over runs; overall = unweighted mean over
tasks. Uncertainty: resample runs with replacement within each task (a stratified bootstrap:
every task keeps its number of runs), recompute the statistic; the 95% interval is the
2.5th-97.5th percentile of the resampled values (scipy's ``method="percentile"``) and the
standard error their standard deviation (``ddof=1``, as scipy reports it).

All tasks are resampled in one draw: the per-run values are padded into a (task, run) array,
each resample becomes a vector of counts per run, and a batched matrix product gives every
task's resampled mean at once. Per-run values may be vectors (best-so-far accuracy after each
iteration), so the progression curve shares the resamples of the overall score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval and standard error, over ``n`` runs."""

    mean: float
    low: float
    high: float
    se: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "ci_low": self.low, "ci_high": self.high, "se": self.se, "n": self.n}


@dataclass(frozen=True)
class Bootstrap:
    """Every task's mean on the data and on each resample, for each column of the run values.

    ``point`` is (tasks, columns); ``resampled`` is (tasks, resamples, columns); ``runs`` the
    number of runs per task.
    """

    tasks: tuple[str, ...]
    point: npt.NDArray[np.float64]
    resampled: npt.NDArray[np.float64]
    runs: npt.NDArray[np.int64]

    def task(self, name: str, column: int = -1) -> Estimate:
        row = self.tasks.index(name)
        return _estimate(self.point[row, column], self.resampled[row, :, column], int(self.runs[row]))

    def task_estimates(self, column: int = -1) -> dict[str, Estimate]:
        """``task`` for every task, with one percentile call over all of them."""
        tail = (1.0 - CONFIDENCE) / 2 * 100
        values = self.resampled[:, :, column]
        lows, highs = np.percentile(values, [tail, 100 - tail], axis=1)
        ses = values.std(axis=1, ddof=1) if values.shape[1] > 1 else np.zeros(len(self.tasks))
        return {
            name: Estimate(float(self.point[i, column]), float(lows[i]), float(highs[i]), float(ses[i]), int(n))
            for i, (name, n) in enumerate(zip(self.tasks, self.runs, strict=True))
        }

    def overall(self, column: int = -1) -> Estimate:
        """The unweighted mean over tasks, with the interval of its resampled values."""
        return _estimate(self.point[:, column].mean(), self.resampled[:, :, column].mean(axis=0), int(self.runs.sum()))

    def columns(self) -> list[Estimate]:
        """``overall`` for every column (for best-so-far values: after iteration 1, 2, ...)."""
        return [self.overall(k) for k in range(self.point.shape[1])]


def _estimate(point: float, resampled: npt.NDArray[np.float64], n: int) -> Estimate:
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    se = float(resampled.std(ddof=1)) if resampled.size > 1 else 0.0
    # Identical resamples give a rounding residue (1e-17), not an uncertainty.
    se = se if se > 1e-12 else 0.0
    return Estimate(float(point), float(low), float(high), se, n)


def bootstrap(
    values_by_task: Mapping[str, Sequence[float] | Sequence[Sequence[float]] | npt.ArrayLike],
    *,
    resamples: int = 10_000,
    seed: int | None = 0,
) -> Bootstrap:
    """Resample runs within each task; each task maps to per-run values, (runs,) or (runs, columns).

    Tasks without runs are left out. Raises ``ValueError`` when no task has a run, or when the
    tasks' values have different numbers of columns.
    """
    names: list[str] = []
    arrays: list[npt.NDArray[np.float64]] = []
    for name, raw in values_by_task.items():
        arr = np.asarray(raw, dtype=np.float64)
        if arr.size == 0:
            continue
        names.append(name)
        arrays.append(arr.reshape(arr.shape[0], -1))
    if not arrays:
        raise ValueError("no scores to aggregate")
    columns = {a.shape[1] for a in arrays}
    if len(columns) != 1:
        raise ValueError(f"every task needs the same number of columns per run, got {sorted(columns)}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n_tasks, n_cols = len(arrays), columns.pop()
    runs = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    width = int(runs.max())
    padded = np.zeros((n_tasks, width, n_cols))
    for row, arr in enumerate(arrays):
        padded[row, : arr.shape[0]] = arr
    point = padded.sum(axis=1) / runs[:, None]

    rng = np.random.default_rng(seed)
    # Draw `width` picks per (task, resample), one array operation per distinct run count
    # (a scalar bound draws several times faster than a per-task one); a task with fewer runs
    # uses only its first n_t draws, the rest get a weight of 0.
    picks = np.empty((n_tasks, resamples, width), dtype=np.int64)
    for count in np.unique(runs):
        rows = np.flatnonzero(runs == count)
        picks[rows] = rng.integers(0, count, size=(rows.size, resamples, width), dtype=np.int64)
    picks += (np.arange(n_tasks * resamples, dtype=np.int64) * width).reshape(n_tasks, resamples, 1)
    size = n_tasks * resamples * width
    weights = None
    if not np.all(runs == width):
        used = np.broadcast_to(np.arange(width)[None, None, :] < runs[:, None, None], picks.shape)
        weights = used.ravel().astype(np.float64)
    counts = np.bincount(picks.ravel(), weights=weights, minlength=size).astype(np.float64, copy=False)
    counts = counts.reshape(n_tasks, resamples, width)
    resampled = np.matmul(counts, padded) / runs[:, None, None]
    return Bootstrap(tuple(names), point, resampled, runs)


def difference(
    before: Mapping[str, Sequence[float]],
    after: Mapping[str, Sequence[float]],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[dict[str, Estimate], Estimate]:
    """``after - before`` per task and for the overall score over the tasks both sides have.

    Each side is resampled on its own (runs within each task, independent draws), so the interval
    of a difference carries the run-to-run noise of both sessions. Returns the per-task estimates
    and the estimate of the difference of the overall (unweighted mean over tasks) scores.
    """
    tasks = [task for task in before if task in after and len(before[task]) and len(after[task])]
    if not tasks:
        raise ValueError("the two sides share no task with runs")
    old = bootstrap({task: before[task] for task in tasks}, resamples=resamples, seed=seed)
    new = bootstrap({task: after[task] for task in tasks}, resamples=resamples, seed=seed + 1)
    point = new.point[:, -1] - old.point[:, -1]
    resampled = new.resampled[:, :, -1] - old.resampled[:, :, -1]
    runs = old.runs + new.runs
    per_task = {task: _estimate(point[i], resampled[i], int(runs[i])) for i, task in enumerate(tasks)}
    overall = _estimate(float(point.mean()), resampled.mean(axis=0), int(runs.sum()))
    return per_task, overall


def bootstrap_overall(
    scores_by_task: Mapping[str, Sequence[float]], *, resamples: int = 10_000, seed: int | None = 0
) -> Estimate:
    """Mean over tasks of the mean run score, with a bootstrap over runs within each task."""
    return bootstrap(scores_by_task, resamples=resamples, seed=seed).overall()


def bootstrap_mean(scores: Sequence[float], *, resamples: int = 10_000, seed: int | None = 0) -> Estimate:
    """Mean of one task's run scores with its bootstrap interval."""
    return bootstrap_overall({"task": scores}, resamples=resamples, seed=seed)


def best_so_far(scores: Sequence[float], iterations: int) -> list[float]:
    """Best accuracy after iteration 1..``iterations``; a run that stopped early keeps its best."""
    best = np.maximum.accumulate(np.asarray(scores, dtype=np.float64)) if len(scores) else np.zeros(1)
    out = np.full(iterations, best[-1])
    out[: min(iterations, best.size)] = best[:iterations]
    return [float(x) for x in out]


def failure_rate(zero_reasons: Sequence[str | None]) -> float | None:
    """Share of submissions without usable predictions (crash, timeout, no code, bad file)."""
    return sum(reason is not None for reason in zero_reasons) / len(zero_reasons) if zero_reasons else None


def percentiles(values: Sequence[float], qs: Sequence[float]) -> list[float] | None:
    """numpy's linear-interpolation percentiles (what the published code-length columns use)."""
    return [float(x) for x in np.percentile(np.asarray(values, dtype=np.float64), qs)] if len(values) else None


def mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None
