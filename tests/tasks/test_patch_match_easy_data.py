"""patch_match_easy: data version 3 of patch_match from the shared builder: patch_match's samples
with every candidate's pixels in their place in the square (no hidden order), the candidates
turned, re-lit and noised as there. What the turns, the gain and the hidden pool promise is checked
on the shared builder by test_patch_match_data.py; here, that this task's files are those samples
with the order left out, and what the reference relies on in them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, TaskSpec, import_file, load_builder, load_task

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
TASK_DIR = TASKS_DIR / "patch_match_easy"
HARD_DIR = TASKS_DIR / "patch_match"
N = {"train": 2000, "test": 1000}
K, HOLE, MARGIN = 5, 8, 2
SEAM_AS_GIVEN = 0.3  # the seam rule's accuracy on the candidates as given stays below this
SEAM_ANY_TURN = (0.3, 0.6)  # and the best over each candidate's quarter turns lies in this range
# SHA-256 of seed 0's files and answers (int64 bytes): the data the blind run in calibration/
# played, as data version 3's own builder (commit 9903947's parent; 5c707bc's writes the same) wrote it.
BLIND_RUN_DATA = {
    "train_images.npy": "0249f799dbc3c85a91f5e656f796d919bdeaa03a5cefae649123b54d308be8e1",
    "train_holes.npy": "c6ec2c3bd575c102e1ef6464ef933d99d9c6580303766f26938b3dd5d0d93cc9",
    "train_patches.npy": "6959d87d2971c9795fcd6a7d33dfb6a3b5d84236ac33ec4f4eb542575a1de413",
    "train_labels.npy": "ca11005a426083a648bda53de0af9b2869b383c08f0b787f7867f618235818bd",
    "test_images.npy": "3997ccc53cc667c68a06147b3223b4a0bdad2e898b7541beefbdce5adc82a5d6",
    "test_holes.npy": "af9e13f9c273761cfbfde297d75f730b508439f86f7c3bd60846a63329bcd890",
    "test_patches.npy": "dce22d07d9e1c57e70ebf80ce975a14583cf626fce8dcf50eca45c35a684604d",
    "answers": "174345762da5488d16424574f82ff727e2a370ff3d36650a46883442c016c645",
}


@pytest.fixture(scope="module")
def spec() -> TaskSpec:
    return load_task(TASK_DIR)


@pytest.fixture(scope="module")
def build(spec: TaskSpec) -> Callable[..., np.ndarray]:
    return load_builder(spec)


def _built(built: Callable[[str], TaskData], name: str) -> TaskData:
    try:
        return built(name)
    except DataUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    return _built(built, "patch_match_easy")


def load(data: TaskData, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pictures, holes, candidates and labels (the answers for the test split)."""
    arrays = [
        np.load(data.public_dir / f"{split}_{name}.npy", allow_pickle=False) for name in ("images", "holes", "patches")
    ]
    labels = np.load(data.public_dir / "train_labels.npy") if split == "train" else data.answers()
    return arrays[0], arrays[1], arrays[2], labels


def test_spec_shares_the_hard_builder_and_reference(spec: TaskSpec) -> None:
    hard = load_task(HARD_DIR)
    assert spec.markers == ("images", "matching", "easy")
    assert spec.data_version == 3 and spec.time_limit_s == 120
    assert spec.public_files == hard.public_files
    assert spec.builder == HARD_DIR / "data.py" and not (TASK_DIR / "data.py").exists()
    assert dict(spec.params) == {"version": 3}
    assert spec.reference_path == hard.reference_path and not (TASK_DIR / "reference.py").exists()
    assert (spec.calibration.family, spec.calibration.tier) == ("patch_match", "easy")
    assert spec.prompt.count("```python") == 1 and spec.prompt.count("```") == 2


def test_seed_0_is_the_data_the_blind_run_played(data: TaskData, spec: TaskSpec) -> None:
    for name in spec.public_files:
        assert hashlib.sha256((data.public_dir / name).read_bytes()).hexdigest() == BLIND_RUN_DATA[name], name
    answers = data.answers().astype(np.int64).tobytes()
    assert hashlib.sha256(answers).hexdigest() == BLIND_RUN_DATA["answers"]


def test_unknown_versions_are_refused(build: Callable[..., np.ndarray], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="data version 2"):
        build(tmp_path, 0, version=2)
    assert not any(tmp_path.iterdir())


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


def test_the_hard_twin_s_samples_with_the_pixels_in_place(
    built: Callable[[str], TaskData], data: TaskData, spec: TaskSpec, build: Callable[..., np.ndarray]
) -> None:
    """Seed for seed, patch_match's files with its hidden pixel order undone: the pictures, holes
    and labels are the same bytes, and each candidate is patch_match's put back in the square."""
    hard = _built(built, "patch_match")
    order = build.__globals__["pixel_order"](spec.seed)
    for name in spec.public_files:
        easy_bytes, hard_bytes = ((d.public_dir / name).read_bytes() for d in (data, hard))
        if name.endswith("_patches.npy"):
            assert easy_bytes != hard_bytes
            written = np.load(hard.public_dir / name)
            assert np.array_equal(build.__globals__["scramble"](np.load(data.public_dir / name), order), written)
        else:
            assert easy_bytes == hard_bytes, name
    assert np.array_equal(data.answers(), hard.answers())


# patch_match's calibrate.py's seam rule: the one these tests bound (as test_patch_match_data.py does)
seam_costs = import_file("_patch_match_calibrate", HARD_DIR / "calibrate.py").seam_costs


def test_the_seams_show_once_the_candidates_are_turned_back(data: TaskData, build: Callable[..., np.ndarray]) -> None:
    """What the reference relies on: with the pixels in place, the candidate whose border continues
    the picture best is right little more often than chance as given (each candidate is turned),
    and much more often in its best-fitting quarter turn (measured 0.252 and 0.466 on seed 0)."""
    images, holes, patches, labels = load(data, "test")
    assert np.mean(seam_costs(images, holes, patches).argmin(axis=1) == labels) < SEAM_AS_GIVEN
    orient, turns = build.__globals__["orient"], range(build.__globals__["TURNS"])
    best = np.min([seam_costs(images, holes, orient(patches, t)) for t in turns], axis=0)
    assert SEAM_ANY_TURN[0] < np.mean(best.argmin(axis=1) == labels) < SEAM_ANY_TURN[1]


def test_the_pixel_correlations_give_the_square_in_place(data: TaskData) -> None:
    """The shared reference reads the pixel order back from the correlations of the written pixels;
    here every pixel's most correlated pixels are its neighbours in the square, so that order is the
    square's own."""
    flat = np.concatenate([load(data, s)[2].reshape(-1, HOLE * HOLE) for s in ("train", "test")])
    corr = np.corrcoef(flat.T)
    np.fill_diagonal(corr, -np.inf)
    grid = np.stack(np.divmod(np.arange(HOLE * HOLE), HOLE), 1)
    nearest = corr.argmax(axis=1)
    assert np.all(np.abs(grid - grid[nearest]).sum(axis=1) == 1)


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    answers = data.answers()
    assert (answers[1:] == answers[:-1]).mean() < 0.35
