"""Fashion-MNIST pictures with a square hole, and candidate patches of which one fills it.

Each sample is a 28x28 grayscale Fashion-MNIST picture with an 8x8 hole (set to 0) at a random
place, and K = 5 candidate 8x8 patches: the one cut from the hole and 4 distractors cut at the
same place from the pictures most like it (nearest neighbours, at half resolution, among the
pictures of the same class in a random pool of the split). The distractors therefore look like
the right patch in content, brightness and texture; what tells them apart is how their edges
continue the picture around the hole.

The hole lies at least 2 pixels inside the border and covers part of the garment (it is re-drawn
while more than half of its pixels are background). A neighbour's patch too close to the true
one or to another candidate (mean absolute difference under ``MIN_DIFF``), or mostly background,
is skipped, so every sample has one right answer. Training samples come from Fashion-MNIST's
training split and test samples from its test split, each with its distractors from the same
split. Each seed draws a new pool of pictures, new holes and a new order of the candidates.
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
NEIGHBOURS = 40  # nearest pictures of the same class whose patches may serve as distractors
POOL = 8000  # pictures per split searched for neighbours

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
    for _ in range(40):
        r, c = (int(v) for v in rng.integers(MARGIN, SIDE - MARGIN - HOLE + 1, size=2))
        if (image[r : r + HOLE, c : c + HOLE] > INK).mean() >= MIN_INK:
            return r, c
    return None


def _neighbours(pics: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """For each picture, the ``NEIGHBOURS`` nearest pictures of its class, nearest first.

    Distances are taken between 14x14 block sums of the 0..255 pixels: integers, so float64
    arithmetic is exact whatever the BLAS, and ties are broken by index; the same seed picks the
    same neighbours on every machine.
    """
    small = pics.reshape(len(pics), SIDE // 2, 2, SIDE // 2, 2).sum(axis=(2, 4), dtype=np.int64)
    flat = small.reshape(len(pics), -1).astype(np.float64)
    out = np.empty((len(pics), NEIGHBOURS), dtype=np.int64)
    for kind in np.unique(kinds):
        members = np.flatnonzero(kinds == kind)
        x = flat[members]
        sq = (x**2).sum(axis=1)
        dist = sq[:, None] + sq[None, :] - 2 * x @ x.T
        np.fill_diagonal(dist, np.inf)
        key = dist * len(members) + np.arange(len(members))  # unique and exact: ties go to the lower index
        top = np.argpartition(key, NEIGHBOURS, axis=1)[:, :NEIGHBOURS]
        top = np.take_along_axis(top, np.argsort(np.take_along_axis(key, top, axis=1), axis=1), axis=1)
        out[members] = members[top]
    return out


def _split(
    rng: np.random.Generator, images: np.ndarray, classes: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    pool = np.sort(rng.choice(len(images), size=min(POOL, len(images)), replace=False))
    neighbours = _neighbours(images[pool], classes[pool])
    pics = images[pool].astype(np.float32) / 255.0
    out_images = np.empty((n, SIDE, SIDE), dtype=np.float32)
    out_holes = np.empty((n, 2), dtype=np.int64)
    out_patches = np.empty((n, K, HOLE, HOLE), dtype=np.float32)
    out_labels = rng.permutation(np.arange(n) % K).astype(np.int64)  # every index equally often
    done = 0
    for i in rng.permutation(len(pics)):
        if done == n:
            break
        hole = _hole(rng, pics[i])
        if hole is None:
            continue
        r, c = hole
        true = pics[i, r : r + HOLE, c : c + HOLE]
        near = pics[neighbours[i], r : r + HOLE, c : c + HOLE]
        usable = (np.abs(near - true).mean(axis=(1, 2)) >= MIN_DIFF) & ((near > INK).mean(axis=(1, 2)) >= MIN_INK)
        distractors: list[np.ndarray] = []
        for patch in near[usable]:
            # Distractors must differ from each other too, or two candidates would be one.
            if all(np.abs(patch - d).mean() >= MIN_DIFF for d in distractors):
                distractors.append(patch)
                if len(distractors) == K - 1:
                    break
        if len(distractors) < K - 1:
            continue
        candidates = distractors[:]
        candidates.insert(int(out_labels[done]), true)
        out_patches[done] = np.stack(candidates)
        out_images[done] = pics[i]
        out_images[done, r : r + HOLE, c : c + HOLE] = 0.0
        out_holes[done] = (r, c)
        done += 1
    if done < n:
        raise ValueError(f"only {done} of {n} samples found; lower n or the constraints")
    return out_images, out_holes, out_patches, out_labels


def build(
    out: Path,
    seed: int,
    *,
    n_train: int = N_TRAIN,
    n_test: int = N_TEST,
    fashion_system_dir: str | None = None,
) -> np.ndarray:
    """Write the train and test pictures, holes and candidate patches, and the training labels;
    return the test labels (the index of the right candidate)."""
    folder = _fashion_dir(Path(fashion_system_dir) if fashion_system_dir else FASHION_SYSTEM_DIR)
    train_seq, test_seq = np.random.SeedSequence(seed).spawn(2)
    answers = np.empty(0, dtype=np.int64)
    for split, seq, n in (("train", train_seq, n_train), ("test", test_seq, n_test)):
        images, holes, patches, labels = _split(np.random.default_rng(seq), *_load_split(folder, split), n)
        np.save(out / f"{split}_images.npy", images, allow_pickle=False)
        np.save(out / f"{split}_holes.npy", holes, allow_pickle=False)
        np.save(out / f"{split}_patches.npy", patches, allow_pickle=False)
        if split == "train":
            np.save(out / "train_labels.npy", labels, allow_pickle=False)
        else:
            answers = labels
    return answers
