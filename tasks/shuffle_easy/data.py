"""Data builder shared by shuffle_easy and shuffle_hard (3x3 jigsaw puzzles of 27x27 images).

Each sample is a 27x27 image cut into a 3x3 grid of 9x9 patches; the patches are shuffled and
the hidden answer says, for each shuffled patch, which grid position (row-major) it came from.

- ``variant="easy"``: grayscale Fashion-MNIST images (28x28, cropped to 27x27); training
  samples come from its training split, test samples from its test split.
- ``variant="hard"``: RGB photographs bundled with scikit-image, scikit-learn and matplotlib.
  Each 64x64 scene shows most of a photograph (at least 60% of its shorter side, slightly
  squeezed at times), downscaled, maybe mirrored or turned by 90 degrees, with mild colour
  jitter; a random 27x27 window of it is the puzzle, re-drawn while most of its patches are flat.
  The test photographs are different photographs from the training ones.

shuffle_hard's ``task.toml`` points its builder at this file with ``variant = "hard"``, so the
cutting and shuffling code exists once.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import numpy as np
from PIL import Image

from pytest_weirdml.errors import DataUnavailable

GRID = 3
PATCH = 9
SIDE = GRID * PATCH

FASHION_ENV = "WEIRDML_FASHION_MNIST_DIR"
# Module constant so tests can point the system lookup at an empty directory.
FASHION_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {
    "train": "train-images-idx3-ubyte.gz",
    "test": "t10k-images-idx3-ubyte.gz",
}
FASHION_ALL_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)

# (package, path inside the package) of each colour photograph. Every file ships inside the
# wheels, so nothing is downloaded. The test photographs are the busier, cluttered scenes, like
# most photographs of Imagenette; motorcycle_right.png is left out, being motorcycle_left.png
# seen from a few centimetres away.
PHOTOS_TRAIN = (
    ("skimage", "data/astronaut.png"),
    ("skimage", "data/coffee.png"),
    ("skimage", "data/chelsea.png"),
    ("skimage", "data/hubble_deep_field.jpg"),
    ("skimage", "data/ihc.png"),
    ("sklearn", "datasets/images/flower.jpg"),
    ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),
)
PHOTOS_TEST = (
    ("skimage", "data/rocket.jpg"),
    ("skimage", "data/motorcycle_left.png"),
    ("sklearn", "datasets/images/china.jpg"),
)
PHOTO_PACKAGES = {"skimage": "scikit-image", "sklearn": "scikit-learn", "matplotlib": "matplotlib"}
SCENE = 64
# A scene shows at least this fraction of the photograph's shorter side (most of the photograph),
# like a whole photograph downscaled to 64x64.
MIN_REGION = 0.6
# Crops whose 3x3 grid holds fewer than MIN_BUSY patches with pixel spread above FLAT_STD are
# re-drawn: a window of plain sky or black space is no puzzle at all.
FLAT_STD = 0.03
MIN_BUSY = 5
MAX_TRIES = 50
# Chance that a scene is turned by a multiple of 90 degrees (a quarter of those stay upright).
ROTATE_P = 0.5


def cut_and_shuffle(images: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Cut (N, C, 27, 27) images into shuffled (N, 9, C, 9, 9) patches and (N, 9) positions.

    ``labels[n, i]`` is the row-major grid position of shuffled patch ``i`` of sample ``n``.
    """
    n, c = images.shape[:2]
    grid = images.reshape(n, c, GRID, PATCH, GRID, PATCH).transpose(0, 2, 4, 1, 3, 5).reshape(n, 9, c, PATCH, PATCH)
    labels = np.stack([rng.permutation(9) for _ in range(n)]).astype(np.int64)
    patches = np.take_along_axis(grid, labels[:, :, None, None, None], axis=1)
    return patches, labels


