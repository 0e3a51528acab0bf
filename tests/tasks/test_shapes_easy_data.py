"""shapes_easy: the built files and the behaviour the task promises."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.tasks import TaskData, load_builder, load_task

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"

TASK = "shapes_easy"
N, POINTS, CLASSES = 1000, 512, 5


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built(TASK)


def load(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def histograms(points: np.ndarray, bins: int = 16) -> np.ndarray:
    """Square-rooted 2-D counts over the unit square, one flat row per cloud."""
    idx = np.clip((points * bins).astype(np.int64), 0, bins - 1)
    flat = idx[..., 1] * bins + idx[..., 0]
    counts = np.stack([np.bincount(row, minlength=bins * bins) for row in flat])
    return np.sqrt(counts)


def nearest_centroid_accuracy(data: TaskData) -> float:
    """A deliberately simple model: class-mean histograms, test clouds go to the nearest mean."""
    train = histograms(load(data, "train_data.npy"))
    flags = load(data, "train_flags.npy")
    test = histograms(load(data, "test_data.npy"))
    centroids = np.stack([train[flags == c].mean(axis=0) for c in range(CLASSES)])
    preds = ((test[:, None, :] - centroids[None]) ** 2).sum(axis=2).argmin(axis=1)
    return float(np.mean(preds == data.answers()))


def test_spec() -> None:
    spec = load_task(TASKS_DIR / TASK)
    assert spec.markers == ("shapes", "points", "easy")
    assert spec.public_files == ("train_data.npy", "train_flags.npy", "test_data.npy")
    assert spec.builder == TASKS_DIR / TASK / "data.py"
    assert dict(spec.params) == {}
    assert spec.reference_path.is_file()


def check_files_and_balance(data: TaskData) -> None:
    """Both shapes tasks: file shapes and dtypes, and exactly balanced classes."""
    train, flags, test = (load(data, f) for f in ("train_data.npy", "train_flags.npy", "test_data.npy"))
    assert train.shape == (N, POINTS, 2) and np.issubdtype(train.dtype, np.floating)
    assert test.shape == (N, POINTS, 2) and np.issubdtype(test.dtype, np.floating)
    assert flags.shape == (N,) and np.issubdtype(flags.dtype, np.integer)
    answers = data.answers()
    assert answers.shape == (N,) and np.issubdtype(answers.dtype, np.integer)
    assert np.bincount(flags, minlength=CLASSES).tolist() == [200] * CLASSES
    assert np.bincount(answers, minlength=CLASSES).tolist() == [200] * CLASSES


def test_files_shapes_dtypes_and_balance(data: TaskData) -> None:
    check_files_and_balance(data)


def test_points_inside_unit_square(data: TaskData) -> None:
    for name in ("train_data.npy", "test_data.npy"):
        points = load(data, name)
        assert np.isfinite(points).all()
        assert points.min() >= 0.0 and points.max() <= 1.0


def test_answers_not_in_public_files(data: TaskData) -> None:
    answers = data.answers()
    flags = load(data, "train_flags.npy")
    assert np.mean(flags == answers) < 0.4
    # The test order does not give them away: it does not cycle through the classes.
    assert np.mean(answers == np.arange(N) % CLASSES) < 0.4


def test_order_of_points_is_random(data: TaskData) -> None:
    """The first and last halves of each cloud hold the same share of outline and noise."""
    train = load(data, "train_data.npy")
    first = histograms(train[:, : POINTS // 2]).sum(axis=0)
    last = histograms(train[:, POINTS // 2 :]).sum(axis=0)
    assert np.corrcoef(first, last)[0, 1] > 0.98


def test_simple_model_finds_the_fixed_shapes(data: TaskData) -> None:
    """Shapes sit at one place, so even class-mean histograms tell them apart well."""
    assert nearest_centroid_accuracy(data) > 0.85


def test_raw_coordinates_carry_no_position_signal(data: TaskData) -> None:
    """Each coordinate slot, averaged per class, is the same: a model on raw slots has nothing to use."""
    train, flags = load(data, "train_data.npy"), load(data, "train_flags.npy")
    per_class = np.stack([train[flags == c].mean(axis=0) for c in range(CLASSES)])
    assert np.abs(per_class - per_class.mean(axis=0)).max() < 0.1


def test_most_points_lie_on_the_outline(data: TaskData) -> None:
    """As in the published examples: in most clouds most points follow the shape's outline."""
    module = sys.modules[load_builder(load_task(TASKS_DIR / TASK)).__module__]
    train, flags = load(data, "train_data.npy"), load(data, "train_flags.npy")
    shares = []
    for cloud, label in zip(train[:200], flags[:200], strict=True):
        outline = module._on_outline(int(label), np.arange(2000) / 2000) * module.EASY_RADIUS[label] + 0.5
        nearest = np.sqrt(((cloud[:, None, :] - outline[None]) ** 2).sum(axis=2)).min(axis=1)
        shares.append(np.mean(nearest < 0.03))
    assert np.median(shares) > 0.6
    assert np.mean(np.array(shares) > 0.5) > 0.6


def _density_near(points: np.ndarray, xy: tuple[float, float], radius: float = 0.03) -> float:
    return float(np.mean(np.sqrt(((points - np.array(xy)) ** 2).sum(axis=-1)) < radius))


def test_published_sizes_and_orientations(data: TaskData) -> None:
    """Circle radius 0.3; pentagon and star point a vertex right at radius 0.4; triangle points up."""
    train, flags = load(data, "train_data.npy"), load(data, "train_flags.npy")
    circle = train[flags == 0].reshape(-1, 2)
    radius = np.sqrt(((circle - 0.5) ** 2).sum(axis=1))
    counts, edges = np.histogram(radius, bins=np.arange(0.0, 0.72, 0.02))
    assert 0.28 <= edges[counts.argmax()] <= 0.30
    for label in (3, 4):
        points = train[flags == label].reshape(-1, 2)
        # A vertex at (0.9, 0.5), none at (0.1, 0.5).
        assert _density_near(points, (0.9, 0.5)) > 5 * _density_near(points, (0.1, 0.5))
    triangle = train[flags == 2].reshape(-1, 2)
    top, bottom = 0.5 + 0.5 / np.sqrt(3), 0.5 - 0.5 / np.sqrt(3)
    assert _density_near(triangle, (0.5, top)) > 5 * _density_near(triangle, (0.5, bottom))
    square = train[flags == 1].reshape(-1, 2)
    # Axis-aligned with side 0.6: a corner at (0.2, 0.2), none where a diamond would have one.
    assert _density_near(square, (0.2, 0.2)) > 5 * _density_near(square, (0.5, 0.5 - 0.3 * np.sqrt(2)))
