"""splash_rules: the built pictures, their determinism, and the rules the task promises."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from checks import assert_answers_not_in_public_files, assert_rebuild_identical_and_seeded
from scipy import ndimage
from scipy.stats import ks_2samp, spearmanr

from pytest_weirdml.tasks import TaskData, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "splash_rules"
N_TRAIN, N_TEST, SIZE, CLASSES = 2000, 1000, 64, 4


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built("splash_rules")


@pytest.fixture(scope="module")
def module() -> Any:
    """The builder's own module, for its droplet renderer and its size-distance coupling."""
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def load(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def paint(images: np.ndarray) -> np.ndarray:
    """Per pixel, how far its colour is from the paper's (the median of the picture's border)."""
    rgb = images.astype(np.float64) / 255
    border = np.concatenate([rgb[:, 0], rgb[:, -1], rgb[:, :, 0], rgb[:, :, -1]], axis=1)
    return np.linalg.norm(rgb - np.median(border, axis=1)[:, None, None], axis=3)


def radial_skew(alpha: np.ndarray, centre: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Distance of a region's centroid from ``centre``, and the skewness of its paint along that line."""
    ys, xs = np.nonzero(mask)
    w = alpha[ys, xs]
    cy, cx = np.average(ys, weights=w), np.average(xs, weights=w)
    u = np.array([cy, cx]) - centre
    dist = float(np.linalg.norm(u))
    t = ((ys - cy) * u[0] + (xs - cx) * u[1]) / max(dist, 1e-9)
    return dist, float(np.average(t**3, weights=w) / max(np.average(t**2, weights=w), 1e-9) ** 1.5)


def measure(image_paint: np.ndarray) -> tuple[float, float]:
    """Rank correlation of droplet size with distance, and the mean skewness along the line of flight."""
    alpha = np.clip(image_paint / np.quantile(image_paint, 0.995), 0, 1)
    labels, n = ndimage.label(alpha > 0.35)
    mass = ndimage.sum_labels(alpha, labels, np.arange(1, n + 1))
    blot = int(np.argmax(mass)) + 1
    centre = np.array(ndimage.center_of_mass(alpha, labels, blot))
    rows = [(*radial_skew(alpha, centre, labels == k), mass[k - 1]) for k in range(1, n + 1) if k != blot]
    dist, skew, size = np.array([r for r in rows if r[2] >= 1.0]).T
    return float(spearmanr(size, dist).statistic), float(np.mean(skew))


def test_spec() -> None:
    spec = load_task(TASK_DIR)
    assert spec.markers == ("images", "geometry")
    assert spec.public_files == ("train_data.npy", "train_labels.npy", "test_data.npy")
    assert spec.reference_path.is_file() and (TASK_DIR / "calibrate.py").is_file()
    assert spec.prompt.count("```python") == 1
    assert "np.savetxt('results/test_preds.txt', preds, fmt='%d')" in spec.prompt
    for name in spec.public_files:
        assert f"`{name}`" in spec.prompt


def test_files_shapes_dtypes_and_balance(data: TaskData) -> None:
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(load_task(TASK_DIR).public_files)
    train, test = load(data, "train_data.npy"), load(data, "test_data.npy")
    assert train.shape == (N_TRAIN, SIZE, SIZE, 3) and train.dtype == np.uint8
    assert test.shape == (N_TEST, SIZE, SIZE, 3) and test.dtype == np.uint8
    labels, answers = load(data, "train_labels.npy"), data.answers()
    assert labels.shape == (N_TRAIN,) and labels.dtype == np.int64
    assert answers.shape == (N_TEST,) and np.issubdtype(answers.dtype, np.integer)
    assert np.bincount(labels, minlength=CLASSES).tolist() == [N_TRAIN // CLASSES] * CLASSES
    assert np.bincount(answers, minlength=CLASSES).tolist() == [N_TEST // CLASSES] * CLASSES


def test_answers_not_in_public_files(data: TaskData) -> None:
    assert np.mean(load(data, "train_labels.npy")[:N_TEST] == data.answers()) < 0.4
    assert_answers_not_in_public_files(data)


def test_rebuild_identical_and_seeded(data: TaskData, tmp_path: Path) -> None:
    spec = load_task(TASK_DIR)
    assert_rebuild_identical_and_seeded(spec, load_builder(spec), data, tmp_path, n_train=24, n_test=24)


def test_amount_and_place_of_paint_do_not_tell_the_rule(data: TaskData) -> None:
    """Class-mean pictures of the paint are alike: where and how much paint lies says nothing."""
    x = paint(load(data, "train_data.npy")) > 0.25
    y = load(data, "train_labels.npy")
    amount = x.mean(axis=(1, 2))
    for c in range(1, CLASSES):
        assert ks_2samp(amount[y == 0], amount[y == c]).pvalue > 0.001
    pooled = x.reshape(len(x), 8, 8, 8, 8).mean(axis=(2, 4)).reshape(len(x), -1)
    centroids = np.stack([pooled[:1500][y[:1500] == c].mean(axis=0) for c in range(CLASSES)])
    preds = ((pooled[1500:, None] - centroids[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert np.mean(preds == y[1500:]) < 0.35


def test_size_distance_coupling(module: Any) -> None:
    """Sizes and distances keep their marginals in both directions of the coupling; only the pairing flips."""
    heads = {}
    for sign in (1, -1):
        rng = np.random.default_rng(3)
        pairs = [module._flight(rng, 20, sign) for _ in range(200)]
        rhos = [spearmanr(d, h).statistic for d, h in pairs]
        assert sign * np.mean(rhos) > 0.6 and np.mean(np.sign(rhos) == sign) > 0.97
        heads[sign] = np.concatenate([h for _, h in pairs])
        assert heads[sign].min() >= module.HEAD[0] and heads[sign].max() <= module.HEAD[1]
    assert ks_2samp(heads[1], heads[-1]).pvalue > 0.01


def test_tail_side_is_the_skewness_sign(module: Any) -> None:
    for outward in (True, False):
        alpha = np.zeros((SIZE, SIZE))
        module._droplet(alpha, np.array([40.0, 32.0]), np.array([1.0, 0.0]), 1.6, 4.0, outward)
        # The flight runs along +x from (32, 32); the picture is indexed (row = y, column = x).
        _, skew = radial_skew(alpha, np.array([32.0, 32.0]), alpha > 0)
        assert (skew > 0.2) if outward else (skew < -0.2)


def test_rules_are_measurable_in_the_pictures(data: TaskData) -> None:
    """The two factors of the label show in simple measurements of the rendered test pictures."""
    x, y = paint(load(data, "test_data.npy")[:400]), data.answers()[:400]
    size_rank, skew = np.array([measure(img) for img in x]).T
    assert np.mean((size_rank < 0) == (y >= 2)) > 0.9
    assert np.mean((skew < 0) == (y % 2 == 1)) > 0.9
