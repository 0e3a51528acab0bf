"""shapes_crowd: the ragged files, their determinism, and the structure the task promises."""

from __future__ import annotations

import dataclasses
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from checks import assert_answers_not_in_public_files, assert_rebuild_identical_and_seeded

from pytest_weirdml.tasks import TaskData, build_data, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "shapes_crowd"
N_TRAIN, N_TEST, KINDS = 2000, 1000, 5


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built("shapes_crowd")


@pytest.fixture(scope="module")
def module() -> Any:
    """The builder's own module, for its outline sampler."""
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def load(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def clouds(data: TaskData, split: str) -> list[np.ndarray]:
    points, offsets = load(data, f"{split}_data.npy"), load(data, f"{split}_offsets.npy")
    return [points[a:b] for a, b in pairwise(offsets)]


def test_spec() -> None:
    spec = load_task(TASK_DIR)
    assert spec.markers == ("shapes", "points", "multi_label", "ragged")
    assert spec.public_files == (
        "train_data.npy", "train_offsets.npy", "train_labels.npy", "test_data.npy", "test_offsets.npy",
    )  # fmt: skip
    assert spec.reference_path.is_file() and (TASK_DIR / "calibrate.py").is_file()
    assert spec.prompt.count("```python") == 1
    assert "np.savetxt('results/test_preds.txt', preds, fmt='%d')" in spec.prompt
    for name in spec.public_files:
        assert f"`{name}`" in spec.prompt


def test_ragged_files_shapes_and_dtypes(data: TaskData) -> None:
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(load_task(TASK_DIR).public_files)
    for split, n in (("train", N_TRAIN), ("test", N_TEST)):
        points, offsets = load(data, f"{split}_data.npy"), load(data, f"{split}_offsets.npy")
        assert points.dtype == np.float32 and points.ndim == 2 and points.shape[1] == 2
        assert offsets.dtype == np.int64 and offsets.shape == (n + 1,)
        assert offsets[0] == 0 and offsets[-1] == len(points)
        assert np.all(np.diff(offsets) > 0), "every cloud holds points"
        assert np.isfinite(points).all() and points.min() >= 0.0 and points.max() <= 1.0
    labels, answers = load(data, "train_labels.npy"), data.answers()
    assert labels.dtype == np.int64 and labels.shape == (N_TRAIN, KINDS)
    assert np.issubdtype(answers.dtype, np.integer) and answers.shape == (N_TEST, KINDS)


def test_point_count_varies(data: TaskData) -> None:
    sizes = np.diff(load(data, "train_offsets.npy"))
    assert sizes.min() < 150 and sizes.max() > 1500
    assert len(np.unique(sizes)) > 500


def test_one_to_three_kinds_per_cloud(data: TaskData) -> None:
    for rows in (load(data, "train_labels.npy"), data.answers()):
        assert set(np.unique(rows)) == {0, 1}
        counts = np.bincount(rows.sum(axis=1), minlength=4)
        assert counts[0] == 0 and len(counts) == 4
        # Each count of shapes is common, and each kind shows up about as often as the others.
        assert np.all(counts[1:] > 0.25 * len(rows)), counts
        share = rows.mean(axis=0)
        assert np.all(np.abs(share - 0.4) < 0.06), share


def test_more_shapes_more_points(data: TaskData) -> None:
    """Points come from outlines at a density drawn per cloud, so the count grows with the shapes."""
    sizes = np.diff(load(data, "train_offsets.npy"))
    kinds = load(data, "train_labels.npy").sum(axis=1)
    medians = [np.median(sizes[kinds == k]) for k in (1, 2, 3)]
    assert medians[0] < medians[1] < medians[2]


def test_order_of_points_is_random(data: TaskData) -> None:
    """The first and last halves of each cloud cover the square alike."""
    first, last = np.zeros((8, 8)), np.zeros((8, 8))
    for cloud in clouds(data, "train")[:500]:
        half = len(cloud) // 2
        first += np.histogram2d(*cloud[:half].T, bins=8, range=[[0, 1], [0, 1]])[0]
        last += np.histogram2d(*cloud[half : 2 * half].T, bins=8, range=[[0, 1], [0, 1]])[0]
    assert np.corrcoef(first.ravel(), last.ravel())[0, 1] > 0.98


def test_outline_sampler(module: Any) -> None:
    """Evenly spaced arc lengths land evenly on the unit outline of each kind."""
    t = np.arange(1000) / 1000
    inner = {0: 1.0, 1: np.cos(np.pi / 4), 2: np.cos(np.pi / 3), 3: np.cos(np.pi / 5), 4: module.STAR_INNER}
    for kind in range(KINDS):
        points = module._at_arclength(kind, t)
        radius = np.linalg.norm(points, axis=1)
        assert radius.max() == pytest.approx(1.0, abs=1e-6)
        assert radius.min() == pytest.approx(inner[kind], abs=0.01)
        steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
        # Straight stretches keep the spacing; only steps across a corner come out shorter.
        assert np.median(steps) == pytest.approx(module.PERIMETER[kind] / 1000, rel=1e-3)


def test_answers_not_in_public_files(data: TaskData) -> None:
    assert not np.array_equal(load(data, "train_labels.npy")[:N_TEST], data.answers())
    assert_answers_not_in_public_files(data)


def test_rebuild_identical_and_seeded(data: TaskData, tmp_path: Path) -> None:
    spec = load_task(TASK_DIR)
    assert_rebuild_identical_and_seeded(spec, load_builder(spec), data, tmp_path, n_train=40, n_test=40)


def test_small_build_through_the_cache(tmp_path: Path) -> None:
    """The builder's sizes are parameters, and a cached build is reused as is."""
    spec = load_task(TASK_DIR)
    small = dataclasses.replace(spec, params={"n_train": 30, "n_test": 20})
    first = build_data(small, tmp_path)
    assert len(load(first, "train_offsets.npy")) == 31 and first.answers().shape == (20, KINDS)
    again = build_data(small, tmp_path)
    assert again.root == first.root
