"""Time the published time-horizon fits: ``weirdml horizons --published`` (10 models, 5000 task
resamples each), then the blocked L-BFGS-B against one scipy call per resample on one model.

Run: ``python benchmarks/horizon_speed.py`` (the full size) or ``--tiny`` (200 resamples, what
CI runs). CPU time is printed beside the wall clock: on a shared machine the wall clock mostly
measures the neighbours.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from pytest_weirdml.horizons import fit, published


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> str:
    return f"{time.perf_counter() - start[0]:.2f} s wall, {time.process_time() - start[1]:.2f} s CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="200 resamples (CI)")
    args = parser.parse_args()
    resamples = 200 if args.tiny else fit.RESAMPLES
    pairs = published.estimate_pairs()
    models = published.published_models()
    start = _clock()
    for model in models:
        fit.fit_horizon(fit.make_points(model.scores, pairs), resamples=resamples)
    print(f"{len(models)} published models x {resamples} resamples: {_since(start)}")
    # One scipy call per resample, on the slowest model (gpt-4: few successes, a flat likelihood).
    points = fit.make_points(models[0].scores, pairs)
    count = 50 if args.tiny else 500
    weights = fit.resample_counts(len(points.tasks), count, fit.SEED)[:, points.task].astype(np.float64)
    with threadpool_limits(limits=1, user_api="blas"):
        start = _clock()
        for row in weights:
            minimize(
                fit._objective,
                np.array([points.x.mean(), 0.0]),
                args=(points.x, row[None] * points.successes, row[None] * points.failures),
                jac=True,
                method="L-BFGS-B",
                bounds=[fit.X50_BOUNDS, fit.LOG_SLOPE_BOUNDS],
            )
        print(f"{models[0].display_name}, {count} resamples, one L-BFGS-B call each: {_since(start)}")
    start = _clock()
    fit.fit_horizon(points, resamples=count)
    print(f"{models[0].display_name}, {count} resamples, blocks of {fit.BLOCK} (fit_horizon): {_since(start)}")
    start = _clock()
    fit.fit_horizon(points, resamples=count, block=count)
    print(f"... one block: {_since(start)}")
    if not args.tiny:
        start = _clock()
        fit.fit_horizon(points, resamples=count, block=5)
        print(f"... blocks of 5: {_since(start)}")


if __name__ == "__main__":
    main()
