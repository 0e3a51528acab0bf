"""Fashion-MNIST pictures with a square hole, and candidate patches of which one fills it.

Each sample is a 28x28 grayscale Fashion-MNIST picture with an 8x8 hole (set to 0) at a random
place, and K = 5 candidate 8x8 patches: the one cut from the hole and 4 distractors cut at the
same place from the pictures most like it (nearest neighbours, at half resolution, among the
pictures of the same class in a hidden pool of the split that is never shown; each pool picture
gives at most one distractor). Every candidate, the true one included, is then turned by its
own element of the symmetries of the square (the first ``TURNS`` of ``orient``: with 4, a quarter
turn 0 to 3 times; 8 would add the mirrored ones), drawn uniformly and independently per
candidate, then scaled by a random gain, noised and rounded to 1/255 steps, and written with its
64 pixels in one hidden order per data set (``pixel_order``, data version 4). The distractors
therefore look like the right patch in content, brightness and texture; what tells them apart is
how their edges continue the picture around the hole once each candidate's pixels are put back
in the square and turned back; neither the order nor the turn is shown.

The hole lies at least 2 pixels inside the border and covers part of the garment (it is re-drawn
while more than half of its pixels are background). A neighbour's patch too close to the true
one or to another candidate (mean absolute difference under ``MIN_DIFF``), or mostly background,
is skipped, so every sample has one right answer. Training samples come from Fashion-MNIST's
training split and test samples from its test split, each with its distractors from the same
split. Each seed draws a new pool of pictures, new holes and a new order of the candidates.

``build(..., version=3)`` makes data version 3 (the task patch_match_easy): the same samples with
every candidate's pixels written in their place in the square, the hidden order left out; seed for
seed its files are those that version 3's builder wrote, and version 4's with its candidates put
back by the order (``scramble`` undone).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from pytest_weirdml.errors import DataUnavailable

N_TRAIN = 2000
N_TEST = 1000
SIDE = 28
HOLE = 8
MARGIN = 2  # the hole keeps this many pixels of picture on every side
K = 5
MIN_DIFF = 0.04  # mean absolute difference that keeps a distractor apart from the true patch
MIN_INK = 0.5  # a hole (and a distractor) needs at least this share of non-background pixels
INK = 0.05  # a pixel brighter than this is garment, not background
NEIGHBOURS = 40  # nearest unused pool pictures of the same class whose patches may serve as distractors
POOL = 6  # pictures per sample, apart from the samples' own, that give the distractors (never shown)
GAP = 0  # the blacked-out square reaches this many pixels beyond the patch's square on every side
JITTER = 0  # every candidate is cut up to this many pixels off the hole's place
GAIN = 0.25  # every candidate's pixels are scaled by exp(uniform(-GAIN, GAIN))
NOISE = 0.03  # and get Gaussian noise of this standard deviation
TURNS = 4  # every candidate gets one of the first TURNS elements of ``orient`` (4: turns only; 8: all)
SCRAMBLE = True  # every candidate's 64 pixels are written in one hidden order per data set (data version 4)
VERSIONS = (3, 4)  # the data versions ``build`` makes: 4 (patch_match), 3 (patch_match_easy: no hidden order)

FASHION_ENV = "WEIRDML_FASHION_MNIST_DIR"
# Module constant so tests can point the system lookup at an empty directory.
FASHION_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def _fashion_dir(system_dir: Path) -> Path:
    names = [name for pair in FASHION_FILES.values() for name in pair]
    candidates = [Path(os.environ[FASHION_ENV])] if os.environ.get(FASHION_ENV) else []
    candidates.append(system_dir)
    for candidate in candidates:
        if all((candidate / name).is_file() for name in names):
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise DataUnavailable(
        f"Fashion-MNIST files not found (looked in {looked}). Either install the Debian package: "
        f"'sudo apt-get install dataset-fashion-mnist' (puts them in {FASHION_SYSTEM_DIR}), or set "
        f"{FASHION_ENV} to a directory holding the four idx files {', '.join(names)}."
    )


def _read_idx(path: Path, magic: int) -> np.ndarray:
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    dims = raw[3]
    header = np.frombuffer(raw[: 4 + 4 * dims], dtype=">u4")
    if header[0] != magic:
        raise DataUnavailable(f"{path} is not a Fashion-MNIST idx file (magic {header[0]}, expected {magic})")
    return np.frombuffer(raw[4 + 4 * dims :], dtype=np.uint8).reshape(tuple(int(d) for d in header[1:]))


def _load_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    images_name, labels_name = FASHION_FILES[split]
    images = _read_idx(folder / images_name, 2051)
    classes = _read_idx(folder / labels_name, 2049)
    if images.shape[1:] != (SIDE, SIDE) or len(classes) != len(images):
        raise DataUnavailable(f"{folder / images_name} does not hold 28x28 pictures with one class each")
    return images, classes.astype(np.int64)


def _hole(rng: np.random.Generator, image: np.ndarray) -> tuple[int, int] | None:
    """A hole position covering enough garment, or None when the picture has too little of it."""
    lo, hi = MARGIN + GAP, SIDE - MARGIN - GAP - HOLE
    for _ in range(40):
        r, c = (int(v) for v in rng.integers(lo, hi + 1, size=2))
        if (image[r : r + HOLE, c : c + HOLE] > INK).mean() >= MIN_INK:
            return r, c
    return None


def _blocks(pics: np.ndarray) -> np.ndarray:
    """14x14 block sums of the 0..255 pixels, as exact float64 integers (same on every machine)."""
    small = pics.reshape(len(pics), SIDE // 2, 2, SIDE // 2, 2).sum(axis=(2, 4), dtype=np.int64)
    return small.reshape(len(pics), -1).astype(np.float64)


def orient(square: np.ndarray, turn: int) -> np.ndarray:
    """Element ``turn`` (0 to 7) of the 8 symmetries of the square, on the last two axes (so one
    square or a stack of them): ``turn % 4`` quarter turns counter-clockwise, then a transpose when
    ``turn >= 4``; 0 to 3 are the 4 rotations."""
    out = np.rot90(square, turn % 4, axes=(-2, -1))
    return np.ascontiguousarray(out.swapaxes(-1, -2) if turn >= 4 else out)


def unorient(square: np.ndarray, turn: int) -> np.ndarray:
    """The inverse of ``orient(., turn)``."""
    out = square.swapaxes(-1, -2) if turn >= 4 else square
    return np.ascontiguousarray(np.rot90(out, -(turn % 4), axes=(-2, -1)))


def pixel_order(seed: int) -> np.ndarray:
    """The hidden order of the 64 pixels of every candidate of seed ``seed``'s data: position ``k``
    of a written candidate holds pixel ``order[k]`` (row-major) of the altered square. Never the
    identity or one of the square's symmetries."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 64]))
    plain = {orient(np.arange(HOLE * HOLE).reshape(HOLE, HOLE), t).tobytes() for t in range(8)}
    while True:
        order = rng.permutation(HOLE * HOLE)
        if order.tobytes() not in plain:
            return order


