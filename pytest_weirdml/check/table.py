"""The task table: one Markdown row per checked task with its tier, chance, reference, generic
learners, each blind run's first try and best of five with their s, and the checks that failed.
Figures not measured in this run come from the task's saved check (``calibration/check.json``)."""

from __future__ import annotations

import statistics
from pathlib import Path

from pytest_weirdml.check.calibration import saved_path
from pytest_weirdml.check.findings import Figures, TaskReport, load_figures

HEADER = (
    "| task | family, tier | chance | reference, seeds 0 / 1 / 2 | generic learners (s) "
    "| blind runs: first try / best of five (s) | failed checks |",
    "| --- | --- | ---: | --- | --- | --- | --- |",
)


def _merged(report: TaskReport) -> Figures:
    figures = report.figures
    try:
        saved = load_figures(saved_path(Path(report.directory)))
    except ValueError:
        saved = None
    if saved is None:
        return figures
    return Figures(
        chance=figures.chance or saved.chance,
        reference=figures.reference or saved.reference,
        generic=figures.generic or saved.generic,
        blind_runs=figures.blind_runs,
    )


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def row(report: TaskReport) -> str:
    figures = _merged(report)
    chance = next(iter(figures.chance.values()), None)
    reference = " / ".join(f"{figures.reference[s]:.3f}" for s in sorted(figures.reference)) or "-"
    generic, ref0 = figures.best_generic(), figures.reference.get(0)
    generic_text = "-"
    if generic is not None:
        share = (generic - chance) / (ref0 - chance) if chance is not None and ref0 and ref0 > chance else None
        generic_text = f"{generic:.3f} ({_s(share)})"
    runs = figures.blind_runs
    runs_text = "; ".join(f"{r.first:.3f} / {r.best:.3f} ({_s(r.s_first)} / {_s(r.s_best)})" for r in runs)
    if len(runs) > 1 and all(r.s_first is not None and r.s_best is not None for r in runs):
        median_first = statistics.median(r.s_first for r in runs if r.s_first is not None)
        median_best = statistics.median(r.s_best for r in runs if r.s_best is not None)
        runs_text += f"; median s {median_first:.2f} / {median_best:.2f}"
    failed = ", ".join(f.check for f in report.failures) or "none"
    tier = f"{report.family or '-'}, {report.tier or '-'}"
    chance_text = "-" if chance is None else f"{chance:.3f}"
    return f"| {report.task} | {tier} | {chance_text} | {reference} | {generic_text} | {runs_text or '-'} | {failed} |"


def lines(reports: list[TaskReport]) -> list[str]:
    return [*HEADER, *(row(r) for r in reports)]
