"""The quick task check (`weirdml check-task --quick`: the build, the leaks, the example script)
on every bundled task, in the real local sandbox. A new task needs no test file for these. And
the calibration check on the shipped blind runs, with the figures of the saved full checks.

What the check finds today and the redesign of the suite removes is listed by name: the test
asserts the checker still finds exactly that, so a fix shows up as a failure to update here."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_weirdml.check import QUICK_GROUPS, CheckSettings, check_task
from pytest_weirdml.sandbox.choose import open_sandbox
from pytest_weirdml.tasks import load_task

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
TASKS = sorted(p.parent.name for p in TASKS_DIR.glob("*/task.toml"))

# shapes_crowd: the outline points are written in runs along each outline, so the order of the
# points in the file tells the shapes apart where the points as a set do not.
# sequence_rules_easy: its data is data version 1 of sequence_rules byte for byte (the data its
# blind run played), where 8 of 1000 test sequences (consecutive primes from a low start) are
# also training sequences.
KNOWN = {"shapes_crowd": {"leaks.element_order"}, "sequence_rules_easy": {"build.disjoint"}}


@pytest.mark.parametrize("task", TASKS)
def test_quick_check(task: str, data_cache: Path) -> None:
    settings = CheckSettings(
        cache=data_cache, open_sandbox=lambda: open_sandbox("local"), groups=QUICK_GROUPS, quick=True
    )
    report = check_task(load_task(TASKS_DIR / task), settings)
    failures = {f.check: f"{f.message} (fix: {f.fix})" for f in report.failures}
    assert set(failures) == KNOWN.get(task, set()), failures
    checks = {f.check for f in report.findings}
    assert {"build.deterministic", "build.seeded", "build.disjoint", "leaks.row_index", "bars.example"} <= checks


@pytest.mark.parametrize("task", sorted(p.parent.parent.name for p in TASKS_DIR.glob("*/calibration/check.json")))
def test_the_saved_full_check_reads_back(task: str, data_cache: Path) -> None:
    settings = CheckSettings(cache=data_cache, open_sandbox=lambda: open_sandbox("local"), groups=("calibration",))
    report = check_task(load_task(TASKS_DIR / task), settings)
    assert "calibration.reference" not in {f.check for f in report.failures}, report.failures
    assert report.figures.blind_runs or not (TASKS_DIR / task / "calibration" / "records.jsonl").exists()


def test_hidden_parity_s_blind_run_sits_at_chance(data_cache: Path) -> None:
    """The shipped strong-model run is at chance on all five tries: a hard task's best of five
    must reach s = 0.3, and one run is too few."""
    settings = CheckSettings(cache=data_cache, open_sandbox=lambda: open_sandbox("local"), groups=("calibration",))
    report = check_task(load_task(TASKS_DIR / "hidden_parity"), settings)
    failures = {f.check: f.message for f in report.failures}
    assert set(failures) == {"calibration.runs", "calibration.best_of_five"}, failures
    assert "1 blind run; a hard task needs at least 3" in failures["calibration.runs"]
    assert failures["calibration.best_of_five"].startswith("median s -0.01 over 1 run")
    assert failures["calibration.best_of_five"].endswith("(at chance)")
    (run,) = report.figures.blind_runs
    assert (run.first, run.best) == (0.487, 0.496)