def scramble(patches: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Candidates (..., 8, 8) with their pixels in ``order``."""
    flat = patches.reshape(*patches.shape[:-2], HOLE * HOLE)
    return np.ascontiguousarray(flat[..., order].reshape(patches.shape))


def _alter(rng: np.random.Generator, source: np.ndarray, r: int, c: int) -> tuple[np.ndarray, int]:
    """The 8x8 square of ``source`` at (r, c), moved by up to ``JITTER`` pixels, turned by a random
    element of the square's symmetries, scaled by a random gain, with noise, rounded to 1/255
    steps; and the turn."""
    dr, dc = (int(v) for v in rng.integers(-JITTER, JITTER + 1, size=2))
    turn = int(rng.integers(TURNS))
    patch = orient(source[r + dr : r + dr + HOLE, c + dc : c + dc + HOLE], turn)
    patch = patch * np.exp(rng.uniform(-GAIN, GAIN)) + rng.normal(0.0, NOISE, size=patch.shape)
    return (np.round(np.clip(patch, 0.0, 1.0) * 255) / 255).astype(np.float32), turn


def _split(
    rng: np.random.Generator, images: np.ndarray, classes: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pictures, holes, candidates and labels of ``n`` samples, and (never shown) each candidate's
    turn and the index in ``images`` of the picture it was cut from, both of shape (n, K)."""
    order = rng.permutation(len(images))
    own, pool = np.sort(order[: 3 * n]), np.sort(order[3 * n : (3 + POOL) * n])
    pics = images.astype(np.float32) / 255.0
    blocks = _blocks(images)
    used = np.zeros(len(images), dtype=bool)  # a pool picture gives at most one distractor
    out_images = np.empty((n, SIDE, SIDE), dtype=np.float32)
    out_holes = np.empty((n, 2), dtype=np.int64)
    out_patches = np.empty((n, K, HOLE, HOLE), dtype=np.float32)
    out_labels = rng.permutation(np.arange(n) % K).astype(np.int64)  # every index equally often
    out_turns = np.empty((n, K), dtype=np.int64)
    out_sources = np.empty((n, K), dtype=np.int64)
    done = 0
    for i in rng.permutation(own):
        if done == n:
            break
        hole = _hole(rng, pics[i])
        if hole is None:
            continue
        r, c = hole
        true = pics[i, r : r + HOLE, c : c + HOLE]
        mates = pool[(classes[pool] == classes[i]) & ~used[pool]]
        dist = ((blocks[mates] - blocks[i]) ** 2).sum(axis=1)
        near = mates[np.lexsort((mates, dist))[:NEIGHBOURS]]
        chosen: list[int] = []
        for j in near:
            patch = pics[j, r : r + HOLE, c : c + HOLE]
            if np.abs(patch - true).mean() < MIN_DIFF or (patch > INK).mean() < MIN_INK:
                continue
            # Distractors must differ from each other too, or two candidates would be one.
            if all(np.abs(patch - pics[d, r : r + HOLE, c : c + HOLE]).mean() >= MIN_DIFF for d in chosen):
                chosen.append(int(j))
                if len(chosen) == K - 1:
                    break
        if len(chosen) < K - 1:
            continue
        used[chosen] = True
        sources = chosen[:]
        sources.insert(int(out_labels[done]), int(i))
        altered = [_alter(rng, pics[j], r, c) for j in sources]
        out_patches[done] = np.stack([patch for patch, _ in altered])
        out_turns[done] = [turn for _, turn in altered]
        out_sources[done] = sources
        out_images[done] = pics[i]
        out_images[done, r - GAP : r + HOLE + GAP, c - GAP : c + HOLE + GAP] = 0.0
        out_holes[done] = (r, c)
        done += 1
    if done < n:
        raise ValueError(f"only {done} of {n} samples found; lower n or the constraints")
    return out_images, out_holes, out_patches, out_labels, out_turns, out_sources


def build(
    out: Path,
    seed: int,
    *,
    n_train: int = N_TRAIN,
    n_test: int = N_TEST,
    fashion_system_dir: str | None = None,
    version: int = 4,
) -> np.ndarray:
    """Write the train and test pictures, holes and candidate patches, and the training labels, of
    data version ``version`` (4: patch_match, 3: patch_match_easy, its candidates' pixels in their
    place); return the test labels (the index of the right candidate)."""
    if version not in VERSIONS:
        raise ValueError(f"data version {version!r}: this builder makes versions {list(VERSIONS)}")
    folder = _fashion_dir(Path(fashion_system_dir) if fashion_system_dir else FASHION_SYSTEM_DIR)
    train_seq, test_seq = np.random.SeedSequence(seed).spawn(2)
    hidden_order = SCRAMBLE and version >= 4
    order = pixel_order(seed) if hidden_order else np.arange(HOLE * HOLE)
    answers = np.empty(0, dtype=np.int64)
    for split, seq, n in (("train", train_seq, n_train), ("test", test_seq, n_test)):
        images, holes, patches, labels, _turns, _sources = _split(
            np.random.default_rng(seq), *_load_split(folder, split), n
        )
        np.save(out / f"{split}_images.npy", images, allow_pickle=False)
        np.save(out / f"{split}_holes.npy", holes, allow_pickle=False)
        np.save(out / f"{split}_patches.npy", scramble(patches, order) if hidden_order else patches, allow_pickle=False)
        if split == "train":
            np.save(out / "train_labels.npy", labels, allow_pickle=False)
        else:
            answers = labels
    return answers
