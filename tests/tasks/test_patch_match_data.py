"""patch_match: the built files, their determinism, and what the task promises."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from checks import assert_answers_not_in_public_files

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, TaskSpec, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "patch_match"
N = {"train": 2000, "test": 1000}
K, HOLE, MARGIN = 5, 8, 2


@pytest.fixture(scope="module")
def spec() -> TaskSpec:
    return load_task(TASK_DIR)


@pytest.fixture(scope="module")
def build(spec: TaskSpec) -> Callable[..., np.ndarray]:
    return load_builder(spec)


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    try:
        return built("patch_match")
    except DataUnavailable as exc:
        pytest.skip(str(exc))


def load(data: TaskData, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pictures, holes, candidates and labels (the answers for the test split)."""
    arrays = [
        np.load(data.public_dir / f"{split}_{name}.npy", allow_pickle=False) for name in ("images", "holes", "patches")
    ]
    labels = np.load(data.public_dir / "train_labels.npy") if split == "train" else data.answers()
    return arrays[0], arrays[1], arrays[2], labels


def test_spec(spec: TaskSpec) -> None:
    assert set(spec.markers) == {"images", "matching"}
    assert spec.builder == TASK_DIR / "data.py" and spec.reference_path.is_file()
    assert spec.prompt.count("```python") == 1 and spec.prompt.count("```") == 2


