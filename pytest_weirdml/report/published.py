"""The published results table: its tasks, its columns, and its rows read back for comparison.

A published row is only compared with ours on the tasks both sides ran: its mean over those
tasks, never its own ``avg_acc`` over tasks we did not run.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The tasks of the published (v2) table, in its column order; ``avg_acc`` is their mean.
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
NAME_COLUMNS = ("internal_model_name", "display_name", "model_slug")
# Everything after the task columns, in the published order.
TAIL_COLUMNS = (
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


def columns_for(tasks: Sequence[str]) -> tuple[str, ...]:
    """A results table's header for these tasks, in the published column style."""
    return (*NAME_COLUMNS, *(f"{task}_acc" for task in tasks), *TAIL_COLUMNS)


LEADERBOARD_COLUMNS = columns_for(PUBLISHED_TASKS)


def shared_tasks(tasks: Sequence[str]) -> list[str]:
    """The given tasks that the published table has, in its order."""
    return [task for task in PUBLISHED_TASKS if task in tasks]


@dataclass(frozen=True)
class PublishedRow:
    """A published model, with the numbers our figures can set beside ours."""

    name: str
    task_acc: dict[str, float]
    avg_acc: float | None
    se: float | None
    cost_per_run_usd: float | None
    mean_output_tokens: float | None

    def mean_over(self, tasks: Sequence[str]) -> float | None:
        """Mean over the given tasks, when the row has them all (else not comparable: ``None``)."""
        if not tasks or any(task not in self.task_acc for task in tasks):
            return None
        return sum(self.task_acc[task] for task in tasks) / len(tasks)


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


def comparable_rows(rows: Sequence[PublishedRow], tasks: Sequence[str]) -> list[PublishedRow]:
    """The rows that have every one of ``tasks`` (so their mean over them compares with ours)."""
    return [row for row in rows if row.mean_over(tasks) is not None]


def pick_published(rows: Sequence[PublishedRow], tasks: Sequence[str], count: int = 8) -> list[PublishedRow]:
    """A few comparable rows for the bar charts: evenly spread by their mean over ``tasks``, best
    first. The scatter plots take every comparable row; bar charts stay readable with a handful."""
    scored = sorted(comparable_rows(rows, tasks), key=lambda r: -(r.mean_over(tasks) or 0.0))
    if len(scored) <= count:
        return scored
    step = (len(scored) - 1) / (count - 1)
    return [scored[round(i * step)] for i in range(count)]
