"""The published results table: our rows in its columns, and published rows read back for overlays.

The CSV a session writes has exactly the header of the published ``leaderboard.csv``, so its rows
can be appended to that table. Task columns the published table lacks are left out of the CSV
(``summary.json`` has them); ``avg_acc`` is the mean over the tasks this session ran.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.csv"

# The published table's tasks, in its column order.
PUBLISHED_TASKS = (
    "shapes_easy",
    "shapes_hard",
    "digits_unsup",
    "chess_winners",
    "kolmo_shuffle",
    "classify_sentences",
    "classify_shuffled",
    "insert_patches",
    "blunders_easy",
    "blunders_hard",
    "digits_generalize",
    "shapes_variable",
    "xor_easy",
    "xor_hard",
    "splash_easy",
    "splash_hard",
    "number_patterns",
)
LEADERBOARD_COLUMNS = (
    "internal_model_name",
    "display_name",
    "model_slug",
    *(f"{task}_acc" for task in PUBLISHED_TASKS),
    "avg_acc",
    "avg_acc_standard_error",
    "cost_per_run_usd",
    "mean_total_output_tokens",
    "code_len_p10",
    "code_len_p50",
    "code_len_p90",
    "exec_time_median_s",
    "release_date",
    "API source",
)
SOURCE = "pytest-weirdml"


def _cell(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def results_rows(summary: dict[str, Any], columns: Sequence[str] = LEADERBOARD_COLUMNS) -> list[dict[str, str]]:
    """One row per model, keyed by ``columns`` (unknown columns stay empty)."""
    rows = []
    for model, row in summary["models"].items():
        code = row.get("code_lines") or {}
        values: dict[str, str] = {
            "internal_model_name": model,
            "display_name": model,
            "model_slug": model,
            "avg_acc": _cell(row["overall"]["mean"]),
            "avg_acc_standard_error": _cell(row["overall"]["se"]),
            "cost_per_run_usd": _cell(row.get("cost_per_run_usd")),
            "mean_total_output_tokens": _cell(row.get("mean_output_tokens")),
            "code_len_p10": _cell(code.get("p10")),
            "code_len_p50": _cell(code.get("p50")),
            "code_len_p90": _cell(code.get("p90")),
            "exec_time_median_s": _cell(row.get("exec_time_median_s")),
            "release_date": "",
            "API source": SOURCE,
        }
        for task, cell in row["tasks"].items():
            values[f"{task}_acc"] = _cell(cell["mean"])
        rows.append({column: values.get(column, "") for column in columns})
    return rows


def write_results_csv(summary: dict[str, Any], path: Path, columns: Sequence[str] = LEADERBOARD_COLUMNS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(results_rows(summary, columns))
    return path


@dataclass(frozen=True)
class PublishedRow:
    """A published model, with the numbers our figures can set beside ours."""

    name: str
    task_acc: dict[str, float]
    avg_acc: float | None
    se: float | None
    cost_per_run_usd: float | None
    mean_output_tokens: float | None

    def shared_acc(self, tasks: Sequence[str]) -> float | None:
        """Mean over the given tasks, when the row has them all: comparable with our overall."""
        if not tasks or any(task not in self.task_acc for task in tasks):
            return None
        return sum(self.task_acc[task] for task in tasks) / len(tasks)

    def accuracy(self, tasks: Sequence[str]) -> float | None:
        """``shared_acc`` where the row has our tasks, else its published average over all of its own."""
        shared = self.shared_acc(tasks)
        return shared if shared is not None else self.avg_acc


def comparable(rows: Sequence[PublishedRow], tasks: Sequence[str]) -> bool:
    """Whether the published rows have every task of ours (else figures fall back to ``avg_acc``)."""
    return any(r.shared_acc(tasks) is not None for r in rows)


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def read_leaderboard(path: Path) -> list[PublishedRow]:
    """Read a published results table; raise ``ValueError`` naming what is missing."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in ("display_name", "avg_acc") if c not in header]
        if missing:
            raise ValueError(f"{path}: not a WeirdML results table, missing columns {missing}")
        tasks = [c[: -len("_acc")] for c in header if c.endswith("_acc") and c != "avg_acc"]
        rows = []
        for raw in reader:
            accs = {task: v for task in tasks if (v := _float(raw.get(f"{task}_acc"))) is not None}
            rows.append(
                PublishedRow(
                    name=raw.get("display_name") or raw.get("internal_model_name") or "?",
                    task_acc=accs,
                    avg_acc=_float(raw.get("avg_acc")),
                    se=_float(raw.get("avg_acc_standard_error")),
                    cost_per_run_usd=_float(raw.get("cost_per_run_usd")),
                    mean_output_tokens=_float(raw.get("mean_total_output_tokens")),
                )
            )
    return rows


def pick_published(rows: Sequence[PublishedRow], tasks: Sequence[str], count: int = 8) -> list[PublishedRow]:
    """A few rows for the bar charts: evenly spread by accuracy on our tasks, best first.

    The scatter plots take every row; bar charts stay readable with a handful.
    """
    scored = sorted((r for r in rows if r.accuracy(tasks) is not None), key=lambda r: -(r.accuracy(tasks) or 0))
    if len(scored) <= count:
        return scored
    step = (len(scored) - 1) / (count - 1)
    return [scored[round(i * step)] for i in range(count)]
