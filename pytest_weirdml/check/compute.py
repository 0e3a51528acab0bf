"""Compute sensitivity: a stand-in for the GPU the benchmark is meant for, which gives a script
50-100 times the compute of the one CPU core every figure here is measured on.

- ``compute.reference``: the reference at a quarter and four times the task's limit on one core,
  and at the limit on two cores (it reads its limit from ``WEIRDML_TIME_LIMIT_S``);
- ``compute.generic``: the generic learners at a quarter and four times their work. A hard twin
  whose best generic learner gains more than the margin from four times the work is flagged:
  on a GPU it would gain more, and the task would not stay hard there.
"""

from __future__ import annotations

from pytest_weirdml.check import learners
from pytest_weirdml.check.context import Context, two_cores
from pytest_weirdml.check.findings import Finding, failed, guarded, not_applicable, passed

FACTORS = (0.25, 4.0)


def _label(factor: float) -> str:
    return f"{factor:g}x"


def reference(ctx: Context) -> Finding:
    check = "compute.reference"
    path = ctx.spec.reference_path
    if not path.is_file():
        return not_applicable(check, "the task has no reference solution")
    code, data = path.read_text(encoding="utf-8"), ctx.data()
    if ctx.seed not in ctx.figures.reference:
        ctx.figures.reference[ctx.seed] = ctx.run(code, data)[1].accuracy
    for factor in FACTORS:
        ctx.figures.reference_compute[_label(factor)] = ctx.run(code, data, factor=factor)[1].accuracy
    cores = two_cores()
    if len(cores) > 1:
        ctx.figures.reference_compute["2 cores"] = ctx.run(code, data, cores=cores)[1].accuracy
    at = ctx.figures.reference_compute
    parts = [f"{key} {score:.3f}" for key, score in [("1x", ctx.figures.reference[ctx.seed]), *at.items()]]
    return passed(check, "the reference at " + ", ".join(parts))


def generic(ctx: Context) -> Finding:
    check = "compute.generic"
    missing = learners.sklearn_missing()
    if missing:
        return failed(check, missing, learners.INSTALL)
    public = ctx.data().public_dir
    if "1x" not in ctx.figures.generic:
        ctx.figures.generic_source, ctx.figures.generic["1x"] = learners.measure(
            ctx.spec.directory, ctx.samples(), public, 1.0
        )
    for factor in FACTORS:
        ctx.figures.generic[_label(factor)] = learners.measure(ctx.spec.directory, ctx.samples(), public, factor)[1]
    best = {key: ctx.figures.best_generic(key) for key in ("0.25x", "1x", "4x")}
    if best["1x"] is None or best["4x"] is None:
        return not_applicable(check, "no generic learner applies to these files")
    gain, margin = best["4x"] - best["1x"], ctx.margin()
    figure = "best generic learner at " + ", ".join(f"{k} {v:.3f}" for k, v in best.items() if v is not None)
    figure += f": {gain:+.3f} from four times the work (margin {margin:.3f})"
    if ctx.spec.calibration.tier == "hard" and gain > margin:
        return failed(
            check,
            figure + ": its difficulty melts with compute",
            "put the difficulty in what the data means (structure to find, shifts, few labels), "
            "not in how long a generic learner trains",
        )
    return passed(check, figure)


def run(ctx: Context) -> list[Finding]:
    return [guarded("compute.reference", lambda: reference(ctx)), guarded("compute.generic", lambda: generic(ctx))]
