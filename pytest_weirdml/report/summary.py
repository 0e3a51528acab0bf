"""The session summary: per (model, task) and per model, as plain JSON data."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_weirdml import stats

SUMMARY_FILE = "summary.json"
SUMMARY_SCHEMA = 1


def build_summary(runs: Sequence[dict[str, Any]], *, errors: Sequence[str] = (), resamples: int = 10_000) -> dict[str, Any]:
    """Aggregate run summaries (``RunRecord.summary()`` dicts) the way the benchmark publishes them."""
    by_model: defaultdict[str, defaultdict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        by_model[run["model"]][run["task"]].append(run)
    models = {}
    for model, tasks in sorted(by_model.items()):
        task_rows = {}
        for task, task_runs in sorted(tasks.items()):
            est = stats.bootstrap_mean([r["score"] for r in task_runs], resamples=resamples)
            task_rows[task] = {"runs": len(task_runs), **_estimate(est)}
        overall = stats.bootstrap_overall(
            {task: [r["score"] for r in task_runs] for task, task_runs in tasks.items()}, resamples=resamples
        )
        every = [r for task_runs in tasks.values() for r in task_runs]
        reasons = [reason for r in every for reason in r["zero_reasons"]]
        costs = [r["cost_usd"] for r in every if r.get("cost_usd") is not None]
        tokens = [t for r in every for t in r["output_tokens"]]
        models[model] = {
            "tasks": task_rows,
            "overall": _estimate(overall),
            "runs": len(every),
            "iterations": len(reasons),
            "failure_rate": sum(reason is not None for reason in reasons) / len(reasons) if reasons else 0.0,
            "exec_time_median_s": stats.median([t for r in every for t in r["exec_s"]]),
            "cost_per_run_usd": sum(costs) / len(costs) if costs else None,
            "mean_output_tokens": sum(tokens) / len(tokens) if tokens else None,
        }
    return {"schema": SUMMARY_SCHEMA, "models": models, "runs": list(runs), "errors": list(errors)}


def _estimate(est: stats.Estimate) -> dict[str, float]:
    return {"mean": est.mean, "ci_low": est.low, "ci_high": est.high, "se": est.se}


def write_summary(summary: dict[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SUMMARY_FILE
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path
