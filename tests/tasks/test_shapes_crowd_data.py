"""shapes_crowd: the ragged files and the structure the task promises."""

from __future__ import annotations

import dataclasses
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_weirdml.tasks import TaskData, build_data, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "shapes_crowd"
N_TRAIN, N_TEST, KINDS = 2000, 1000, 5


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built("shapes_crowd")


@pytest.fixture(scope="module")
def module() -> Any:
    """The builder's own module, for its outline sampler and its clouds with their owners."""
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
    assert sizes.min() < 500 and sizes.max() > 2500
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


def test_halves_of_each_cloud_cover_the_square_alike(data: TaskData) -> None:
    """The runs of outline points lie anywhere in the file, so the first and last halves of each
    cloud cover the square alike."""
    first, last = np.zeros((8, 8)), np.zeros((8, 8))
    for cloud in clouds(data, "train")[:500]:
        half = len(cloud) // 2
        first += np.histogram2d(*cloud[:half].T, bins=8, range=[[0, 1], [0, 1]])[0]
        last += np.histogram2d(*cloud[half : 2 * half].T, bins=8, range=[[0, 1], [0, 1]])[0]
    assert np.corrcoef(first.ravel(), last.ravel())[0, 1] > 0.98


@pytest.fixture(scope="module")
def owned(module: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """200 clouds straight from the builder, with the shape each point is on (-1 clutter, -2 noise)."""
    rng = np.random.default_rng(11)
    return [module._cloud(rng) for _ in range(200)]


def test_clouds_from_the_builder_are_what_the_files_hold(module: Any, data: TaskData) -> None:
    """The first training clouds of a build are the builder's own clouds drawn in turn."""
    train_seq, _ = np.random.SeedSequence(load_task(TASK_DIR).seed).spawn(2)
    rng = np.random.default_rng(train_seq)
    for cloud, row in zip(clouds(data, "train")[:5], load(data, "train_labels.npy")[:5], strict=True):
        points, present, owner = module._cloud(rng)
        np.testing.assert_array_equal(cloud, points.astype(np.float32))
        np.testing.assert_array_equal(row, present)
        assert set(np.unique(owner[owner >= 0])) == set(range(present.sum()))


def test_outline_points_are_a_minority(owned: list) -> None:  # type: ignore[type-arg]
    """Clutter and noise outnumber the outline points in most clouds."""
    shares = np.array([np.mean(owner >= 0) for _, _, owner in owned])
    assert 0.25 < shares.mean() < 0.5 and np.mean(shares < 0.5) > 0.8, shares.mean()
    clutter = np.array([np.mean(owner == -1) for _, _, owner in owned])
    assert clutter.mean() > 0.3 and np.mean(clutter > 0) == 1.0


def test_outline_points_follow_each_other_in_the_files(owned: list) -> None:  # type: ignore[type-arg]
    """The outline points of a shape are written in runs along the outline: most are followed by
    the next point of the same shape, close by; clutter and noise points are written one at a
    time in random order, so their file neighbours are far."""
    follows, outline, near_outline, near_other = 0, 0, [], []
    for points, _, owner in owned:
        step = np.linalg.norm(np.diff(points, axis=0), axis=1)
        same = (owner[:-1] >= 0) & (owner[:-1] == owner[1:])
        follows += same.sum()
        outline += (owner >= 0).sum()
        nearest = np.minimum(np.r_[np.inf, step], np.r_[step, np.inf])
        near_outline.append(nearest[owner >= 0] < 0.03)
        near_other.append(nearest[owner < 0] < 0.03)
        assert np.median(step[same]) < 0.015
    assert 0.8 < follows / outline < 0.95
    assert np.concatenate(near_outline).mean() > 0.97
    assert np.concatenate(near_other).mean() < 0.06


def test_density_alone_does_not_tell_outline_from_clutter(owned: list) -> None:  # type: ignore[type-arg]
    """Clutter lies along lines, arcs and stretches of outlines at the outlines' own density: the
    distance to a point's 8th nearest neighbour ranks outline above clutter points little better
    than a coin (area under the curve near one half)."""
    from scipy.spatial import cKDTree

    outline, clutter = [], []
    for points, _, owner in owned:
        kth = cKDTree(points).query(points, k=9)[0][:, -1]
        outline.append(kth[owner >= 0])
        clutter.append(kth[owner == -1])
    a, b = np.concatenate(outline), np.concatenate(clutter)
    ranks = np.argsort(np.argsort(np.concatenate([a, b])))
    auc = 1 - (ranks[: len(a)].mean() - (len(a) - 1) / 2) / len(b)  # closer neighbours: outline
    assert 0.4 < auc < 0.65, auc


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


def test_small_build_through_the_cache(tmp_path: Path) -> None:
    """The builder's sizes are parameters, and a cached build is reused as is."""
    spec = load_task(TASK_DIR)
    small = dataclasses.replace(spec, params={"n_train": 30, "n_test": 20})
    first = build_data(small, tmp_path)
    assert len(load(first, "train_offsets.npy")) == 31 and first.answers().shape == (20, KINDS)
    again = build_data(small, tmp_path)
    assert again.root == first.root
