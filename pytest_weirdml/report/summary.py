"""The session summary: per (model, task) and per model, as plain JSON data (``summary.json``).

Built only from records (``summarize``), so the summary a session writes at its end and the one
``weirdml report`` rebuilds from the same records are equal, field for field.

Schema version 3 (``"schema": 3``); every number is a JSON number or ``null`` when there is no
data (a model without prices has no cost):

``schema``        3.
``generator``     ``"pytest-weirdml <version>"``.
``created``       the time (UTC, ISO 8601) of the newest record the summary covers: the last run
                  end, else the last submission. Not the time the file was written, so that a
                  rebuild from the same records gives the same file.
``sessions``      the session names the runs come from, sorted (several after a merge).
``protocol``      what the models were told: ``published`` or ``informed`` (docs/protocol.md). Runs of
                  different protocols are never summarised together.
``data``          task -> the data identities its runs used (``v<data version>-seed<seed>-<builder
                  hash>``); one per task unless sessions on different data were merged.
``data_seeds``    the data seeds of the runs.
``bootstrap``     ``resamples``, ``seed``, ``confidence`` (0.95) and ``method`` of the intervals.
``tasks``         every task with a scored run, sorted.
``published_tasks``  those of ``tasks`` that the published table has, in its order.
``models``        model name -> object:
    ``overall``       ``{mean, ci_low, ci_high, se, n}``: unweighted mean over the model's tasks of
                      the mean run score; 95% percentile interval and standard error from a
                      bootstrap over runs within each task; ``n`` runs.
    ``published``     the same over ``published_tasks`` when the model ran every one of them
                      (what compares with the published rows on the same tasks), else ``null``.
    ``tasks``         task -> ``{mean, ci_low, ci_high, se, n, runs, scores}``: ``scores`` are the
                      run scores (max accuracy over a run's iterations), in run order.
    ``progression``   list over iterations 1..N of ``{iteration, mean, ci_low, ci_high, se, n}``:
                      overall best-so-far accuracy after that iteration (a run that stopped early
                      keeps its best), same bootstrap resamples as ``overall``.
    ``runs``, ``iterations``, ``failures``: counts; ``failure_rate`` = failures / iterations,
                      where a failure is a submission without usable predictions (zero reason).
    ``zero_reasons``  reason -> count, reasons cut after their first ``:`` so they group.
    ``cost_per_run_usd``      mean over runs with a known cost of all their calls' cost.
    ``cached_responses``      model calls answered from the response cache (``usage.cached_response``;
                              each run of ``runs`` counts its own).
    ``mean_output_tokens``    mean over model calls of the output tokens the provider reported
                              (reasoning included where the provider counts it in the output).
    ``code_lines``    ``{p10, p50, p90}`` of the line counts of all submitted scripts.
    ``exec_time_median_s``    median execution time of the submitted scripts.
    ``exec_s``        every submitted script's execution time (for the histogram).
``horizons``      only when a task run here has ``[time_estimates]``: the time horizons
                  (pytest_weirdml.horizons): ``method``, ``resamples``, ``seed``, ``tasks_used``,
                  ``tasks_without_estimates`` (left out of the fit), ``estimates`` (task -> where
                  its hours come from) and ``models`` (model -> the same object as its
                  ``horizon`` below).
    ``models[m].horizon``  ``{x50_hours, q025, q975, n_data, n_success, x50_fit_hours, beta, tasks,
                  resamples, converged}``: the median horizon in hours over the bootstrap and its
                  95% interval, the points and successes, the fit on all points.
``runs``          every scored (finished) run as ``RunRecord.summary()``, sorted by session,
                  task, model and run: its scores, and the conditions it was made under
                  (``protocol``, ``data``, ``data_seed``, ``iterations_planned``, ``time_limit_s``,
                  ``sandbox``, ``hardware``).
``isolation``     how the scored runs' scripts were isolated (``bwrap+cgroups``, ``bwrap``,
                  ``docker``, ``none``; ``unknown`` for records made before it was recorded).
``errors``        runs a harness error stopped (not scored): ``{session, task, model, run,
                  iterations, error}``.
``incomplete``    runs whose session ended before they did (killed or interrupted; not scored):
                  ``{session, task, model, run, iterations}``.
``unscored``      model -> why its runs were not scored -> how many: the harness error cut after
                  its first ``:`` (``SandboxError``), or ``the session ended first``; so a model's
                  dropped runs are visible beside its scores.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_weirdml import __version__, stats
from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.horizons.sessions import horizons_of
from pytest_weirdml.records import ERROR, RunRecord
from pytest_weirdml.report.published import shared_tasks

SUMMARY_FILE = "summary.json"
SUMMARY_SCHEMA = 3


def summarize(runs: Sequence[RunRecord], *, resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """The summary of these runs: finished runs are scored, the others listed apart."""

    def unscored(run: RunRecord) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "session": run.session,
            "task": run.task,
            "model": run.model,
            "run": run.run,
            "iterations": len(run.iterations),
        }
        if run.status == ERROR:
            entry["error"] = run.error
        return entry

    ordered = sorted(runs, key=lambda r: (r.session, r.task, r.model, r.run))
    protocols = sorted({r.protocol for r in ordered if r.scored and r.iterations})
    if len(protocols) > 1:
        raise ValueError(
            f"these runs were made under different protocols ({', '.join(protocols)}), whose scores are not "
            "comparable; build a report for each protocol's sessions apart"
        )
    times = [r.ended_at or (r.iterations[-1].started_at if r.iterations else "") for r in ordered]
    summary = build_summary(
        [r.summary() for r in ordered if r.scored],
        errors=[unscored(r) for r in ordered if r.status == ERROR],
        incomplete=[unscored(r) for r in ordered if not r.scored and r.status != ERROR],
        resamples=resamples,
        seed=seed,
        sessions=sorted({r.session for r in ordered if r.session}),
        created=max(times, default=""),
    )
    horizons = horizons_of(ordered)
    if horizons is not None:
        summary["horizons"] = horizons
        for model, row in horizons["models"].items():
            summary["models"][model]["horizon"] = row
    return summary


def build_summary(
    runs: Sequence[Mapping[str, Any]],
    *,
    errors: Sequence[Mapping[str, Any]] = (),
    incomplete: Sequence[Mapping[str, Any]] = (),
    resamples: int = 10_000,
    seed: int = 0,
    sessions: Sequence[str] = (),
    created: str = "",
) -> dict[str, Any]:
    """Aggregate scored run summaries (``RunRecord.summary()`` dicts) the way the benchmark
    publishes them."""
    by_model: defaultdict[str, defaultdict[str, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        by_model[run["model"]][run["task"]].append(run)
    tasks = sorted({r["task"] for r in runs})
    published = shared_tasks(tasks)
    bootstrap = {
        "resamples": resamples,
        "seed": seed,
        "confidence": stats.CONFIDENCE,
        "method": "percentile; runs resampled with replacement within each task",
    }
    models = {}
    for model, model_tasks in sorted(by_model.items()):
        row = _model_row(model_tasks, resamples, seed)
        row["published"] = overall_over(row, published, bootstrap)
        models[model] = row
    data: defaultdict[str, set[str]] = defaultdict(set)
    seeds: set[int] = set()
    for run in runs:
        data[run["task"]].add(run.get("data", ""))
        if run.get("data_seed") is not None:
            seeds.add(run["data_seed"])
    return {
        "schema": SUMMARY_SCHEMA,
        "generator": f"pytest-weirdml {__version__}",
        "created": created,
        "sessions": list(sessions),
        "protocol": next(iter({r.get("protocol", "") for r in runs}), ""),
        "data": {task: sorted(keys) for task, keys in sorted(data.items())},
        "data_seeds": sorted(seeds),
        "isolation": sorted({str(r.get("isolation") or "unknown") for r in runs}),
        "bootstrap": bootstrap,
        "tasks": tasks,
        "published_tasks": published,
        "models": models,
        "runs": [dict(r) for r in runs],
        "errors": [dict(e) for e in errors],
        "incomplete": [dict(i) for i in incomplete],
        "unscored": unscored_counts(errors, incomplete),
    }


SESSION_ENDED = "the session ended first"


def unscored_counts(
    errors: Sequence[Mapping[str, Any]], incomplete: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, int]]:
    """model -> reason -> number of runs not scored for it."""
    counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for entry in errors:
        counts[entry["model"]][str(entry.get("error") or "harness error").split(":", 1)[0]] += 1
    for entry in incomplete:
        counts[entry["model"]][SESSION_ENDED] += 1
    return {model: dict(reasons) for model, reasons in sorted(counts.items())}


def overall_over(
    model_row: Mapping[str, Any], tasks: Sequence[str], bootstrap: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The model's overall score over exactly ``tasks`` (its runs resampled as for ``overall``);
    ``None`` when it lacks one of them."""
    cells = model_row["tasks"]
    if not tasks or any(task not in cells for task in tasks):
        return None
    boot = stats.bootstrap(
        {task: cells[task]["scores"] for task in tasks}, resamples=bootstrap["resamples"], seed=bootstrap["seed"]
    )
    return boot.overall().as_dict()


def _model_row(tasks: Mapping[str, list[Mapping[str, Any]]], resamples: int, seed: int) -> dict[str, Any]:
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
        "cached_responses": sum(r.get("cached_responses", 0) for r in every),
        "mean_output_tokens": stats.mean([t for r in every for t in r["output_tokens"]]),
        "code_lines": dict(zip(("p10", "p50", "p90"), code, strict=True)) if code else None,
        "exec_time_median_s": stats.median(exec_s),
        "exec_s": exec_s,
    }


def write_summary(summary: Mapping[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return write_atomic(directory / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
