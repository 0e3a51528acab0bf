from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, TaskSpec, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "shuffle_easy"
N_TRAIN, N_TEST = 2000, 1000
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
        return built("shuffle_easy")
    except DataUnavailable as exc:
        pytest.skip(str(exc))


def _load(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def _grid(patches: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N, 9, 9, 9) shuffled patches -> (N, 9, 9, 9) patches in grid order."""
    grid = np.empty_like(patches)
    np.put_along_axis(grid, labels[:, :, None, None], patches, axis=1)
    return grid


def _seam_cost(grid: np.ndarray) -> np.ndarray:
    """Mean absolute step across the 12 inner seams of each sample, (N,)."""
    h = [np.abs(grid[:, a, :, -1] - grid[:, b, :, 0]).mean(-1) for a, b in H_SEAMS]
    v = [np.abs(grid[:, a, -1, :] - grid[:, b, 0, :]).mean(-1) for a, b in V_SEAMS]
    return np.mean(h + v, axis=0)


def _is_permutation_rows(labels: np.ndarray) -> bool:
    return bool(np.array_equal(np.sort(labels, axis=1), np.broadcast_to(np.arange(9), labels.shape)))


def test_spec(spec: TaskSpec) -> None:
    assert spec.name == "shuffle_easy"
    assert set(spec.markers) == {"images", "permutation", "easy"}
    assert spec.public_files == ("train_data.npy", "train_labels.npy", "test_data.npy")
    assert spec.time_limit_s == 120
    assert spec.prompt.count("```python") == 1 and spec.prompt.count("```") == 2


def test_shapes_dtypes_and_ranges(data: TaskData) -> None:
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(load_task(TASK_DIR).public_files)
    x, y, xt = _load(data, "train_data.npy"), _load(data, "train_labels.npy"), _load(data, "test_data.npy")
    answers = data.answers()
    assert x.shape == (N_TRAIN, 9, 9, 9) and x.dtype == np.float32
    assert xt.shape == (N_TEST, 9, 9, 9) and xt.dtype == np.float32
    assert y.shape == (N_TRAIN, 9) and y.dtype == np.int64
    assert answers.shape == (N_TEST, 9) and np.issubdtype(answers.dtype, np.integer)
    for arr in (x, xt):
        assert arr.min() == 0.0 and arr.max() == 1.0
        # Fashion-MNIST pixels are bytes scaled to [0, 1].
        assert np.allclose(arr * 255, np.round(arr * 255), atol=1e-4)


def test_every_label_row_is_a_permutation(data: TaskData) -> None:
    assert _is_permutation_rows(_load(data, "train_labels.npy"))
    assert _is_permutation_rows(data.answers())


@pytest.mark.parametrize("which", ["train", "test"])
def test_label_frequencies_are_uniform(data: TaskData, which: str) -> None:
    labels = _load(data, "train_labels.npy") if which == "train" else data.answers()
    n = len(labels)
    # Each shuffled slot i must land on every position equally often: binomial(n, 1/9) per cell.
    counts = np.stack([np.bincount(labels[:, i], minlength=9) for i in range(9)])
    sd = np.sqrt(n * (1 / 9) * (8 / 9))
    assert np.all(np.abs(counts - n / 9) < 5 * sd), counts
    # Patches left in place: about 1 in 9, as for random permutations.
    assert abs((labels == np.arange(9)).mean() - 1 / 9) < 0.02


@pytest.mark.parametrize("which", ["train", "test"])
def test_reassembled_images_are_smooth_and_centred(data: TaskData, which: str) -> None:
    x = _load(data, f"{which}_data.npy")
    labels = _load(data, "train_labels.npy") if which == "train" else data.answers()
    true_cost = _seam_cost(_grid(x, labels))
    rng = np.random.default_rng(0)
    random_cost = _seam_cost(_grid(x, np.stack([rng.permutation(9) for _ in range(len(x))])))
    assert true_cost.mean() < 0.5 * random_cost.mean()
    # Ties happen (blank patches on black), so count samples where the true order is no worse.
    assert (true_cost <= random_cost).mean() > 0.9
    grid = _grid(x, labels)
    corners, centre = grid[:, [0, 2, 6, 8]].mean(), grid[:, 4].mean()
    assert centre > 2 * corners, "Fashion-MNIST items are centred on black"


def test_images_come_from_the_right_fashion_mnist_split(data: TaskData, build: Callable[..., np.ndarray]) -> None:
    folder = build.__globals__["_fashion_dir"](build.__globals__["FASHION_SYSTEM_DIR"])
    keys = {}
    for split, name in (("train", "train-images-idx3-ubyte.gz"), ("test", "t10k-images-idx3-ubyte.gz")):
        with gzip.open(folder / name, "rb") as fh:
            images = np.frombuffer(fh.read()[16:], dtype=np.uint8).reshape(-1, 28, 28)
        keys[split] = {img[:27, :27].tobytes() for img in images}
    for which, labels in (("train", _load(data, "train_labels.npy")), ("test", data.answers())):
        grid = _grid(_load(data, f"{which}_data.npy")[:50], labels[:50])
        images = grid.reshape(-1, 3, 3, 9, 9).transpose(0, 1, 3, 2, 4).reshape(-1, 27, 27)
        as_bytes = [np.round(img * 255).astype(np.uint8).tobytes() for img in images]
        assert all(b in keys[which] for b in as_bytes)
        other = "test" if which == "train" else "train"
        # Fashion-MNIST has a few exact duplicates across splits; nearly none should match.
        assert sum(b in keys[other] for b in as_bytes) <= 1


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    # Test samples are not stored in an order that hides the answers: consecutive answers unrelated.
    answers = data.answers()
    assert (answers[1:] == answers[:-1]).mean() < 0.2


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
        build(out, 0, variant="easy")
    message = str(info.value)
    assert "apt-get install dataset-fashion-mnist" in message
    assert "WEIRDML_FASHION_MNIST_DIR" in message and "t10k-images-idx3-ubyte.gz" in message
    assert not any(out.iterdir())
    # The build() parameter is another way to name the system directory.
    monkeypatch.delenv("WEIRDML_FASHION_MNIST_DIR")
    with pytest.raises(DataUnavailable):
        build(out, 0, variant="easy", fashion_system_dir=str(empty))


def test_env_directory_is_used_first(
    build: Callable[..., np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = build.__globals__["FASHION_SYSTEM_DIR"]
    if not (system / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"Fashion-MNIST not installed in {system}")
    own = tmp_path / "own"
    own.mkdir()
    for name in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (own / name).symlink_to(system / name)
    monkeypatch.setenv("WEIRDML_FASHION_MNIST_DIR", str(own))
    monkeypatch.setitem(build.__globals__, "FASHION_SYSTEM_DIR", tmp_path / "no-such-dir")
    out = tmp_path / "out"
    out.mkdir()
    answers = build(out, 0, variant="easy", n_train=20, n_test=10)
    assert answers.shape == (10, 9)
    assert np.load(out / "train_data.npy").shape == (20, 9, 9, 9)
