"""Our rows in the published table's columns: ``results.csv``, and ``results_own_tasks.csv``.

``results.csv`` has exactly the header of the published ``leaderboard.csv``, so its rows can be
appended to that table. Its ``avg_acc`` (and standard error) is the mean over the published
table's 17 tasks, so it is filled only for a model that ran all 17; for any other it is blank,
since a mean over fewer tasks would mean something else than its neighbours' (the hidden tasks
of the table cannot be run outside, so in practice it stays blank).

Tasks the published table lacks (our own, and the two shuffle tasks it dropped) go to
``results_own_tasks.csv``, in the same column style: one ``<task>_acc`` column per such task of
the session, and an ``avg_acc`` over exactly those columns, filled for the models that ran all
of them. A file holds only the models with at least one of its tasks.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.report.published import LEADERBOARD_COLUMNS, PUBLISHED_TASKS, columns_for
from pytest_weirdml.report.summary import overall_over

RESULTS_FILE = "results.csv"
OWN_RESULTS_FILE = "results_own_tasks.csv"
SOURCE = "pytest-weirdml"


def _cell(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def own_tasks(summary: Mapping[str, Any]) -> list[str]:
    return [task for task in summary["tasks"] if task not in PUBLISHED_TASKS]


def source(summary: Mapping[str, Any]) -> str:
    """The ``API source`` cell: ours, with what the published table cannot hold in a column of its
    own: the protocol and the data seed (a row is only comparable with rows made the same way)."""
    seeds = [str(seed) for seed in summary.get("data_seeds") or [] if seed is not None]
    seed = f"data seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds) or 'unknown'}"
    protocol = summary.get("protocol") or "unknown"
    return f"{SOURCE} ({protocol} protocol, {seed})"


def results_rows(summary: Mapping[str, Any], tasks: Sequence[str], columns: Sequence[str]) -> list[dict[str, str]]:
    """One row per model that ran any of ``tasks``, keyed by ``columns`` (unknown ones stay empty)."""
    rows = []
    for model, row in summary["models"].items():
        if not any(task in row["tasks"] for task in tasks):
            continue
        code = row.get("code_lines") or {}
        average = overall_over(row, tasks, summary["bootstrap"])
        values: dict[str, str] = {
            "internal_model_name": model,
            "display_name": model,
            "model_slug": model,
            "avg_acc": _cell(average["mean"] if average else None),
            "avg_acc_standard_error": _cell(average["se"] if average else None),
            "cost_per_run_usd": _cell(row.get("cost_per_run_usd")),
            "mean_total_output_tokens": _cell(row.get("mean_output_tokens")),
            "code_len_p10": _cell(code.get("p10")),
            "code_len_p50": _cell(code.get("p50")),
            "code_len_p90": _cell(code.get("p90")),
            "exec_time_median_s": _cell(row.get("exec_time_median_s")),
            "release_date": "",
            "API source": source(summary),
        }
        for task in tasks:
            if task in row["tasks"]:
                values[f"{task}_acc"] = _cell(row["tasks"][task]["mean"])
        rows.append({column: values.get(column, "") for column in columns})
    return rows


def _write(path: Path, columns: Sequence[str], rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(columns))
    writer.writeheader()
    writer.writerows(rows)
    return write_atomic(path, text.getvalue())


def write_results(summary: Mapping[str, Any], directory: Path) -> dict[str, Path]:
    """``results.csv`` always; ``results_own_tasks.csv`` when the session ran tasks the
    published table lacks. Returns the paths by kind (``csv``, ``csv_own``)."""
    paths = {
        "csv": _write(
            directory / RESULTS_FILE, LEADERBOARD_COLUMNS, results_rows(summary, PUBLISHED_TASKS, LEADERBOARD_COLUMNS)
        )
    }
    own = own_tasks(summary)
    if own:
        columns = columns_for(own)
        paths["csv_own"] = _write(directory / OWN_RESULTS_FILE, columns, results_rows(summary, own, columns))
    return paths
