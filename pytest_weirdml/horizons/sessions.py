"""Time horizons of our own runs: the scored runs of one or several sessions, with the
``[time_estimates]`` their records kept (or those of task directories given instead).

``horizons_of(runs)`` is the ``horizons`` block of ``summary.json``: ``None`` when no task has
estimates, else the method, the tasks used and left out, where each task's hours come from, and
per model its horizon (``Horizon.as_dict`` plus the fit on all points and its counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_weirdml.horizons.estimates import TimeEstimates, from_record
from pytest_weirdml.horizons.fit import RESAMPLES, SEED, Horizon, Points, fit_horizon, make_points
from pytest_weirdml.records import RunRecord

METHOD = (
    "published WeirdML method: per run, threshold and estimate one point (log10 hours, run score >= threshold); "
    "p = sigmoid(beta (x - x50)) by maximum likelihood; tasks resampled with replacement"
)


def recorded_estimates(runs: Sequence[RunRecord]) -> dict[str, TimeEstimates]:
    """Task -> the estimates its runs recorded (the latest run's, when they differ)."""
    found: dict[str, TimeEstimates] = {}
    for run in sorted(runs, key=lambda r: r.iterations[0].started_at if r.iterations else ""):
        estimates = from_record(run.plan.time_estimates) if run.plan is not None else None
        if estimates is not None:
            found[run.task] = estimates
    return found


def horizon_row(horizon: Horizon, points: Points) -> dict[str, Any]:
    """A fit as summary.json keeps it. ``beyond`` is ``"above"`` when every point succeeded (the
    horizon is only known to exceed the longest estimate), ``"below"`` when none did, else ``None``."""
    beyond = "above" if horizon.n_success == horizon.n_data else "below" if horizon.n_success == 0 else None
    return {
        **horizon.as_dict(),
        "beyond": beyond,
        "estimate_hours": [float(10.0 ** points.x.min()), float(10.0 ** points.x.max())],
        "x50_fit_hours": float(10.0**horizon.x50),
        "beta": horizon.beta,
        "tasks": list(horizon.tasks),
        "resamples": horizon.resamples,
        "converged": horizon.converged,
    }


def model_points(
    runs: Sequence[RunRecord], estimates: Mapping[str, TimeEstimates] | None = None
) -> tuple[dict[str, TimeEstimates], list[str], dict[str, Points]]:
    """The estimates in use (task -> hours), the scored tasks without any, and each model's points."""
    scored = [r for r in runs if r.scored]
    tasks = sorted({r.task for r in scored})
    known = {**recorded_estimates(scored), **(estimates or {})}
    used = {t: known[t] for t in tasks if t in known}
    by_model: dict[str, dict[str, list[float]]] = {}
    for run in sorted(scored, key=lambda r: (r.model, r.task, r.session, r.run)):
        by_model.setdefault(run.model, {}).setdefault(run.task, []).append(run.score)
    pairs = {task: e.pairs() for task, e in used.items()}
    points = {model: make_points(scores, pairs) for model, scores in sorted(by_model.items())}
    return used, [t for t in tasks if t not in known], {m: p for m, p in points.items() if p.x.size}


def horizons_of(
    runs: Sequence[RunRecord],
    *,
    estimates: Mapping[str, TimeEstimates] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, Any] | None:
    """The horizons of the scored runs, per model; ``estimates`` (task -> hours) replace those the
    records kept. ``None`` when no task run here has estimates."""
    used, without, points = model_points(runs, estimates)
    if not used:
        return None
    return {
        "method": METHOD,
        "resamples": resamples,
        "seed": seed,
        "confidence": 0.95,
        "tasks_used": sorted(used),
        "tasks_without_estimates": without,
        "estimates": {task: e.describe() for task, e in sorted(used.items())},
        "models": {
            model: horizon_row(fit_horizon(p, resamples=resamples, seed=seed), p) for model, p in points.items()
        },
    }
