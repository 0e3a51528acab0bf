"""Calibrate sequence_rules_easy: sequence_rules's generic learners on data version 1.

    python tasks/sequence_rules_easy/calibrate.py                 # data seed 0, every learner
    python tasks/sequence_rules_easy/calibrate.py --seed 1 --only mlp --only gbm

The learners are those of tasks/sequence_rules/calibrate.py (the files have the same layout in
both versions): first tries on the raw values (``mlp``, ``mlp_log``, ``gbm``, which are
``GENERIC_LEARNERS`` for ``weirdml check-task``) and, for comparison, ``mlp_shape`` and
``gbm_diffs`` on scale-free shapes and differences. Here they see the data this task's task.toml
builds (``[data] params``: version 1, one rule per sequence).
"""

from __future__ import annotations

from pathlib import Path

from pytest_weirdml.tasks import import_file, load_task

HERE = Path(__file__).resolve().parent
_SHARED = import_file("_sequence_rules_calibrate", HERE.parent / "sequence_rules" / "calibrate.py")

# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS = _SHARED.GENERIC_LEARNERS


if __name__ == "__main__":
    raise SystemExit(_SHARED.main(dict(load_task(HERE).params), __doc__))
