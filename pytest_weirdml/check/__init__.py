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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_weirdml.check import bars, build, calibration, compute, leaks
from pytest_weirdml.check.context import Context, one_core
from pytest_weirdml.check.findings import Finding, TaskReport, failed, guarded, load_figures, passed
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
    """A group's findings; what fails before its checks run (the layout, the build) is one failed
    finding named for the group."""
    findings: list[Finding] = []

    def run() -> Finding:
        findings.extend(GROUPS[group](ctx))
        return passed(group, "")

    outcome = guarded(group, run)
    return findings if not outcome.failed else [*findings, outcome]
