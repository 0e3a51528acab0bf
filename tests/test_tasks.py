"""Tasks: loading task.toml, building the data once, scoring the predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import write_tiny_task

from pytest_weirdml.errors import TaskError
from pytest_weirdml.scoring import Score, score_predictions
from pytest_weirdml.tasks import build_data, load_task


def test_scoring_flattens_and_names_each_zero_reason() -> None:
    answers = np.array([[0, 1, 2], [2, 1, 0]])
    assert score_predictions(b"0 1 2\n2 1 1\n", answers) == Score(5 / 6)
    assert score_predictions(b"0\n1\n2\n2\n1\n0\n", answers) == Score(1.0)
    assert score_predictions(None, answers).zero_reason == "no predictions: results/test_preds.txt was not written"
    assert score_predictions(b"0 1\n", answers).zero_reason == "wrong shape: predictions (2,), expected (2, 3)"
    assert score_predictions(b"", answers).zero_reason == "no predictions: results/test_preds.txt is empty"
    assert score_predictions(b"1 2 3 4 5 nan\n", answers).zero_reason.endswith("values must be integers")
    assert score_predictions(b"1\n" * 6, answers, cap=4).zero_reason.endswith("larger than 4 bytes")


def test_task_loading_checks_types_and_names(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    spec = load_task(task)
    assert (spec.name, spec.time_limit_s, spec.iterations, spec.markers) == ("tiny", 20.0, 2, ("toy", "tabular"))
    (task / "task.toml").write_text((task / "task.toml").read_text().replace("iterations = 2", 'iterations = "2"'))
    with pytest.raises(TaskError, match="'iterations' must be int"):
        load_task(task)
    renamed = task.rename(tmp_path / "tasks" / "renamed")
    with pytest.raises(TaskError, match="name 'tiny' differs from the directory name 'renamed'"):
        load_task(renamed)


def test_a_task_may_take_its_reference_from_another_file(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    assert load_task(task).reference_path == task / "reference.py"
    shared = tmp_path / "tasks" / "shared_reference.py"
    (task / "reference.py").rename(shared)
    toml = task / "task.toml"
    toml.write_text('reference = "../shared_reference.py"\n' + toml.read_text())
    assert load_task(task).reference_path == shared
    toml.write_text(toml.read_text().replace("../shared_reference.py", "../missing.py"))
    with pytest.raises(TaskError, match=r"reference '\.\./missing\.py' not found"):
        load_task(task)


def test_data_is_built_once_and_hidden_answers_stay_private(tmp_path: Path) -> None:
    spec = load_task(write_tiny_task(tmp_path))
    first = build_data(spec, tmp_path / "cache")
    stamp = first.answers_path.stat().st_mtime_ns
    again = build_data(spec, tmp_path / "cache")
    assert again.root == first.root and again.answers_path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in first.public_dir.iterdir()) == ["test_x.npy", "train_x.npy", "train_y.npy"]
    assert first.answers_path.parent.stat().st_mode & 0o077 == 0
    assert first.answers().shape == (100,)


def test_builder_that_writes_other_files_is_a_task_error(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path)
    (task / "data.py").write_text((task / "data.py").read_text().replace('"test_x.npy"', '"test.npy"'))
    with pytest.raises(TaskError, match=r"wrote \['test.npy', 'train_x.npy', 'train_y.npy'\]"):
        build_data(load_task(task), tmp_path / "cache")


def test_a_malformed_file_is_named_with_a_short_clean_excerpt() -> None:
    answers = np.array([0, 1, 2])
    reason = score_predictions(b"cat\ndog\n", answers).zero_reason
    assert reason == "malformed predictions in results/test_preds.txt: line 1 holds 'cat', not a number"
    reason = score_predictions(b"1\n2\n" + b"x" * 5000 + b"\x00\x1b[2J\n", answers).zero_reason
    assert reason == "malformed predictions in results/test_preds.txt: line 3 holds 'xxxxxxxxxxxx...', not a number"
    reason = score_predictions(b"\x1b]0;evil\x07\n", answers).zero_reason
    assert reason is not None and "\x1b" not in reason and "\x07" not in reason
    reason = score_predictions(b"1 2\n3\n", answers).zero_reason
    assert reason == (
        "malformed predictions in results/test_preds.txt: line 2 has 1 values where the lines before it have 2"
    )


@pytest.mark.parametrize("limit", ["inf", "nan", "-1", "0"])
def test_a_task_time_limit_must_be_finite_and_positive(tmp_path: Path, limit: str) -> None:
    task = write_tiny_task(tmp_path)
    (task / "task.toml").write_text(
        (task / "task.toml").read_text().replace("time_limit_s = 20", f"time_limit_s = {limit}")
    )
    with pytest.raises(TaskError, match="'time_limit_s' must be a finite number > 0"):
        load_task(task)


def test_a_task_name_is_a_safe_name(tmp_path: Path) -> None:
    task = write_tiny_task(tmp_path, name="odd name")
    with pytest.raises(TaskError, match="a task name holds letters, digits"):
        load_task(task)
