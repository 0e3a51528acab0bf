"""Calibration of patch_match_easy on one data seed: patch_match's calibration on data version 3.

    python tasks/patch_match_easy/calibrate.py [--seed N] [--reference] [--quick]

The measures are those of tasks/patch_match/calibrate.py (the files have the same layout in both
versions): chance, the seam rule as given and in each candidate's best-fitting orientation, the
two first tries (an MLP on the raw picture and candidates, a CNN per input; ``GENERIC_LEARNERS``
for ``weirdml check-task``) and, with --reference, the shared reference.py. Here they see the
data this task's task.toml builds (``[data] params``: version 3, the candidates' pixels in place).
"""

from __future__ import annotations

from pathlib import Path

from pytest_weirdml.tasks import import_file, load_task

HERE = Path(__file__).resolve().parent
_SHARED = import_file("_patch_match_calibrate", HERE.parent / "patch_match" / "calibrate.py")

# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS = _SHARED.GENERIC_LEARNERS


if __name__ == "__main__":
    _SHARED.main(dict(load_task(HERE).params), __doc__)
