"""``weirdml check-task``: whether a task measures what it should, leaks nothing, and holds on
faster hardware.

Checks come in groups, run in this order (each module's docstring says what its checks are):

- ``build`` (``build.py``): determinism, seeds, files as the prompt says, train and test apart;
- ``leaks`` (``leaks.py``): row index, position, byte length, element order and copied labels
  carry nothing; the reference does not read the order of a set's elements;
- ``bars`` (``bars.py``): the example script at chance, the reference over 0.85 on seeds 0-2,
  the generic learners' figure;
- ``compute`` (``compute.py``): the reference and the generic learners under more and less compute;
- ``calibration`` (``calibration.py``): the shipped blind runs against the tier's targets.

A quick check (``--quick``: build, leaks without the reference, the example script) takes
seconds and is what CI runs on every task; the full check runs references for minutes and its
report is kept beside the blind runs (``--save``: ``calibration/check.json``), where the
calibration check of a later quick or partial run finds the reference and generic figures.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_weirdml.check import bars, build, calibration, compute, leaks
from pytest_weirdml.check.context import Context, one_core
from pytest_weirdml.check.findings import Finding, TaskReport, failed, load_figures
from pytest_weirdml.errors import DataUnavailable, TaskError
from pytest_weirdml.sandbox import Sandbox
from pytest_weirdml.tasks import TaskSpec

GROUPS: dict[str, Callable[[Context], list[Finding]]] = {
    "build": build.run,
    "leaks": leaks.run,
    "bars": bars.run,
    "compute": compute.run,
    "calibration": calibration.run,
}
QUICK_GROUPS = ("build", "leaks", "bars")

__all__ = ["GROUPS", "QUICK_GROUPS", "CheckSettings", "TaskReport", "check_task"]


@dataclass(frozen=True)
class CheckSettings:
    """How to check: which groups, quick or full, where the data cache is, how to open a sandbox,
    and the one core single-core runs use."""

    cache: Path
    open_sandbox: Callable[[], Sandbox]
    groups: tuple[str, ...] = tuple(GROUPS)
    quick: bool = False
    cores: tuple[int, ...] = ()


def check_task(
    spec: TaskSpec, settings: CheckSettings, on_finding: Callable[[Finding], None] | None = None
) -> TaskReport:
    """Every chosen check of one task; a check that cannot run is a failed finding naming why."""
    mode = "quick" if settings.quick else ("full" if settings.groups == tuple(GROUPS) else "partial")
    report = TaskReport(spec.name, str(spec.directory), spec.calibration.family, spec.calibration.tier, mode)
    ctx = Context(spec, settings.cache, settings.open_sandbox, quick=settings.quick, cores=settings.cores or one_core())
    ctx.figures = report.figures
    try:
        ctx.saved = load_figures(calibration.saved_path(spec.directory))
    except ValueError as exc:
        _add(report, failed("calibration.saved", str(exc), "run the full check again with --save"), on_finding)
    try:
        for group in settings.groups:
            for finding in _run_group(group, ctx):
                _add(report, finding, on_finding)
    finally:
        ctx.close()
    return report


def _add(report: TaskReport, finding: Finding, on_finding: Callable[[Finding], None] | None) -> None:
    report.findings.append(finding)
    if on_finding is not None:
        on_finding(finding)


def _run_group(group: str, ctx: Context) -> Sequence[Finding]:
    try:
        return GROUPS[group](ctx)
    except DataUnavailable as exc:
        return [failed(group, f"the data cannot be built here: {exc}", "install what the message names")]
    except (TaskError, ValueError, OSError) as exc:
        return [failed(group, f"{type(exc).__name__}: {exc}", "fix the task directory as the message says")]
    except Exception as exc:  # a broken builder or learner must not stop the other tasks' checks
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [
            failed(
                group,
                f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno})",
                "fix the task's code the message points at",
            )
        ]
