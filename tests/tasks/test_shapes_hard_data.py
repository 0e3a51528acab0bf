"""shapes_hard: the shared builder in hard mode, its files and promised behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from test_shapes_easy_data import (
    TASKS_DIR,
    check_files_and_balance,
    load,
    nearest_centroid_accuracy,
)

from pytest_weirdml.tasks import TaskData, load_task

TASK = "shapes_hard"
N, POINTS, CLASSES = 1000, 512, 5


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built(TASK)


def test_spec_shares_the_easy_builder() -> None:
    spec = load_task(TASKS_DIR / TASK)
    assert spec.markers == ("shapes", "points", "hard")
    assert spec.public_files == ("train_data.npy", "train_flags.npy", "test_data.npy")
    assert spec.builder == TASKS_DIR / "shapes_easy" / "data.py"
    assert not (TASKS_DIR / TASK / "data.py").exists()
    assert dict(spec.params) == {"hard": True}
    assert spec.reference_path.is_file()


def test_files_shapes_dtypes_and_balance(data: TaskData) -> None:
    check_files_and_balance(data)


def test_noise_reaches_up_to_0_3_outside(data: TaskData) -> None:
    """As in the published examples: some clouds hold points up to about 0.3 outside [0, 1]."""
    for name in ("train_data.npy", "test_data.npy"):
        points = load(data, name)
        assert np.isfinite(points).all()
        assert points.min() >= -0.3 and points.max() <= 1.3
        beyond = np.maximum(-points, points - 1).max(axis=(1, 2))
        assert 0.05 < np.mean(beyond > 0.1) < 0.6
        assert np.mean(beyond > 0.2) > 0.02
        # Only a small share of all points lies outside.
        assert 0 < ((points < 0) | (points > 1)).any(axis=2).mean() < 0.08


def test_differs_from_easy(built) -> None:  # type: ignore[no-untyped-def]
    easy, hard = built("shapes_easy"), built(TASK)
    assert not np.array_equal(load(easy, "train_data.npy"), load(hard, "train_data.npy"))
    assert not np.array_equal(easy.answers(), hard.answers())


def test_answers_not_in_public_files(data: TaskData) -> None:
    answers = data.answers()
    assert np.mean(load(data, "train_flags.npy") == answers) < 0.4
    assert np.mean(answers == np.arange(N) % CLASSES) < 0.4


def test_random_pose_defeats_a_simple_model(data: TaskData) -> None:
    """Class-mean histograms, which do well on shapes_easy, are near chance here."""
    assert nearest_centroid_accuracy(data) < 0.3


def test_shapes_are_spread_over_the_square(data: TaskData) -> None:
    """Random positions: the densest cell of each cloud lands all over the square."""
    train = load(data, "train_data.npy").clip(0.0, 0.999)  # 1 - 1e-9 is 1.0 in float32
    cells = (train * 4).astype(np.int64)
    flat = cells[..., 1] * 4 + cells[..., 0]
    densest = np.array([np.bincount(row, minlength=16).argmax() for row in flat])
    assert np.bincount(densest, minlength=16).min() >= 20
