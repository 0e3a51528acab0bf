from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from checks import assert_public_arrays, load_public

from pytest_weirdml.tasks import TaskData, load_builder, load_task

NAME = "digits_unsup"
TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / NAME
SHAPES = {
    "train_data_unlabeled.npy": ((15962, 15, 7, 3), np.uint8),
    "train_data_labeled.npy": ((26, 15, 7, 3), np.uint8),
    "train_labels.npy": ((26,), np.int64),
    "test_data.npy": ((500, 15, 7, 3), np.uint8),
}
# Nearest neighbour on raw pixels from the 26 labels must stay far below what a semi-supervised
# method reaches (the reference scores about 0.9); measured about 0.17 for seed 0.
ONE_NN_CEILING = 0.35


@pytest.fixture(scope="module")
def data(built) -> TaskData:  # type: ignore[no-untyped-def]
    return built(NAME)


def _gray(x: np.ndarray) -> np.ndarray:
    """Each image projected on its own main colour axis, digit positive: colour-blind pixels."""
    flat = x.reshape(len(x), -1, 3).astype(np.float64)
    flat -= flat.mean(1, keepdims=True)
    _, vecs = np.linalg.eigh(np.einsum("npi,npj->nij", flat, flat))
    g = np.einsum("npi,ni->np", flat, vecs[:, :, -1])
    g *= np.where(np.median(g, 1) > 0, -1.0, 1.0)[:, None]
    return g / (g.std(1, keepdims=True) + 1e-6)


def _nearest_labels(train: np.ndarray, labels: np.ndarray, query: np.ndarray) -> np.ndarray:
    d = (query**2).sum(1)[:, None] - 2 * query @ train.T + (train**2).sum(1)[None, :]
    return labels[d.argmin(1)]


def test_spec() -> None:
    spec = load_task(TASK_DIR)
    assert spec.name == NAME
    assert set(spec.markers) == {"images", "semi_supervised", "digits"}
    assert spec.time_limit_s == 120
    assert sorted(spec.public_files) == sorted(SHAPES)
    blocks = re.findall(r"```python\n(.*?)```", spec.prompt, re.S)
    assert len(blocks) == 1 and spec.prompt.count("```") == 2
    for name in SHAPES:
        assert name in spec.prompt and name in blocks[0]
    assert "results/test_preds.txt" in blocks[0]


def test_shapes_and_dtypes(data: TaskData) -> None:
    assert_public_arrays(data, SHAPES)
    answers = data.answers()
    assert answers.shape == (500,)
    assert np.issubdtype(answers.dtype, np.integer)


def test_label_ranges(data: TaskData) -> None:
    assert set(np.unique(data.answers())) == set(range(1, 7))
    assert set(np.unique(load_public(data, "train_labels.npy"))) == set(range(1, 7))


def test_images_vary_in_colour_and_show_a_digit(data: TaskData) -> None:
    x = load_public(data, "test_data.npy").astype(np.float64)
    mean_colour = x.mean((1, 2))
    # Colours change from image to image in every channel.
    assert np.all(mean_colour.std(0) > 25)
    # Every image has contrast (a digit over a background), none is blank.
    assert np.all(x.reshape(len(x), -1).std(1) > 8)
    assert x.min() >= 0 and x.max() <= 255


def test_builder_labels_match_answers(data: TaskData) -> None:
    """The builder's own label draw reproduces the answers, so its class shares describe the files."""
    spec = load_task(TASK_DIR)
    module = sys.modules[load_builder(spec).__module__]
    shares, pool, per_class = module.draw_labels(np.random.default_rng(spec.seed), 15962 + 500)
    assert np.array_equal(pool[15962:], data.answers())
    unl_share = np.bincount(pool[:15962], minlength=7)[1:] / 15962
    test_share = np.bincount(pool[15962:], minlength=7)[1:] / 500
    # Unlabelled and test share one distribution (500 test samples: allow sampling noise).
    assert np.abs(unl_share - test_share).max() < 0.06
    assert np.abs(unl_share - shares).max() < 0.02
    labels = load_public(data, "train_labels.npy")
    assert np.array_equal(np.bincount(labels, minlength=7)[1:], per_class)


def test_imbalance(data: TaskData) -> None:
    answers = data.answers()
    test_share = np.bincount(answers, minlength=7)[1:] / len(answers)
    assert 0.33 < test_share.max() < 0.47
    assert 0.005 < test_share.min() < 0.08
    counts = np.bincount(load_public(data, "train_labels.npy"), minlength=7)[1:]
    assert counts.sum() == 26 and set(counts) <= {4, 5}
    lab_share = counts / 26
    rarest, commonest = test_share.argmin(), test_share.argmax()
    # The labelled set over-represents the rare classes and under-represents the common one.
    assert counts[rarest] == 5
    assert lab_share[rarest] > 2.5 * test_share[rarest]
    assert lab_share[commonest] < 0.5 * test_share[commonest]


def test_unlabelled_looks_like_test(data: TaskData) -> None:
    """Label the unlabelled images by nearest test image: they must spread like the test labels."""
    test = _gray(load_public(data, "test_data.npy"))
    unl = _gray(load_public(data, "train_data_unlabeled.npy")[:4000])
    answers = data.answers()
    pred_unl = _nearest_labels(test, answers, unl)
    # The same classifier's bias on the test set itself (leave-one-out) is the fair comparison.
    d = (test**2).sum(1)[:, None] - 2 * test @ test.T + (test**2).sum(1)[None, :]
    np.fill_diagonal(d, np.inf)
    pred_test = answers[d.argmin(1)]
    unl_share = np.bincount(pred_unl, minlength=7)[1:] / len(pred_unl)
    test_share = np.bincount(pred_test, minlength=7)[1:] / len(pred_test)
    assert np.abs(unl_share - test_share).max() < 0.07
    assert unl_share.max() > 0.3


def test_one_nn_on_raw_pixels_is_weak(data: TaskData) -> None:
    lab = load_public(data, "train_data_labeled.npy").reshape(26, -1).astype(np.float64)
    labels = load_public(data, "train_labels.npy")
    test = load_public(data, "test_data.npy").reshape(500, -1).astype(np.float64)
    accuracy = np.mean(_nearest_labels(lab, labels, test) == data.answers())
    assert accuracy < ONE_NN_CEILING


def test_answers_not_in_public_files(data: TaskData) -> None:
    # No public array has one entry per test image other than the test images themselves.
    for name in SHAPES:
        if name != "test_data.npy":
            assert load_public(data, name).shape[0] != 500
    # The test images are not a copy of any labelled or unlabelled image (no label leakage by reuse).
    digest = {hashlib.sha1(img.tobytes()).hexdigest() for img in load_public(data, "train_data_unlabeled.npy")}
    digest |= {hashlib.sha1(img.tobytes()).hexdigest() for img in load_public(data, "train_data_labeled.npy")}
    assert not any(hashlib.sha1(img.tobytes()).hexdigest() in digest for img in load_public(data, "test_data.npy"))
