"""hidden_parity: the built files and the hidden six-way parity the task promises."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from checks import assert_public_arrays, load_public

from pytest_weirdml.tasks import TaskData, load_builder, load_task

ndimage = pytest.importorskip("scipy.ndimage")

NAME = "hidden_parity"
TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / NAME
SHAPES = {
    "train_data.npy": ((2000, 32, 32, 3), np.uint8),
    "train_labels.npy": ((2000,), np.int64),
    "test_data.npy": ((1000, 32, 32, 3), np.uint8),
}


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    return built(NAME)


@pytest.fixture(scope="module")
def module() -> Any:
    # The builder's own module, for its generator (factors, picture).
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def test_spec() -> None:
    spec = load_task(TASK_DIR)
    assert spec.name == NAME
    assert set(spec.markers) == {"images", "parity"}
    assert spec.time_limit_s == 120
    assert spec.public_files == tuple(SHAPES)
    assert spec.builder == TASK_DIR / "data.py"
    assert spec.reference_path.is_file()
    blocks = re.findall(r"```python\n(.*?)```", spec.prompt, re.S)
    assert len(blocks) == 1 and spec.prompt.count("```") == 2
    for name, (shape, _) in SHAPES.items():
        assert f"data/{name}" in blocks[0] and str(shape) in spec.prompt
    assert "np.savetxt('results/test_preds.txt', preds, fmt='%d')" in spec.prompt


def test_shapes_dtypes_and_balance(data: TaskData) -> None:
    assert_public_arrays(data, SHAPES)
    answers = data.answers()
    assert answers.shape == (1000,) and np.issubdtype(answers.dtype, np.integer)
    assert np.bincount(answers).tolist() == [500, 500]
    assert np.bincount(load_public(data, "train_labels.npy")).tolist() == [1000, 1000]


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    assert abs(np.mean(data.answers()[1:] == data.answers()[:-1]) - 0.5) < 0.06


def test_label_is_the_parity_of_six_fair_independent_bits(module: Any) -> None:
    lat, labels = module.factors(np.random.default_rng(3), 20000)
    bits = module.relevant_bits(lat)
    assert lat.shape == (20000, len(module.LATENTS)) and bits.shape == (20000, 6)
    assert np.array_equal(labels, np.bitwise_xor.reduce(bits, axis=1))
    assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 0.015)
    assert set(np.unique(lat[:, 1])) == set(range(module.N_DOTS[0], module.N_DOTS[1] + 1))
    # No bit, and no parity of up to five of them, says anything about the label; only all six do.
    for size in range(1, 6):
        for subset in itertools.combinations(range(6), size):
            parity = np.bitwise_xor.reduce(bits[:, list(subset)], axis=1)
            assert abs(np.mean(parity == labels) - 0.5) < 0.015, subset
    # Nor does any pair of bits agree with each other beyond chance.
    for i, j in itertools.combinations(range(6), 2):
        assert abs(np.mean(bits[:, i] == bits[:, j]) - 0.5) < 0.015, (i, j)


def test_obvious_cuts_miss_the_bits_that_decide(module: Any) -> None:
    """Cutting the outline's size at its median, its hue at red-versus-cyan and the bar's direction
    at flat-versus-upright leaves the six-way parity with no signal or a weak one."""
    lat, labels = module.factors(np.random.default_rng(6), 20000)
    bits = module.relevant_bits(lat)
    hue, angle, radius = lat[:, 2], lat[:, 3], lat[:, 4]
    # Each obvious cut, and the accuracy of the parity with it in place of the true bit: the size
    # band is invisible to a median cut; the hue and the direction cuts are 70 and 25 degrees off.
    obvious = {
        4: (radius >= np.median(radius), 0.5),
        2: (np.cos(np.radians(hue)) < 0, 11 / 18),
        3: (np.abs(angle - 90) < 45, 13 / 18),
    }
    for j, (cut, expected) in obvious.items():
        swapped = bits.copy()
        swapped[:, j] = cut
        agree = np.mean(np.bitwise_xor.reduce(swapped, axis=1) == labels)
        assert abs(agree - expected) < 0.02, (j, agree)
    swapped = bits.copy()
    for j, (cut, _) in obvious.items():
        swapped[:, j] = cut
    assert abs(np.mean(np.bitwise_xor.reduce(swapped, axis=1) == labels) - 0.5) < 0.02


def test_objects_stay_apart_inside_the_picture(module: Any) -> None:
    rng = np.random.default_rng(4)
    f, _ = module.factors(rng, 150)
    for row in f:
        _, scene = module.picture(rng, row)
        assert len(scene.centres) - 2 == int(row[1])
        assert np.all(scene.centres - scene.extents[:, None] >= 0)
        assert np.all(scene.centres + scene.extents[:, None] <= module.SIZE)
        for i, j in itertools.combinations(range(len(scene.centres)), 2):
            gap = np.hypot(*(scene.centres[i] - scene.centres[j])) - scene.extents[i] - scene.extents[j]
            assert gap >= module.GAP - 1e-9


def _blobs(image: np.ndarray) -> int:
    """Objects standing clearly out of the picture's own median colour."""
    rgb = image.astype(np.float64) / 255
    contrast = np.linalg.norm(rgb - np.median(rgb.reshape(-1, 3), axis=0), axis=2)
    labels, n = ndimage.label(contrast > 0.2, structure=np.ones((3, 3)))
    peaks = ndimage.maximum(contrast, labels, index=np.arange(1, n + 1))
    return int(np.sum(np.asarray(peaks) > 0.45))


def test_every_object_can_be_seen(module: Any) -> None:
    """Counting blobs finds the shape, the bar and every dot in nearly every picture."""
    rng = np.random.default_rng(5)
    f, _ = module.factors(rng, 200)
    found = []
    for row in f:
        image, scene = module.picture(rng, row)
        found.append(_blobs(image) == len(scene.centres))
    assert np.mean(found) > 0.95


def test_pixels_alone_say_nothing(data: TaskData) -> None:
    """The mean picture of each class is the same: no pixel, colour or place carries the label."""
    x = load_public(data, "train_data.npy").astype(np.float64)
    y = load_public(data, "train_labels.npy")
    diff = x[y == 1].mean(axis=0) - x[y == 0].mean(axis=0)
    # Per pixel and channel, the class means differ by sampling noise only (std of a mean of
    # 1000 values of spread about 60 is about 2.7, the difference of two about 3.8).
    assert np.abs(diff).mean() < 4.5
    # A nearest-class-mean rule on raw pixels is at chance on the test set.
    test = load_public(data, "test_data.npy").astype(np.float64).reshape(1000, -1)
    means = np.stack([x[y == c].reshape(len(x[y == c]), -1).mean(axis=0) for c in (0, 1)])
    preds = ((test[:, None, :] - means[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert abs(np.mean(preds == data.answers()) - 0.5) < 0.06