@pytest.mark.parametrize("split", ["train", "test"])
def test_shapes_dtypes_ranges_and_balance(data: TaskData, spec: TaskSpec, split: str) -> None:
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(spec.public_files)
    images, holes, patches, labels = load(data, split)
    n = N[split]
    assert images.shape == (n, 28, 28) and images.dtype == np.float32
    assert holes.shape == (n, 2) and holes.dtype == np.int64
    assert patches.shape == (n, K, HOLE, HOLE) and patches.dtype == np.float32
    assert labels.shape == (n,) and np.issubdtype(labels.dtype, np.integer)
    assert np.bincount(labels, minlength=K).tolist() == [n // K] * K
    for arr in (images, patches):
        assert arr.min() >= 0.0 and arr.max() <= 1.0
        assert np.allclose(arr * 255, np.round(arr * 255), atol=1e-4)
    assert holes.min() >= MARGIN and holes.max() <= 28 - MARGIN - HOLE
    for image, (r, c) in zip(images, holes, strict=True):
        assert not image[r : r + HOLE, c : c + HOLE].any()


@pytest.mark.parametrize("split", ["train", "test"])
def test_candidates_are_altered_and_never_reused(data: TaskData, split: str) -> None:
    """No candidate, the right one included, is an exact copy of a square of any shown picture, and
    no candidate appears twice: matching pixels across samples tells nothing."""
    images, holes, patches, _labels = load(data, split)
    flat = np.round(patches.reshape(-1, HOLE * HOLE) * 255).astype(np.uint8)
    keys = [p.tobytes() for p in flat[flat.min(axis=1) < 255]]  # a square of white garment saturates
    assert len(set(keys)) == len(keys)
    for n in range(50):
        r, c = holes[n]
        window = images[:, r : r + HOLE, c : c + HOLE]
        for k in range(K):
            assert np.abs(window - patches[n, k]).max(axis=(1, 2)).min() > 0.0


@pytest.mark.parametrize("split", ["train", "test"])
def test_candidates_differ_yet_look_alike(data: TaskData, build: Callable[..., np.ndarray], split: str) -> None:
    """Each candidate differs from the others and holds garment; distractors are nearer the true
    patch than the same square cut from a random other picture, and match it in brightness and
    contrast. The squares were kept apart (``MIN_DIFF``) and on garment (``MIN_INK``) before the
    gain and noise, so after them a few pairs of bright squares come closer and a few dark ones
    lose some garment pixels."""
    images, holes, patches, labels = load(data, split)
    min_diff, ink, min_ink = (build.__globals__[name] for name in ("MIN_DIFF", "INK", "MIN_INK"))
    pairs = np.abs(patches[:, :, None] - patches[:, None, :]).mean(axis=(3, 4))
    off_diagonal = ~np.eye(K, dtype=bool)
    assert np.median(pairs[:, off_diagonal]) >= 2 * min_diff
    assert (pairs[:, off_diagonal] < min_diff).any(axis=1).mean() < 0.05
    assert ((patches > ink).mean(axis=(2, 3)) >= min_ink - 1 / 8).all()
    assert ((patches > ink).mean(axis=(2, 3)) < min_ink).mean() < 0.01
    n = len(images)
    true = patches[np.arange(n), labels]
    distractor_gap = (pairs[np.arange(n), labels].sum(axis=1) / (K - 1)).mean()
    rng = np.random.default_rng(0)
    others = rng.permutation(n)
    cut = [images[j, r : r + HOLE, c : c + HOLE] for j, (r, c) in zip(others, holes, strict=True)]
    random_gap = np.mean([np.abs(a - t).mean() for a, t in zip(cut, true, strict=True)])
    assert distractor_gap < 0.7 * random_gap
    for stat in (patches.mean(axis=(2, 3)), patches.std(axis=(2, 3))):
        for pick in (stat.argmax(axis=1), stat.argmin(axis=1)):
            assert np.mean(pick == labels) < 0.25  # chance is 0.2


def test_the_seams_alone_are_weak(data: TaskData) -> None:
    """Without learning, the candidate whose border continues the picture best is right well above
    chance but far from always."""
    images, holes, patches, labels = load(data, "test")
    costs = np.zeros((len(images), K))
    for n, (r, c) in enumerate(holes):
        p = patches[n]
        costs[n] += np.abs(p[:, 0, :] - images[n, r - 1, c : c + HOLE]).sum(1)
        costs[n] += np.abs(p[:, -1, :] - images[n, r + HOLE, c : c + HOLE]).sum(1)
        costs[n] += np.abs(p[:, :, 0] - images[n, r : r + HOLE, c - 1]).sum(1)
        costs[n] += np.abs(p[:, :, -1] - images[n, r : r + HOLE, c + HOLE]).sum(1)
    assert 0.3 < np.mean(costs.argmin(axis=1) == labels) < 0.6


def test_answers_not_in_public_files(data: TaskData) -> None:
    assert_answers_not_in_public_files(data)
    answers = data.answers()
    assert (answers[1:] == answers[:-1]).mean() < 0.35


def test_deterministic_and_seed_dependent(
    spec: TaskSpec, build: Callable[..., np.ndarray], data: TaskData, tmp_path: Path
) -> None:
    fresh, other = tmp_path / "fresh", tmp_path / "other"
    fresh.mkdir()
    other.mkdir()
    assert np.array_equal(build(fresh, spec.seed), data.answers())
    for name in spec.public_files:
        assert (fresh / name).read_bytes() == (data.public_dir / name).read_bytes(), name
    answers = build(other, spec.seed + 1, n_train=50, n_test=50)
    assert not np.array_equal(answers, data.answers()[:50])
    for name in ("train_images.npy", "test_images.npy", "test_patches.npy"):
        assert not np.array_equal(np.load(other / name), np.load(fresh / name)[:50]), name


def test_missing_fashion_mnist_raises_with_the_fix(
    build: Callable[..., np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("WEIRDML_FASHION_MNIST_DIR", str(empty))
    monkeypatch.setitem(build.__globals__, "FASHION_SYSTEM_DIR", tmp_path / "no-such-dir")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DataUnavailable) as info:
        build(out, 0)
    assert "apt-get install dataset-fashion-mnist" in str(info.value)
    assert "WEIRDML_FASHION_MNIST_DIR" in str(info.value)
    assert not any(out.iterdir())
