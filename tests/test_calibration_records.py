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


def _scores(directory: Path) -> list[float]:
    """The one recorded run's iteration scores, read as the report reads them."""
    (run,) = read_runs([directory])
    return [iteration.score for iteration in run.iterations]


def test_there_are_calibration_records() -> None:
    assert len(CALIBRATIONS) >= 5


@pytest.mark.parametrize("directory", CALIBRATIONS, ids=lambda p: p.parent.name)
def test_the_records_rebuild_the_shipped_summary(directory: Path, tmp_path: Path) -> None:
    build_reports([directory], tmp_path)
    rebuilt = json.loads((tmp_path / "summary.json").read_text())
    shipped = json.loads((directory / "summary.json").read_text())
    assert rebuilt["models"] == shipped["models"]
    assert rebuilt["tasks"] == [directory.parent.name]


@pytest.mark.parametrize("directory", CALIBRATIONS, ids=lambda p: p.parent.name)
def test_the_readmes_quote_the_recorded_scores(directory: Path) -> None:
    scores = _scores(directory)
    assert len(scores) == 5
    table = (directory / "README.md").read_text()
    for number, score in enumerate(scores, start=1):
        assert re.search(rf"^\| {number} \| {score:.3f} \|", table, re.M), f"submission {number}: {score:.3f}"
    task = directory.parent.name
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith(f"| {task} |"))
    first_cell, best_cell = row.split("|")[4], row.split("|")[5]
    assert first_cell.strip().startswith(f"{scores[0]:.3f}"), row
    assert best_cell.strip().startswith(f"{max(scores):.3f}"), row
