"""``weirdml tasks [DIR] [--json]``: every task with its family and tier, markers, chance, the
reference's score and one line of what it asks.

Chance and the reference's score come from the task's saved check (``calibration/check.json``,
written by ``weirdml check-task --save``): the data seed's majority share and the reference on
one core within the task's limit. A task not checked yet shows ``-``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_weirdml.errors import TaskError
from pytest_weirdml.table import align
from pytest_weirdml.tasks import TASK_FILE, TaskSpec, bundled_tasks_dir, load_task
from pytest_weirdml.untrusted import printable

WIDTH = 72


@dataclass(frozen=True)
class TaskRow:
    name: str
    family: str | None
    tier: str | None
    markers: tuple[str, ...]
    chance: float | None
    reference: float | None
    description: str
    directory: str


def add_parser(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "tasks",
        help="list the tasks: family and tier, markers, chance, reference score, what each asks",
        description="List every task of a directory (default: the bundled tasks) with its family and tier, "
        "markers (for pytest -m), chance and the reference's score from its saved check, and what it asks. "
        "Select them in pytest with -k NAME or -m MARKER.",
    )
    parser.add_argument("directory", nargs="?", type=Path, help="a directory of task directories (default: bundled)")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list")


def task_row(spec: TaskSpec) -> TaskRow:
    from pytest_weirdml.check.calibration import saved_path
    from pytest_weirdml.check.findings import load_figures

    try:
        figures = load_figures(saved_path(spec.directory))
    except ValueError:
        figures = None
    chance = figures.chance.get(spec.seed) if figures else None
    reference = figures.reference.get(spec.seed) if figures else None
    return TaskRow(
        spec.name,
        spec.calibration.family,
        spec.calibration.tier,
        spec.markers,
        chance,
        reference,
        spec.description,
        str(spec.directory),
    )


def rows(directory: Path) -> list[TaskRow]:
    dirs = sorted(p.parent for p in directory.glob(f"*/{TASK_FILE}"))
    if not dirs:
        raise TaskError(f"{directory}: no {TASK_FILE} in its subdirectories; pass a directory of task directories")
    return [task_row(load_task(d)) for d in dirs]


def _cut(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 3].rstrip() + "..."


def run(args: argparse.Namespace) -> int:
    try:
        found = rows(args.directory or bundled_tasks_dir())
    except (TaskError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(row) for row in found], indent=2))
        return 0
    table = [
        (
            row.name,
            f"{row.family or '-'}, {row.tier or '-'}",
            ", ".join(row.markers),
            "-" if row.chance is None else f"{row.chance:.3f}",
            "-" if row.reference is None else f"{row.reference:.3f}",
        )
        for row in found
    ]
    lines = align(("task", "family, tier", "markers", "chance", "reference"), table, left=3)
    width = max(len(line) for line in lines)
    asks = ["what it asks", *(_cut(row.description) for row in found)]
    for line, text in zip(lines, asks, strict=True):
        print(printable(f"{line.ljust(width)}  {text}"))
    print(f"{len(found)} tasks; run some with pytest -k NAME or -m MARKER, e.g. -m 'hard and images'")
    return 0
