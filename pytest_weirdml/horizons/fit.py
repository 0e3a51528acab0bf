"""The time-horizon fit of the published WeirdML method, with numpy and scipy alone.

For every run of a model on a task, for every threshold ``t`` and every estimate ``h(task, t)``
of the hours a person needs to reach accuracy ``t`` there, one point: ``x = log10 h``, ``y = 1``
when the run scored at least ``t``. The fit is ``p(y=1) = sigmoid(beta * (x - x50))`` with
``beta < 0``, by maximum likelihood (scipy's L-BFGS-B over ``x50`` in [-3, 7] and
``ln(-beta)`` in [ln 1e-6, ln 50]); the horizon is ``10 ** x50`` hours. Its 95% interval: the
tasks are resampled with replacement (5000 times by default) and fitted again; the reported
horizon is the median of the resampled ``x50`` and the interval their 2.5th and 97.5th
percentiles.

Points are grouped: every (task, estimate) is one ``x`` with its number of successes and of
failures over the task's runs, so a resample is a vector of counts per task, and the
likelihood of many resamples is one weighted sum over the same small arrays. The resamples are
fitted in blocks: one L-BFGS-B call minimises the sum of a block's (independent) likelihoods,
each normalised by its number of points, and stops on the largest gradient component, which
is a bound on every resample's own gradient.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

X50_BOUNDS = (-3.0, 7.0)
LOG_SLOPE_BOUNDS = (math.log(1e-6), math.log(50.0))
RESAMPLES = 5000
# The published fits' seed.
SEED = 42
CONFIDENCE = 0.95
# Resamples fitted by one L-BFGS-B call (measured in benchmarks/horizon_speed.py).
BLOCK = 25
# Stop when no normalised gradient component exceeds this: x50 is then exact to well under 1e-4.
GTOL = 1e-7
MAXITER = 15_000

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Points:
    """A model's points, grouped: point ``j`` is task ``task[j]`` at ``x[j]`` (log10 hours), with
    ``successes[j]`` runs that reached the threshold and ``failures[j]`` that did not."""

    tasks: tuple[str, ...]
    task: npt.NDArray[np.int64]
    x: Array
    successes: Array
    failures: Array

    @property
    def n_data(self) -> int:
        return int(self.successes.sum() + self.failures.sum())

    @property
    def n_success(self) -> int:
        return int(self.successes.sum())


def make_points(
    scores: Mapping[str, Sequence[float]], estimates: Mapping[str, Sequence[tuple[float, float]]]
) -> Points:
    """Points from run scores (task -> scores) and estimates (task -> (threshold, hours) pairs).

    Only tasks with both are used, in the order of ``scores`` (the order the bootstrap draws
    them from); an estimate of zero or fewer hours (an estimator's
    "impossible") is no point, as in the published fits.
    """
    tasks = tuple(t for t in scores if scores[t] and estimates.get(t))
    rows: list[tuple[int, float, int, int]] = []
    for i, task in enumerate(tasks):
        runs = np.asarray(scores[task], dtype=np.float64)
        for threshold, hours in estimates[task]:
            if hours > 0 and math.isfinite(hours):
                reached = int(np.count_nonzero(runs >= threshold))
                rows.append((i, math.log10(hours), reached, runs.size - reached))
    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return Points(tasks, table[:, 0].astype(np.int64), table[:, 1], table[:, 2], table[:, 3])


def _objective(theta: Array, x: Array, successes: Array, failures: Array) -> tuple[float, Array]:
    """The summed normalised negative log-likelihood of several fits and its gradient.

    ``theta`` is (x50, ln(-beta)) per fit, flattened; ``successes`` and ``failures`` (fits,
    points) are the point counts weighted by how often each point's task is in each fit's sample.
    """
    params = theta.reshape(-1, 2)
    x50, slope = params[:, :1], -np.exp(params[:, 1:])
    z = slope * (x - x50)
    n = successes + failures
    # -log p(y=1) = log(1 + e^-z), and -log p(y=0) = that + z; computed without overflow.
    surprise = np.logaddexp(0.0, -z)
    nll = (n * surprise + failures * z).sum(axis=1)
    residual = successes - n * np.exp(-surprise)  # d loglik / dz per point
    total = n.sum(axis=1)
    grad = np.empty_like(params)
    grad[:, 0] = (residual * slope).sum(axis=1) / total
    grad[:, 1] = -(residual * z).sum(axis=1) / total
    return float((nll / total).sum()), grad.ravel()


def fit_weighted(
    points: Points, weights: Array, *, start: tuple[float, float] | None = None, scale: tuple[float, float] = (1.0, 1.0)
) -> tuple[Array, Array, npt.NDArray[np.bool_]]:
    """Fit every row of ``weights`` (fits, points): its x50, its beta, and whether it converged.

    The search starts at ``start`` (x50, ln(-beta)) and runs over the parameters divided by
    ``scale``: with the spread of the fit on all points, every resample's problem is about
    equally curved in both directions, which L-BFGS-B's first steps assume.
    """
    n = weights.shape[0]
    successes, failures = weights * points.successes, weights * points.failures
    origin = np.array(start if start is not None else (float(np.clip(points.x.mean(), *X50_BOUNDS)), 0.0))
    step = np.asarray(scale, dtype=np.float64)
    low = (np.array([X50_BOUNDS[0], LOG_SLOPE_BOUNDS[0]]) - origin) / step
    high = (np.array([X50_BOUNDS[1], LOG_SLOPE_BOUNDS[1]]) - origin) / step

    def scaled(u: Array) -> tuple[float, Array]:
        value, grad = _objective((u.reshape(n, 2) * step + origin).ravel(), points.x, successes, failures)
        return value, (grad.reshape(n, 2) * step).ravel()

    result = minimize(
        scaled,
        np.zeros(2 * n),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(np.tile(low, n), np.tile(high, n), strict=True)),
        options={"maxiter": MAXITER, "maxfun": 2 * MAXITER, "ftol": 0.0, "gtol": GTOL, "maxcor": 20},
    )
    u = result.x.reshape(n, 2)
    _, grad = scaled(result.x)
    grad = grad.reshape(n, 2)
    # A component at its bound may keep a gradient pointing outwards: that is converged too.
    free = ~(((u <= low) & (grad > 0)) | ((u >= high) & (grad < 0)))
    converged = np.all(np.abs(grad * free) <= 10 * GTOL, axis=1) & np.all(np.isfinite(u), axis=1)
    params = u * step + origin
    return params[:, 0], -np.exp(params[:, 1]), converged


@dataclass(frozen=True)
class Horizon:
    """A fitted horizon: ``x50`` (log10 hours) and ``beta`` on all the points, the bootstrap's
    median and interval of x50, and the counts behind them."""

    tasks: tuple[str, ...]
    n_data: int
    n_success: int
    x50: float
    beta: float
    x50_q025: float
    x50_q50: float
    x50_q975: float
    beta_q50: float
    resamples: int
    converged: int

    @property
    def hours(self) -> float:
        """The horizon as reported: the bootstrap median, in hours."""
        return float(10.0**self.x50_q50)

    @property
    def low_hours(self) -> float:
        return float(10.0**self.x50_q025)

    @property
    def high_hours(self) -> float:
        return float(10.0**self.x50_q975)

    def curve(self, x: Array) -> Array:
        """p(success) of the fit on all points at log10 hours ``x``."""
        return np.asarray(1.0 / (1.0 + np.exp(-self.beta * (x - self.x50))))

    def as_dict(self) -> dict[str, float | int]:
        """The published keys: the horizon in hours (median) and its interval, and the counts."""
        return {
            "x50_hours": self.hours,
            "q025": self.low_hours,
            "q975": self.high_hours,
            "n_data": self.n_data,
            "n_success": self.n_success,
        }


def resample_counts(n_tasks: int, resamples: int, seed: int) -> npt.NDArray[np.int64]:
    """How often each task is drawn in each resample of the tasks with replacement.

    The draws are those of ``numpy.random.default_rng(seed).choice(n_tasks, n_tasks)`` once per
    resample, as the published fits made them (with seed 42, over the tasks in the published
    order), so that their intervals are reproduced to the digit.
    """
    drawn = np.random.default_rng(seed).integers(0, n_tasks, size=(resamples, n_tasks))
    offsets = (np.arange(resamples) * n_tasks)[:, None]
    return np.bincount((drawn + offsets).ravel(), minlength=resamples * n_tasks).reshape(resamples, n_tasks)


def _spread(points: Points, x50: float, beta: float) -> tuple[float, float]:
    """The expected curvature of the normalised likelihood in x50 and in ln(-beta) at a fit, as
    the scale of each (one over its square root)."""
    z = beta * (points.x - x50)
    p = 1.0 / (1.0 + np.exp(-z))
    n = points.successes + points.failures
    info = n * p * (1.0 - p) / n.sum()
    curvature = np.array([(info * beta**2).sum(), (info * z**2).sum()])
    scale = np.where(curvature > 1e-12, 1.0 / np.sqrt(np.maximum(curvature, 1e-12)), 1.0)
    return float(scale[0]), float(scale[1])


def fit_horizon(points: Points, *, resamples: int = RESAMPLES, seed: int = SEED, block: int = BLOCK) -> Horizon:
    """The horizon of these points with its bootstrap interval; ``ValueError`` without points."""
    if points.x.size == 0:
        raise ValueError("no points to fit: no task has both run scores and time estimates")
    # scipy's L-BFGS-B calls BLAS on two-number vectors: threads only cost (10x on a busy machine).
    with threadpool_limits(limits=1, user_api="blas"):
        fitted_x50, fitted_beta, _ = fit_weighted(points, np.ones((1, points.x.size)))
        x50, beta = float(fitted_x50[0]), float(fitted_beta[0])
        start, scale = (x50, math.log(-beta)), _spread(points, x50, beta)
        weights = resample_counts(len(points.tasks), resamples, seed)[:, points.task].astype(np.float64)
        fits = [
            fit_weighted(points, weights[first : first + block], start=start, scale=scale)
            for first in range(0, resamples, block)
        ]
    all_x50 = np.concatenate([f[0] for f in fits])
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, mid, high = np.percentile(all_x50, [tail, 50.0, 100.0 - tail])
    return Horizon(
        tasks=points.tasks,
        n_data=points.n_data,
        n_success=points.n_success,
        x50=x50,
        beta=beta,
        x50_q025=float(low),
        x50_q50=float(mid),
        x50_q975=float(high),
        beta_q50=float(np.median(np.concatenate([f[1] for f in fits]))),
        resamples=resamples,
        converged=int(sum(int(f[2].sum()) for f in fits)),
    )
