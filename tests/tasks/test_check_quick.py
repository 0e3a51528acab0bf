"""The quick task check (`weirdml check-task --quick`: the build, the leaks, the example script)
on every bundled task, in the real local sandbox. A new task needs no test file for these.

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
KNOWN = {"shapes_crowd": {"leaks.element_order"}}


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
