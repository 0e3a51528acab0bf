"""The session summary: per (model, task) and per model, as plain JSON data (``summary.json``).

Schema version 2 (``"schema": 2``); every number is a JSON number or ``null`` when there is no
data (a model without prices has no cost):

``schema``        2.
``generator``     ``"pytest-weirdml <version>"``.
``created``       UTC time the summary was built, ISO 8601.
``sessions``      the session names the runs come from (several after a merge).
``bootstrap``     ``resamples``, ``seed``, ``confidence`` (0.95) and ``method`` of the intervals.
``tasks``         every task name seen, sorted.
``models``        model name -> object:
    ``overall``       ``{mean, ci_low, ci_high, se, n}``: unweighted mean over the model's tasks of
                      the mean run score; 95% percentile interval and standard error from a
                      bootstrap over runs within each task; ``n`` runs.
    ``tasks``         task -> ``{mean, ci_low, ci_high, se, n, runs, scores}``: ``runs`` = ``n`` (as in
                      schema 1); ``scores`` are the run
                      scores (max accuracy over a run's iterations), in run order.
    ``progression``   list over iterations 1..N of ``{iteration, mean, ci_low, ci_high, se, n}``:
                      overall best-so-far accuracy after that iteration (a run that stopped early
                      keeps its best), same bootstrap resamples as ``overall``.
    ``runs``, ``iterations``, ``failures``: counts; ``failure_rate`` = failures / iterations,
                      where a failure is a submission without usable predictions (zero reason).
    ``zero_reasons``  reason -> count, reasons cut after their first ``:`` so they group.
    ``cost_per_run_usd``      mean over runs with a known cost of all their calls' cost.
    ``mean_output_tokens``    mean over model calls of the output tokens the provider reported
                              (reasoning included where the provider counts it in the output).
    ``code_lines``    ``{p10, p50, p90}`` of the line counts of all submitted scripts.
    ``exec_time_median_s``    median execution time of the submitted scripts.
    ``exec_s``        every submitted script's execution time (for the histogram).
``runs``          every run summary (``RunRecord.summary()``), with ``session`` where known.
``errors``        node ids of items that hit a harness error (not scored).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_weirdml import stats

SUMMARY_FILE = "summary.json"
SUMMARY_SCHEMA = 2


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pytest-weirdml")
    except Exception:  # not installed (running from a source tree)
        return "unknown"


def build_summary(
    runs: Sequence[dict[str, Any]],
    *,
    errors: Sequence[str] = (),
    resamples: int = 10_000,
    seed: int = 0,
    sessions: Sequence[str] = (),
) -> dict[str, Any]:
    """Aggregate run summaries (``RunRecord.summary()`` dicts) the way the benchmark publishes them."""
    by_model: defaultdict[str, defaultdict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in sorted(runs, key=lambda r: (r.get("session", ""), r["run"])):
        by_model[run["model"]][run["task"]].append(run)
    models = {model: _model_row(tasks, resamples, seed) for model, tasks in sorted(by_model.items())}
    return {
        "schema": SUMMARY_SCHEMA,
        "generator": f"pytest-weirdml {_version()}",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "sessions": list(dict.fromkeys([*sessions, *(r["session"] for r in runs if r.get("session"))])),
        "bootstrap": {
            "resamples": resamples,
            "seed": seed,
            "confidence": stats.CONFIDENCE,
            "method": "percentile; runs resampled with replacement within each task",
        },
        "tasks": sorted({r["task"] for r in runs}),
        "models": models,
        "runs": list(runs),
        "errors": list(errors),
    }


def _model_row(tasks: dict[str, list[dict[str, Any]]], resamples: int, seed: int) -> dict[str, Any]:
    every = [r for task_runs in tasks.values() for r in task_runs]
    depth = max([len(r["scores"]) for r in every] + [1])
    # Best-so-far vectors share one bootstrap with the run scores: the last column is the run score.
    boot = stats.bootstrap(
        {
            task: [stats.best_so_far(r["scores"] or [r["score"]], depth) for r in task_runs]
            for task, task_runs in sorted(tasks.items())
        },
        resamples=resamples,
        seed=seed,
    )
    task_rows = {
        task: {**est.as_dict(), "runs": est.n, "scores": [r["score"] for r in tasks[task]]}
        for task, est in boot.task_estimates().items()
    }
    reasons = [reason for r in every for reason in r["zero_reasons"]]
    costs = [r["cost_usd"] for r in every if r.get("cost_usd") is not None]
    code = stats.percentiles([n for r in every for n in r["code_lines"]], [10, 50, 90])
    exec_s = [t for r in every for t in r["exec_s"]]
    return {
        "overall": boot.overall().as_dict(),
        "tasks": task_rows,
        "progression": [{"iteration": k + 1, **est.as_dict()} for k, est in enumerate(boot.columns())],
        "runs": len(every),
        "iterations": len(reasons),
        "failures": sum(reason is not None for reason in reasons),
        "failure_rate": stats.failure_rate(reasons) or 0.0,
        "zero_reasons": dict(Counter(reason.split(":", 1)[0] for reason in reasons if reason is not None)),
        "cost_per_run_usd": stats.mean(costs),
        "mean_output_tokens": stats.mean([t for r in every for t in r["output_tokens"]]),
        "code_lines": dict(zip(("p10", "p50", "p90"), code, strict=True)) if code else None,
        "exec_time_median_s": stats.median(exec_s),
        "exec_s": exec_s,
    }


def write_summary(summary: dict[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SUMMARY_FILE
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path
