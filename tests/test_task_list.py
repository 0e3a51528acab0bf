"""`weirdml tasks`: every task with its family and tier, markers, chance and reference from its
saved check, and what it asks; a directory without tasks says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_weirdml.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_lists_every_bundled_task_with_its_tier(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", str(ROOT / "tasks")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["task", "family,"]
    names = sorted(p.parent.name for p in (ROOT / "tasks").glob("*/task.toml"))
    assert [line.split()[0] for line in out[1:-1]] == names
    parity = next(line for line in out if line.startswith("hidden_parity "))
    # Chance and the reference on the task's seed come from its saved check.
    assert "hidden_parity, hard" in parity and "0.500      0.939" in parity
    assert out[-1].startswith(f"{len(names)} tasks; run some with pytest -k NAME or -m MARKER")


def test_json_rows_and_a_directory_without_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", str(ROOT / "tasks"), "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["shapes_easy"]["family"] == "shapes" and rows["shapes_easy"]["tier"] == "easy"
    assert rows["shapes_easy"]["markers"] == ["shapes", "points", "easy"]
    assert rows["hidden_parity"]["reference"] == 0.939
    assert main(["tasks", str(tmp_path)]) == 2
    assert "no task.toml in its subdirectories" in capsys.readouterr().err
