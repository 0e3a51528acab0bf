"""sequence_rules: the built files and the rules the task promises."""

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

NAME = "sequence_rules"
TASK_DIR = Path(__file__).resolve().parents[2] / "tasks" / NAME
SHAPES = {
    "train_data.npy": ((1600, 12), np.int64),
    "train_labels.npy": ((1600,), np.int64),
    "test_data.npy": ((1000, 12), np.int64),
}
N_FAMILIES = 8
NEAREST_BOUND = 0.3


@pytest.fixture(scope="module")
def data(built: Callable[[str], TaskData]) -> TaskData:
    return built(NAME)


@pytest.fixture(scope="module")
def module() -> Any:
    # The builder's own module, for its generator and its constants.
    return sys.modules[load_builder(load_task(TASK_DIR)).__module__]


def _digit_sums(x: np.ndarray) -> np.ndarray:
    x, total = np.abs(x), np.zeros_like(x)
    while np.any(x):
        total, x = total + x % 10, x // 10
    return total


def _constant(a: np.ndarray) -> np.ndarray:
    return np.all(a == a[..., :1], axis=-1)


def _rules(x: np.ndarray) -> list[np.ndarray]:
    """Per family, whether each run (..., terms) obeys its rule exactly, all along."""
    d = np.diff(x, axis=-1)
    same = _constant(d)
    two = np.all(d[..., 2:] == d[..., :-2], axis=-1)
    return [
        same,
        two & ~same,
        np.all(d[..., 3:] == d[..., :-3], axis=-1) & ~two,
        _constant(np.diff(d, axis=-1)) & ~same,
        _constant(d - _digit_sums(x[..., :-1])),
        _constant(d[..., 2:] - d[..., 1:-1] - d[..., :-2]) & ~same,
        _constant(d - x[..., :-1] % 10),
        np.any([np.all((d % m == 0) & (d <= 4 * m), axis=-1) for m in range(7, 14)], axis=0),
    ]


def _splits(run: int) -> np.ndarray:
    """Every choice of ``run`` of the 12 positions that holds the first, in order."""
    return np.array([(0, *rest) for rest in itertools.combinations(range(1, 12), run - 1)])


def test_spec() -> None:
    spec = load_task(TASK_DIR)
    assert spec.name == NAME
    assert set(spec.markers) == {"sequence", "numbers", "hard"}
    assert spec.time_limit_s == 120 and spec.data_version == 2
    assert spec.public_files == tuple(SHAPES)
    # The builder also makes data version 1 for sequence_rules_easy; this task takes its default.
    assert spec.builder == TASK_DIR / "data.py" and dict(spec.params) == {}
    assert (spec.calibration.family, spec.calibration.tier) == ("sequence_rules", "hard")
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
    assert np.bincount(answers, minlength=N_FAMILIES).tolist() == [125] * N_FAMILIES
    assert np.bincount(load_public(data, "train_labels.npy"), minlength=N_FAMILIES).tolist() == [200] * N_FAMILIES
    for name in ("train_data.npy", "test_data.npy"):
        assert load_public(data, name).min() > 0


def test_neighbouring_test_answers_look_unrelated(data: TaskData) -> None:
    answers = data.answers()
    assert abs(np.mean(answers[1:] == answers[:-1]) - 1 / N_FAMILIES) < 0.05


def test_every_run_follows_its_rule(module: Any) -> None:
    """Each rule's runs obey it exactly; the runs of other rules almost never do."""
    rng = np.random.default_rng(7)
    for family in range(N_FAMILIES):
        runs = np.stack([module.run(rng, family, int(rng.integers(500, 30000)), module.RUN) for _ in range(200)])
        assert np.all(np.diff(runs, axis=1) > 0), family
        for other, holds in enumerate(_rules(runs)):
            if other == family:
                assert np.all(holds), (family, np.flatnonzero(~holds)[:3])
            elif {family, other} not in ({0, 7}, {1, 7}):
                # Constant or alternating steps that share a modulus pass the residue rule; nothing else
                # overlaps much.
                assert np.mean(holds) < 0.1, (family, other)


def test_labelled_run_holds_the_first_term_and_the_whole_sequence_no_rule(data: TaskData, module: Any) -> None:
    """The reference's premise: 6 of the 12 terms, the first among them, obey the label's rule."""
    x, y = load_public(data, "train_data.npy")[:160], load_public(data, "train_labels.npy")[:160]
    split = _splits(module.RUN)
    passes = np.stack(_rules(x[:, split]), axis=-1)  # (sequences, splits, rules)
    assert np.all(passes[np.arange(len(y)), :, y].any(axis=1))
    # The merged sequence itself obeys no rule: only the right subset does.
    assert np.mean(np.any(_rules(x), axis=0)) < 0.02


def test_sequences_increase_and_steps_look_alike(data: TaskData) -> None:
    """Distinct increasing terms, merged steps of the same size in every family, nearest neighbours near chance."""
    x, y = load_public(data, "train_data.npy").astype(np.float64), load_public(data, "train_labels.npy")
    assert np.all(np.diff(x, axis=1) > 0)
    step = np.diff(x, axis=1)
    for family in range(N_FAMILIES):
        assert 10 <= np.median(step[y == family]) <= 16, family
    shape = (x - x[:, :1]) / step.mean(axis=1, keepdims=True)
    test = load_public(data, "test_data.npy").astype(np.float64)
    test_shape = (test - test[:, :1]) / np.diff(test, axis=1).mean(axis=1, keepdims=True)
    dist = ((test_shape[:, None, :] - shape[None, :, :]) ** 2).sum(axis=2)
    # The reference scores about 0.98.
    assert np.mean(y[dist.argmin(axis=1)] == data.answers()) < NEAREST_BOUND
