"""Checks shared by the task data tests: the public arrays, no answers in the public files,
byte-identical rebuilds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_weirdml.tasks import TaskData, TaskSpec


def load_public(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def assert_public_arrays(data: TaskData, shapes: Mapping[str, tuple[tuple[int, ...], Any]]) -> None:
    """The public directory holds exactly the named arrays, each of its (shape, dtype)."""
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(shapes)
    for name, (shape, dtype) in shapes.items():
        arr = load_public(data, name)
        assert arr.shape == shape and arr.dtype == dtype, name


def assert_answers_not_in_public_files(data: TaskData) -> None:
    """No public file holds the answers as raw bytes of a common dtype, or as text."""
    answers = data.answers()
    rows = answers.reshape(len(answers), -1)
    needles = {
        answers.astype(dtype).tobytes() for dtype in (np.int64, np.int32, np.int16, np.uint8, np.float32, np.float64)
    }
    for sep in (" ", "", "\n"):
        needles.add(sep.join(map(str, answers.reshape(-1)[:64])).encode())
    needles.add("\n".join(" ".join(map(str, row)) for row in rows[:20]).encode())
    for path in data.public_dir.iterdir():
        blob = path.read_bytes()
        for needle in needles:
            assert needle not in blob, f"the answers are in {path.name}"
    # Nor does the order of the test set give them away.
    assert not np.array_equal(rows[:, 0], np.sort(rows[:, 0]))


def assert_rebuild_identical_and_seeded(
    spec: TaskSpec, build: Callable[..., np.ndarray], data: TaskData, tmp_path: Path, **small: int
) -> None:
    """A fresh build gives the cached build's bytes; another seed (built with ``small`` sizes to stay
    quick) gives other data in every file named ``*_data.npy`` and other answers."""
    fresh, other_dir = tmp_path / "fresh", tmp_path / "other"
    fresh.mkdir()
    other_dir.mkdir()
    answers = build(fresh, spec.seed, **spec.params)
    assert np.array_equal(answers, data.answers())
    for name in spec.public_files:
        assert (fresh / name).read_bytes() == (data.public_dir / name).read_bytes(), name
    other = build(other_dir, spec.seed + 1, **spec.params, **small)
    for name in spec.public_files:
        if name.endswith("_data.npy"):
            theirs = np.load(other_dir / name)
            assert not np.array_equal(np.load(fresh / name)[: len(theirs)], theirs), name
    assert not np.array_equal(answers[: len(other)], other)
