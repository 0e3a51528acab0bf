"""patch_match: the built files and what the task promises."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import DataUnavailable
from pytest_weirdml.tasks import TaskData, TaskSpec, import_file, load_builder, load_task

TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / "patch_match"
N = {"train": 2000, "test": 1000}
K, HOLE, MARGIN = 5, 8, 2
SEAM_AS_GIVEN = 0.3  # the seam rule's accuracy on the candidates as given stays below this
SEAM_ANY_TURN = (0.3, 0.6)  # and the best over each candidate's orientations lies in this range


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


def unscramble(patches: np.ndarray) -> np.ndarray:
    """Written candidates (..., 8, 8) with their pixels put back in the square (the builder's
    hidden order for the task's seed)."""
    spec = load_task(TASK_DIR)
    order = load_builder(spec).__globals__["pixel_order"](spec.seed)
    flat = patches.reshape(*patches.shape[:-2], HOLE * HOLE)
    square = np.empty_like(flat)
    square[..., order] = flat
    return square.reshape(patches.shape)


def load(data: TaskData, split: str, written: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pictures, holes, candidates (their pixels back in the square unless ``written``) and labels
    (the answers for the test split)."""
    arrays = [
        np.load(data.public_dir / f"{split}_{name}.npy", allow_pickle=False) for name in ("images", "holes", "patches")
    ]
    labels = np.load(data.public_dir / "train_labels.npy") if split == "train" else data.answers()
    return arrays[0], arrays[1], arrays[2] if written else unscramble(arrays[2]), labels


def test_spec(spec: TaskSpec) -> None:
    assert set(spec.markers) == {"images", "matching", "hard"}
    # The builder also makes data version 3 for patch_match_easy; this task takes its default.
    assert spec.builder == TASK_DIR / "data.py" and dict(spec.params) == {} and spec.data_version == 4
    assert (spec.calibration.family, spec.calibration.tier) == ("patch_match", "hard")
    assert spec.reference_path.is_file()
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
    patch than the same square cut from a random other picture (each in its best orientation, as
    every candidate is turned), and match it in brightness and contrast. The squares were kept
    apart (``MIN_DIFF``) and on garment (``MIN_INK``) before the gain and noise, so after them a
    few pairs of bright squares come closer and a few dark ones lose some garment pixels."""
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
    # every candidate is turned: compare each square with the true patch in its best orientation
    orient, turns = build.__globals__["orient"], range(build.__globals__["TURNS"])
    best = np.min([np.abs(orient(patches, t) - true[:, None]).mean(axis=(2, 3)) for t in turns], axis=0)
    distractor_gap = (best.sum(axis=1) / (K - 1)).mean()  # the true patch's own entry is 0
    rng = np.random.default_rng(0)
    others = rng.permutation(n)
    cut = np.stack([images[j, r : r + HOLE, c : c + HOLE] for j, (r, c) in zip(others, holes, strict=True)])
    random_gap = np.min([np.abs(orient(cut, t) - true).mean(axis=(1, 2)) for t in turns], axis=0).mean()
    assert distractor_gap < 0.7 * random_gap
    for stat in (patches.mean(axis=(2, 3)), patches.std(axis=(2, 3))):
        for pick in (stat.argmax(axis=1), stat.argmin(axis=1)):
            assert np.mean(pick == labels) < 0.25  # chance is 0.2


# calibrate.py's seam rule: the one these tests bound
seam_costs = import_file("_patch_match_calibrate", TASK_DIR / "calibrate.py").seam_costs


def test_the_seams_alone_are_weak(data: TaskData, build: Callable[..., np.ndarray]) -> None:
    """Without learning, the candidate whose border continues the picture best, as the candidates
    are given, is right little more often than chance (every candidate is turned); the best over
    its orientations in use (``TURNS``) does better, but far from always."""
    images, holes, patches, labels = load(data, "test")
    assert np.mean(seam_costs(images, holes, patches).argmin(axis=1) == labels) < SEAM_AS_GIVEN
    orient, turns = build.__globals__["orient"], range(build.__globals__["TURNS"])
    best = np.min([seam_costs(images, holes, orient(patches, t)) for t in turns], axis=0)
    assert SEAM_ANY_TURN[0] < np.mean(best.argmin(axis=1) == labels) < SEAM_ANY_TURN[1]


def test_every_candidate_is_written_in_one_hidden_pixel_order(
    data: TaskData, spec: TaskSpec, build: Callable[..., np.ndarray]
) -> None:
    """The candidates' pixels come in one order per data set, the same in both splits, that is no
    symmetry of the square and differs between seeds; as written, no candidate's border continues
    the picture (the seam rule over all 8 symmetries stays near chance)."""
    g = build.__globals__
    order = g["pixel_order"](spec.seed)
    assert sorted(order) == list(range(HOLE * HOLE))
    plain = np.arange(HOLE * HOLE).reshape(HOLE, HOLE)
    assert all(not np.array_equal(order, g["orient"](plain, t).reshape(-1)) for t in range(8))
    assert not np.array_equal(order, g["pixel_order"](spec.seed + 1))
    images, holes, written, labels = load(data, "test", written=True)
    assert np.array_equal(g["scramble"](unscramble(written), order), written)
    best = np.min([seam_costs(images, holes, g["orient"](written, t)) for t in range(8)], axis=0)
    assert np.mean(best.argmin(axis=1) == labels) < SEAM_AS_GIVEN


@pytest.fixture(scope="module")
def inside(spec: TaskSpec, build: Callable[..., np.ndarray], data: TaskData) -> dict[str, np.ndarray]:
    """The training split rebuilt through the builder's internals, with what it never shows: each
    candidate's turn and the index of its source picture in Fashion-MNIST's training split."""
    g = build.__globals__
    folder = g["_fashion_dir"](g["FASHION_SYSTEM_DIR"])
    pictures, classes = g["_load_split"](folder, "train")
    train_seq, _test_seq = np.random.SeedSequence(spec.seed).spawn(2)
    images, holes, patches, labels, turns, sources = g["_split"](
        np.random.default_rng(train_seq), pictures, classes, N["train"]
    )
    assert np.array_equal(patches, unscramble(np.load(data.public_dir / "train_patches.npy")))  # the shipped split
    return {"images": images, "holes": holes, "patches": patches, "labels": labels, "turns": turns, "sources": sources,
            "pictures": pictures.astype(np.float32) / 255.0}  # fmt: skip


def test_turns_are_uniform_for_right_and_wrong_candidates(
    inside: dict[str, np.ndarray], build: Callable[..., np.ndarray]
) -> None:
    """Each of the ``TURNS`` symmetries in use is as frequent for the right candidate as for the
    others (a chi-square test against uniform on each at the 0.1 % level), so the orientation says
    nothing of the label; and a right candidate's turn is independent of its sample's other turns."""
    n_turns = build.__globals__["TURNS"]
    assert n_turns in (4, 8)
    critical = {4: 16.27, 8: 24.32}[n_turns]  # chi-square, TURNS - 1 degrees of freedom, 0.1 %
    turns, labels = inside["turns"], inside["labels"]
    right = np.zeros(turns.shape, dtype=bool)
    right[np.arange(len(labels)), labels] = True
    assert turns.min() == 0 and turns.max() == n_turns - 1
    for counts in (np.bincount(turns[right], minlength=n_turns), np.bincount(turns[~right], minlength=n_turns)):
        expected = counts.sum() / n_turns
        assert ((counts - expected) ** 2 / expected).sum() < critical, counts.tolist()
    same = turns[right][:, None] == turns[~right].reshape(len(labels), K - 1)
    assert abs(same.mean() - 1 / n_turns) < 0.02


def test_undoing_the_turn_gives_back_the_source_square(
    inside: dict[str, np.ndarray], build: Callable[..., np.ndarray]
) -> None:
    """Each candidate, turned back by its recorded turn, is its source picture's square at the hole
    up to a gain in [exp(-0.25), exp(0.25)], noise of sd 0.03 and rounding; the right candidate's
    source is the sample's own picture. Under any other turn the fit is worse for almost every
    candidate (only a square that is nearly symmetric fits as well)."""
    unorient, gain_bound = build.__globals__["unorient"], np.exp(build.__globals__["GAIN"])
    n_turns = build.__globals__["TURNS"]
    holes, patches, turns, sources = inside["holes"], inside["patches"], inside["turns"], inside["sources"]
    pictures = inside["pictures"]
    n = 400
    worse, saturated = [], 0
    for i in range(n):
        r, c = holes[i]
        for k in range(K):
            square = pictures[sources[i, k], r : r + HOLE, c : c + HOLE].astype(np.float64)
            back = unorient(patches[i, k], int(turns[i, k])).astype(np.float64)
            unsat = (back < 0.99) & (back > 0.01)  # clipping at 0 and 1 hides the gain
            if unsat.sum() < 16:  # a square of white garment saturates: nothing to fit
                saturated += 1
                continue
            gain = (back[unsat] * square[unsat]).sum() / (square[unsat] ** 2).sum()
            assert 1 / gain_bound - 0.03 < gain < gain_bound + 0.03
            residual = back[unsat] - gain * square[unsat]
            assert np.abs(residual).mean() < 0.035 and residual.std() < 0.045
            misfit = [np.abs(unorient(patches[i, k], t) - gain * square).mean() for t in range(n_turns)]
            worse.append(np.argmin(misfit) == turns[i, k])
    own = pictures[sources[np.arange(n), inside["labels"][:n]]]
    for i, (r, c) in enumerate(holes[:n]):
        own[i, r : r + HOLE, c : c + HOLE] = 0.0
    assert np.array_equal(own, inside["images"][:n])
    assert np.mean(worse) > 0.95 and saturated < 0.05 * n * K


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    answers = data.answers()
    assert (answers[1:] == answers[:-1]).mean() < 0.35


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
