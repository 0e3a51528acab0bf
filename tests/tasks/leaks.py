"""Checks shared by the task data tests: the hidden answers must not hide in the public files."""

from __future__ import annotations

import numpy as np

from pytest_weirdml.tasks import TaskData


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
