"""Time the session statistics at the size issue 7 asks for: 10 models x 20 tasks x 10 runs.

Each model gets one stratified bootstrap (10,000 resamples) over its runs, with the run values
as best-so-far vectors over 5 iterations, so the overall score, every task's interval and the
progression curve all come from it. Run: ``python benchmarks/stats_speed.py`` (``--tiny``: 2 models,
200 resamples, one repeat; what CI runs to check the script still works).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_weirdml import stats
from pytest_weirdml.report.summary import build_summary

MODELS, TASKS, RUNS, ITERATIONS, RESAMPLES = 10, 20, 10, 5, 10_000


def _runs(rng: np.random.Generator, models: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for m in range(models):
        for t in range(TASKS):
            for r in range(RUNS):
                scores = rng.uniform(0, 1, ITERATIONS).round(3).tolist()
                out.append(
                    {
                        "task": f"task{t:02d}",
                        "model": f"model{m}",
                        "run": r,
                        "score": max(scores),
                        "scores": scores,
                        "zero_reasons": [None] * ITERATIONS,
                        "exec_s": rng.uniform(1, 100, ITERATIONS).tolist(),
                        "code_lines": rng.integers(50, 400, ITERATIONS).tolist(),
                        "output_tokens": rng.integers(100, 5000, ITERATIONS).tolist(),
                        "cost_usd": 0.1,
                    }
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="2 models, 200 resamples, one repeat")
    args = parser.parse_args()
    models, resamples, repeats = (2, 200, 1) if args.tiny else (MODELS, RESAMPLES, 5)
    rng = np.random.default_rng(0)
    values = [{f"task{t:02d}": rng.uniform(0, 1, (RUNS, ITERATIONS)) for t in range(TASKS)} for _ in range(models)]
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        for per_task in values:
            boot = stats.bootstrap(per_task, resamples=resamples, seed=0)
            boot.columns()
            boot.task_estimates()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    # CPU time is printed too: on a shared machine the wall clock mostly measures the neighbours.
    print(
        f"bootstrap: {models} models x {TASKS} tasks x {RUNS} runs x {ITERATIONS} iterations, "
        f"{resamples} resamples: {wall:.3f} s wall, {cpu:.3f} s CPU (best of {repeats})"
    )
    runs = _runs(rng, models)
    start, start_cpu = time.perf_counter(), time.process_time()
    build_summary(runs, resamples=resamples)
    print(
        f"build_summary on the same {len(runs)} runs: {time.perf_counter() - start:.3f} s wall, "
        f"{time.process_time() - start_cpu:.3f} s CPU"
    )


if __name__ == "__main__":
    main()
