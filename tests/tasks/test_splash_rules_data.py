"""splash_rules: the built pictures and the rules the task promises."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import ndimage
from scipy.stats import ks_2samp

from pytest_weirdml.tasks import TaskData, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "splash_rules"
N_TRAIN, N_TEST, SIZE, CLASSES = 2000, 1000, 64, 4


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built("splash_rules")


@pytest.fixture(scope="module")
def module() -> Any:
    """The builder's own module, for where its rules land the droplets."""
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def load(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def paint(images: np.ndarray) -> np.ndarray:
    """Per pixel, how far its colour is from the paper's (the median of the picture's border)."""
    rgb = images.astype(np.float64) / 255
    border = np.concatenate([rgb[:, 0], rgb[:, -1], rgb[:, :, 0], rgb[:, :, -1]], axis=1)
    return np.linalg.norm(rgb - np.median(border, axis=1)[:, None, None], axis=3)


def gap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between directions ``a`` and ``b`` in radians, in [0, pi] (wrapped)."""
    return np.abs(np.angle(np.exp(1j * (a - b))))


def twins(moved: np.ndarray, theta: np.ndarray, tolerance: float = 0.05) -> np.ndarray:
    """Share of droplets (directions from the centre) whose moved direction in ``moved`` (..., n)
    lies within ``tolerance`` radians of another droplet's direction. Copies fly their own
    distances, so only their directions pair up."""
    d = gap(moved[..., :, None], theta) + np.eye(len(theta)) * 1e9
    return np.mean(d.min(axis=-1) < tolerance, axis=-1)


def droplet_offsets(image_paint: np.ndarray) -> np.ndarray:
    """Centres of the droplets in a picture, as complex offsets from the blot's centre."""
    labels, n = ndimage.label(image_paint > 0.5 * np.quantile(image_paint, 0.995))
    index = np.arange(1, n + 1)
    area = ndimage.sum_labels(np.ones_like(image_paint), labels, index)
    centres = np.array(ndimage.center_of_mass(image_paint, labels, index))
    points = centres[:, 1] + 1j * centres[:, 0]
    blot = int(np.argmax(area))
    return points[(index != blot + 1) & (area >= 2)] - points[blot]


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


def turned(theta: np.ndarray, turn: float, tolerance: float = 0.05) -> float:
    return float(twins(theta + 2 * np.pi * turn, theta, tolerance))


def test_landings_follow_the_rule(module: Any) -> None:
    """Copies fly in the directions the rule gives; the number of droplets and their distances are
    alike in every rule."""
    rng = np.random.default_rng(5)
    axes = np.linspace(0, np.pi, 180, endpoint=False)
    counts, dists, shares = {}, {}, {}
    for label in range(CLASSES):
        landings = [module._landings(rng, label, 5.0) for _ in range(300)]
        counts[label] = [len(x) for x in landings]
        offsets = [np.array([w[0] + 1j * w[1] for w, _, _ in x]) for x in landings]
        dists[label] = np.abs(np.concatenate(offsets))
        theta = [np.angle(z) for z in offsets]
        shares[label] = np.array(
            [(twins(2 * axes[:, None] - t, t).max(), turned(t, 1 / 2), turned(t, 1 / 3)) for t in theta]
        ).mean(axis=0)
    # Twins in direction under the best of 180 mirror lines, half a turn away, a third of a turn away.
    # Droplets are many, so about a quarter find a twin by chance (over half under the best line).
    assert shares[0][0] > 0.74 and shares[1][1] > 0.68 and shares[2][2] > 0.68
    assert shares[3][0] < 0.67 and shares[3][1] < 0.3 and shares[3][2] < 0.3
    for label in range(3):
        assert ks_2samp(counts[label], counts[3]).pvalue > 0.001
        assert ks_2samp(dists[label], dists[3]).pvalue > 0.001


def test_copies_fly_their_own_distances(module: Any) -> None:
    """Twins half a turn apart land at independent distances: the log of their distance ratio
    spreads as widely as the jitter says, so matching positions finds few of them."""
    rng = np.random.default_rng(6)
    ratios = []
    for _ in range(200):
        z = np.array([w[0] + 1j * w[1] for w, _, _ in module._landings(rng, 1, 5.0)])
        d = gap(np.angle(z)[None], np.angle(z)[:, None] + np.pi)
        d += np.eye(len(z)) * 1e9
        twin = d.argmin(axis=1)
        close = d.min(axis=1) < 0.03
        ratios.append(np.log(np.abs(z[twin][close]) / np.abs(z[close])))
    spread = np.std(np.concatenate(ratios))
    assert 0.8 * np.sqrt(2) * module.JITTER < spread < 1.25 * np.sqrt(2) * module.JITTER


def test_directions(module: Any) -> None:
    throws = np.array([0.3, 2.0])
    assert np.allclose(module._directions(0, throws, 1.0), [[0.3, 1.7], [2.0, 0.0]])
    assert np.allclose(module._directions(1, throws, 1.0), throws[:, None] + [0, np.pi])
    assert np.allclose(module._directions(2, throws, 1.0), throws[:, None] + 2 * np.pi * np.arange(3) / 3)
    assert np.allclose(module._directions(3, throws, 1.0), throws[:, None])


def test_rules_are_measurable_in_the_pictures(data: TaskData) -> None:
    """Twins in direction under a half or a third of a turn show in the rendered test pictures."""
    x, y = paint(load(data, "test_data.npy")[:400]), data.answers()[:400]
    theta = [np.angle(z) for z in map(droplet_offsets, x)]
    half, third = np.array([(turned(t, 1 / 2, 0.12), turned(t, 1 / 3, 0.12)) for t in theta]).T
    assert np.mean(half[y == 1]) > np.mean(half[y != 1]) + 0.2
    assert np.mean(third[y == 2]) > np.mean(third[y != 2]) + 0.2
