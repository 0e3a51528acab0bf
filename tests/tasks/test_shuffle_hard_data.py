from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, TaskSpec, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "shuffle_hard"
N_TRAIN, N_TEST = 1000, 1000
H_SEAMS = [(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8)]
V_SEAMS = [(0, 3), (1, 4), (2, 5), (3, 6), (4, 7), (5, 8)]


@pytest.fixture(scope="module")
def spec() -> TaskSpec:
    return load_task(TASK_DIR)


@pytest.fixture(scope="module")
def build(spec: TaskSpec) -> Callable[..., np.ndarray]:
    return load_builder(spec)


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    try:
        return built("shuffle_hard")
    except DataUnavailable as exc:
        pytest.skip(str(exc))


def _load(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def _grid(patches: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N, 9, 3, 9, 9) shuffled patches -> the same patches in grid order."""
    grid = np.empty_like(patches)
    np.put_along_axis(grid, labels[:, :, None, None, None], patches, axis=1)
    return grid


def _seam_cost(grid: np.ndarray) -> np.ndarray:
    """Mean absolute step across the 12 inner seams of each sample, (N,)."""
    h = [np.abs(grid[:, a, :, :, -1] - grid[:, b, :, :, 0]).mean((-1, -2)) for a, b in H_SEAMS]
    v = [np.abs(grid[:, a, :, -1, :] - grid[:, b, :, 0, :]).mean((-1, -2)) for a, b in V_SEAMS]
    return np.mean(h + v, axis=0)


def _is_permutation_rows(labels: np.ndarray) -> bool:
    return bool(np.array_equal(np.sort(labels, axis=1), np.broadcast_to(np.arange(9), labels.shape)))


def test_spec_shares_the_easy_builder(spec: TaskSpec) -> None:
    assert spec.name == "shuffle_hard"
    assert set(spec.markers) == {"images", "permutation", "hard"}
    assert spec.public_files == ("train_data.npy", "train_labels.npy", "test_data.npy")
    assert spec.builder == (TASK_DIR.parent / "shuffle_easy" / "data.py").resolve()
    assert dict(spec.params) == {"variant": "hard"}
    assert spec.prompt.count("```python") == 1 and spec.prompt.count("```") == 2


def test_shapes_dtypes_and_ranges(data: TaskData) -> None:
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(load_task(TASK_DIR).public_files)
    x, y, xt = _load(data, "train_data.npy"), _load(data, "train_labels.npy"), _load(data, "test_data.npy")
    answers = data.answers()
    assert x.shape == (N_TRAIN, 9, 3, 9, 9) and x.dtype == np.float32
    assert xt.shape == (N_TEST, 9, 3, 9, 9) and xt.dtype == np.float32
    assert y.shape == (N_TRAIN, 9) and y.dtype == np.int64
    assert answers.shape == (N_TEST, 9) and np.issubdtype(answers.dtype, np.integer)
    for arr in (x, xt):
        assert arr.min() >= 0.0 and arr.max() <= 1.0
        assert np.allclose(arr * 255, np.round(arr * 255), atol=1e-4)
        # Colour photographs: the channels differ.
        assert np.abs(arr[:, :, 0] - arr[:, :, 2]).mean() > 0.02


def test_every_label_row_is_a_permutation(data: TaskData) -> None:
    assert _is_permutation_rows(_load(data, "train_labels.npy"))
    assert _is_permutation_rows(data.answers())


@pytest.mark.parametrize("which", ["train", "test"])
def test_label_frequencies_are_uniform(data: TaskData, which: str) -> None:
    labels = _load(data, "train_labels.npy") if which == "train" else data.answers()
    n = len(labels)
    counts = np.stack([np.bincount(labels[:, i], minlength=9) for i in range(9)])
    sd = np.sqrt(n * (1 / 9) * (8 / 9))
    assert np.all(np.abs(counts - n / 9) < 5 * sd), counts
    assert abs((labels == np.arange(9)).mean() - 1 / 9) < 0.03


@pytest.mark.parametrize("which", ["train", "test"])
def test_reassembled_images_are_smooth(data: TaskData, which: str) -> None:
    x = _load(data, f"{which}_data.npy")
    labels = _load(data, "train_labels.npy") if which == "train" else data.answers()
    true_cost = _seam_cost(_grid(x, labels))
    rng = np.random.default_rng(0)
    random_cost = _seam_cost(_grid(x, np.stack([rng.permutation(9) for _ in range(len(x))])))
    assert true_cost.mean() < 0.6 * random_cost.mean()
    assert (true_cost <= random_cost).mean() > 0.9


def test_position_is_not_given_by_the_patch_alone(data: TaskData) -> None:
    """Random windows of photographs: no centred object, so brightness is about equal per position."""
    grid = _grid(_load(data, "train_data.npy"), _load(data, "train_labels.npy"))
    per_position = grid.mean(axis=(0, 2, 3, 4))
    assert per_position.max() - per_position.min() < 0.05


def test_windows_are_not_flat(data: TaskData, build: Callable[..., np.ndarray]) -> None:
    """Flat windows (plain sky, black space) are re-drawn: most patches of every sample show detail."""
    flat_std, min_busy = build.__globals__["FLAT_STD"], build.__globals__["MIN_BUSY"]
    for name in ("train_data.npy", "test_data.npy"):
        x = _load(data, name)
        busy = (x.reshape(len(x), 9, 3, -1).std(-1).mean(-1) > flat_std - 0.002).sum(1)
        assert busy.min() >= min_busy, name
        # Still natural photographs: plenty of flat patches remain inside busy windows.
        assert 0.03 < (busy < 9).mean() < 0.9, name


def test_seams_alone_do_not_solve_it(data: TaskData) -> None:
    """Downscaled whole photographs are busy: the best-matching right neighbour of a patch (by the
    step across the seam) is often not the true one. Crops of smooth close-ups made this ~0.95."""
    x, labels = _load(data, "test_data.npy"), data.answers()
    grid = _grid(x, labels)
    right = grid[:, :, :, :, -1]  # (N, 9, 3, 9)
    left = grid[:, :, :, :, 0]
    cost = np.abs(right[:, :, None] - left[:, None]).mean((-1, -2))  # (N, 9, 9): patch a, then patch b
    cost[:, np.arange(9), np.arange(9)] = np.inf
    pairs = [a for a, _ in H_SEAMS]
    hits = cost[:, pairs].argmin(-1) == np.array([b for _, b in H_SEAMS])
    assert 0.3 < hits.mean() < 0.85, hits.mean()


def test_samples_are_distinct(data: TaskData) -> None:
    x, xt = _load(data, "train_data.npy"), _load(data, "test_data.npy")
    train_keys = {np.sort(s.reshape(9, -1), axis=0).tobytes() for s in x}
    test_keys = {np.sort(s.reshape(9, -1), axis=0).tobytes() for s in xt}
    assert len(train_keys) == N_TRAIN and len(test_keys) == N_TEST
    assert not train_keys & test_keys


def test_train_and_test_photographs_are_disjoint(build: Callable[..., np.ndarray]) -> None:
    train, test = build.__globals__["PHOTOS_TRAIN"], build.__globals__["PHOTOS_TEST"]
    assert len(train) >= 5 and len(test) >= 3
    assert not set(train) & set(test)
    # The stereo pair would leak one scene into both splits.
    names = {Path(relative).stem for _, relative in train + test}
    assert not {"motorcycle_left", "motorcycle_right"} <= names


def test_scenes_show_most_of_a_photograph(build: Callable[..., np.ndarray]) -> None:
    g = build.__globals__
    assert g["MIN_REGION"] >= 0.6
    photo = g["_load_photo"](*g["PHOTOS_TEST"][0])
    rng = np.random.default_rng(0)
    scenes = np.stack([g["_scene"](photo, rng) for _ in range(20)])
    assert scenes.shape == (20, 64, 64, 3) and scenes.min() >= 0.0 and scenes.max() <= 1.0
    # A 64x64 view of a whole photograph is busy: neighbouring pixels differ noticeably.
    assert np.abs(np.diff(scenes, axis=2)).mean() > 0.02


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    answers = data.answers()
    assert (answers[1:] == answers[:-1]).mean() < 0.2


def test_does_not_need_fashion_mnist(
    build: Callable[..., np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("WEIRDML_FASHION_MNIST_DIR", str(empty))
    monkeypatch.setitem(build.__globals__, "FASHION_SYSTEM_DIR", tmp_path / "no-such-dir")
    out = tmp_path / "out"
    out.mkdir()
    assert build(out, 0, variant="hard", n_train=10, n_test=10).shape == (10, 9)


def test_missing_photograph_raises_with_the_fix(
    build: Callable[..., np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(build.__globals__, "PHOTOS_TEST", (("skimage", "data/no_such_photo.png"),))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DataUnavailable, match="scikit-image"):
        build(out, 0, variant="hard", n_train=10, n_test=10)
