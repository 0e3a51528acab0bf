"""Checks shared by the task data tests: loading the public arrays and their shapes and dtypes.

Whether a rebuild is byte-identical, another seed gives other data and the public files keep the
answers out is checked for every task by ``weirdml check-task --quick`` (``build.deterministic``,
``build.seeded``, ``leaks.label_copy``; tests/tasks/test_check_quick.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_weirdml.tasks import TaskData


def load_public(data: TaskData, name: str) -> np.ndarray:
    return np.load(data.public_dir / name, allow_pickle=False)


def assert_public_arrays(data: TaskData, shapes: Mapping[str, tuple[tuple[int, ...], Any]]) -> None:
    """The public directory holds exactly the named arrays, each of its (shape, dtype)."""
    assert sorted(p.name for p in data.public_dir.iterdir()) == sorted(shapes)
    for name, (shape, dtype) in shapes.items():
        arr = load_public(data, name)
        assert arr.shape == shape and arr.dtype == dtype, name