def assemble(patches: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Inverse of ``cut_and_shuffle``: put each patch at its position; returns (N, C, 27, 27)."""
    n, _, c = patches.shape[:3]
    grid = np.empty_like(patches)
    np.put_along_axis(grid, labels[:, :, None, None, None], patches, axis=1)
    return grid.reshape(n, GRID, GRID, c, PATCH, PATCH).transpose(0, 3, 1, 4, 2, 5).reshape(n, c, SIDE, SIDE)


def _fashion_dir(system_dir: Path) -> Path:
    candidates = [Path(os.environ[FASHION_ENV])] if os.environ.get(FASHION_ENV) else []
    candidates.append(system_dir)
    for candidate in candidates:
        if all((candidate / name).is_file() for name in FASHION_FILES.values()):
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise DataUnavailable(
        f"Fashion-MNIST image files not found (looked in {looked}). Either install the Debian package: "
        f"'sudo apt-get install dataset-fashion-mnist' (puts them in {FASHION_SYSTEM_DIR}), or set "
        f"{FASHION_ENV} to a directory holding the four idx files {', '.join(FASHION_ALL_FILES)}."
    )


def _read_idx_images(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    magic, count, rows, cols = np.frombuffer(raw[:16], dtype=">u4")
    if magic != 2051 or (rows, cols) != (28, 28):
        raise DataUnavailable(f"{path} is not a Fashion-MNIST idx image file (magic {magic}, {rows}x{cols})")
    return np.frombuffer(raw[16:], dtype=np.uint8).reshape(int(count), 28, 28)


def _fashion_images(split: str, n: int, rng: np.random.Generator, system_dir: Path) -> np.ndarray:
    images = _read_idx_images(_fashion_dir(system_dir) / FASHION_FILES[split])
    chosen = np.sort(rng.choice(len(images), size=n, replace=False))
    # Dropping the last row and column keeps the garment centred (the border is black).
    return images[chosen, :SIDE, :SIDE].astype(np.float32)[:, None] / 255.0


def _photo_path(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataUnavailable(
            f"shuffle_hard needs the photographs bundled with {PHOTO_PACKAGES[package]}: "
            "pip install scikit-image scikit-learn matplotlib"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise DataUnavailable(f"{path} is missing from the installed {PHOTO_PACKAGES[package]}; reinstall it")
    return path


def _load_photo(package: str, relative: str) -> np.ndarray:
    """(H, W, 3) float32 RGB pixels in [0, 1]."""
    with Image.open(_photo_path(package, relative)) as img:
        return np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0


def _bilinear(pixels: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """Bilinear samples of ``box`` on a 64x64 grid, without low-pass filtering first."""
    left, top, right, bottom = box
    ys = np.clip(top + (np.arange(SCENE) + 0.5) * (bottom - top) / SCENE - 0.5, 0, pixels.shape[0] - 1)
    xs = np.clip(left + (np.arange(SCENE) + 0.5) * (right - left) / SCENE - 0.5, 0, pixels.shape[1] - 1)
    y0, x0 = np.minimum(ys.astype(int), pixels.shape[0] - 2), np.minimum(xs.astype(int), pixels.shape[1] - 2)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top_row = pixels[y0][:, x0] * (1 - fx) + pixels[y0][:, x0 + 1] * fx
    bottom_row = pixels[y0 + 1][:, x0] * (1 - fx) + pixels[y0 + 1][:, x0 + 1] * fx
    return top_row * (1 - fy) + bottom_row * fy


def _scene(src: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One 64x64 (64, 64, 3) float scene: most of a photograph, downscaled, flipped, rotated, jittered."""
    h, w = src.shape[:2]
    short = min(h, w)
    # A region covering most of the photograph, not always square: a 64x64 version of a photograph
    # is often a slightly squeezed whole photograph.
    side = rng.uniform(MIN_REGION, 1.0) * short
    aspect = float(np.exp(rng.uniform(-0.25, 0.25)))
    rw, rh = min(w, side * aspect), min(h, side / aspect)
    left, top = rng.uniform(0, w - rw), rng.uniform(0, h - rh)
    box = (left, top, left + rw, top + rh)
    # Plain bilinear sampling without a low-pass filter first (as torchvision's tensor Resize did
    # by default, and cv2.resize does): fine detail survives as aliasing instead of being blurred.
    scene = _bilinear(src, box)
    if rng.random() < 0.5:
        scene = scene[:, ::-1]
    scene = np.rot90(scene, k=int(rng.integers(4)) if rng.random() < ROTATE_P else 0)
    # Mild photometric jitter: exposure, contrast, saturation and white balance.
    gray = scene.mean(-1, keepdims=True)
    scene = gray + (scene - gray) * rng.uniform(0.75, 1.25)
    scene = scene.mean() + (scene - scene.mean()) * rng.uniform(0.8, 1.2)
    scene = scene * rng.uniform(0.8, 1.2) * rng.uniform(0.92, 1.08, size=3)
    return np.clip(scene, 0.0, 1.0)


def _busy(crop: np.ndarray) -> bool:
    """Enough of the 9 patches of a (27, 27, 3) crop show more than a flat colour."""
    patches = crop.reshape(GRID, PATCH, GRID, PATCH, 3).transpose(0, 2, 1, 3, 4).reshape(9, -1, 3)
    return int((patches.std(axis=1).mean(-1) > FLAT_STD).sum()) >= MIN_BUSY


def _photo_images(photos: tuple[tuple[str, str], ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` (3, 27, 27) random windows of 64x64 scenes made from ``photos``, flat ones re-drawn."""
    sources = [_load_photo(package, relative) for package, relative in photos]
    images = np.empty((n, 3, SIDE, SIDE), dtype=np.float32)
    for k in range(n):
        for _ in range(MAX_TRIES):
            scene = _scene(sources[rng.integers(len(sources))], rng)
            top, left = rng.integers(SCENE - SIDE + 1, size=2)
            crop = scene[top : top + SIDE, left : left + SIDE]
            if _busy(crop):
                break
        images[k] = np.round(crop * 255).transpose(2, 0, 1) / 255.0
    return images


def build(
    out: Path,
    seed: int,
    variant: str = "easy",
    n_train: int | None = None,
    n_test: int = 1000,
    fashion_system_dir: str | None = None,
) -> np.ndarray:
    """Write train_data.npy, train_labels.npy and test_data.npy; return the (n_test, 9) answers."""
    rng_train, rng_test = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    if variant == "easy":
        system_dir = Path(fashion_system_dir) if fashion_system_dir else FASHION_SYSTEM_DIR
        train = _fashion_images("train", n_train or 2000, rng_train, system_dir)
        test = _fashion_images("test", n_test, rng_test, system_dir)
    elif variant == "hard":
        train = _photo_images(PHOTOS_TRAIN, n_train or 1000, rng_train)
        test = _photo_images(PHOTOS_TEST, n_test, rng_test)
    else:
        raise ValueError(f"variant must be 'easy' or 'hard', got {variant!r}")
    train_patches, train_labels = cut_and_shuffle(train, rng_train)
    test_patches, test_labels = cut_and_shuffle(test, rng_test)
    if variant == "easy":
        # Grayscale patches are stored without a channel axis: (N, 9, 9, 9).
        train_patches, test_patches = train_patches[:, :, 0], test_patches[:, :, 0]
    np.save(out / "train_data.npy", np.ascontiguousarray(train_patches), allow_pickle=False)
    np.save(out / "train_labels.npy", train_labels, allow_pickle=False)
    np.save(out / "test_data.npy", np.ascontiguousarray(test_patches), allow_pickle=False)
    return test_labels
