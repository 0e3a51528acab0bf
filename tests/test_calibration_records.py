"""The calibration records shipped under tasks/<task>/calibration/ rebuild the figures quoted beside
them: `weirdml report` on the records gives the shipped summary, the calibration README's table
gives each submission's recorded score, and the project README's calibration table gives the
run's first try and best of five."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_weirdml.report.build import build_reports
from pytest_weirdml.session import read_runs

ROOT = Path(__file__).resolve().parents[1]
CALIBRATIONS = sorted(p.parent for p in ROOT.glob("tasks/*/calibration/records.jsonl"))
# Further runs of a task, each in calibration/run<N>/ with its own records, summary and README.
MORE_RUNS = sorted(p.parent for p in ROOT.glob("tasks/*/calibration/run*/records.jsonl"))


def _name(directory: Path) -> str:
    return str(directory.relative_to(ROOT / "tasks"))


def _task(directory: Path) -> str:
    return directory.relative_to(ROOT / "tasks").parts[0]


def _readme_row(task: str) -> str:
    """The task's row of the project README's calibration table."""
    return next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith(f"| {task} |"))


def _scores(directory: Path) -> list[float]:
    """The one recorded run's iteration scores, read as the report reads them."""
    (run,) = read_runs([directory])
    return [iteration.score for iteration in run.iterations]


def test_there_are_calibration_records() -> None:
    assert len(CALIBRATIONS) >= 5


@pytest.mark.parametrize("directory", CALIBRATIONS + MORE_RUNS, ids=_name)
def test_the_records_rebuild_the_shipped_summary(directory: Path, tmp_path: Path) -> None:
    build_reports([directory], tmp_path)
    rebuilt = json.loads((tmp_path / "summary.json").read_text())
    shipped = json.loads((directory / "summary.json").read_text())
    assert rebuilt["models"] == shipped["models"]
    assert rebuilt["tasks"] == [_task(directory)]


def _assert_submission_table(directory: Path, scores: list[float]) -> None:
    assert len(scores) == 5
    table = (directory / "README.md").read_text()
    for number, score in enumerate(scores, start=1):
        assert re.search(rf"^\| {number} \| {score:.3f} \|", table, re.M), f"submission {number}: {score:.3f}"


@pytest.mark.parametrize("directory", MORE_RUNS, ids=_name)
def test_further_runs_are_quoted_beside_the_first(directory: Path) -> None:
    """A further run's README gives each submission's score; the task's calibration README lists
    the run's first try and best of five, and the project README's row names both."""
    scores = _scores(directory)
    _assert_submission_table(directory, scores)
    first, best = f"{scores[0]:.3f}", f"{max(scores):.3f}"
    runs = (directory.parent / "README.md").read_text()
    assert re.search(rf"^\| \d+ \(`{directory.name}/`\) \| {first} \| {best} \|", runs, re.M), (first, best)
    row = _readme_row(_task(directory))
    assert f"calibration/{directory.name}/" in row and first in row and best in row, row


@pytest.mark.parametrize("directory", CALIBRATIONS, ids=_name)
def test_the_readmes_quote_the_recorded_scores(directory: Path) -> None:
    scores = _scores(directory)
    _assert_submission_table(directory, scores)
    task = directory.parent.name
    row = _readme_row(task)
    first_cell, best_cell = row.split("|")[4], row.split("|")[5]
    assert first_cell.strip().startswith(f"{scores[0]:.3f}"), row
    assert best_cell.strip().startswith(f"{max(scores):.3f}"), row
