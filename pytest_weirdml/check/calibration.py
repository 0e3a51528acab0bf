"""Calibration: the shipped blind runs of a strong model against the targets of the task's tier.

Every directory ``tasks/<task>/calibration/`` and ``calibration/run*/`` that holds a
``records.jsonl`` is one blind run (a run recorded on another data version than the task's is
stale: named, not counted) (a fresh contestant that saw only the conversation, under the
published protocol). Per run: the first try, the best of five, and their share
s = (score - chance) / (reference - chance) of the way from chance to the reference on the run's
data seed; the targets are judged on the median over runs.

| tier | runs | first try (median s) | best of five (median s) | generic learners (s) |
| --- | ---: | --- | --- | --- |
| easy | >= 1 | >= 0.5 | | >= 0.25 |
| hard | >= 3 | <= 0.5 | 0.3 to 0.9 | <= 0.25 |

A task that follows a published one (``[calibration] published``) is calibrated by the
published field; its blind runs, if any, must keep their best of five at most the published
table's best (``published_best``). The reference and generic-learner figures come from this
check's own measurements or, in a quick check, from the saved full check (``calibration/check.json``).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from pytest_weirdml.check.context import Context, share
from pytest_weirdml.check.findings import SAVED_FILE, BlindRun, Finding, failed, not_applicable, passed
from pytest_weirdml.session import read_runs

CALIBRATION_DIR = "calibration"


@dataclass(frozen=True)
class Targets:
    runs: int
    first_min: float | None = None
    first_max: float | None = None
    best_min: float | None = None
    best_max: float | None = None
    generic_min: float | None = None
    generic_max: float | None = None


TARGETS = {
    "easy": Targets(runs=1, first_min=0.5, generic_min=0.25),
    "hard": Targets(runs=3, first_max=0.5, best_min=0.3, best_max=0.9, generic_max=0.25),
}


def run_directories(task_dir: Path) -> list[Path]:
    root = task_dir / CALIBRATION_DIR
    found = [root] if (root / "records.jsonl").is_file() else []
    return found + sorted(p.parent for p in root.glob("run*/records.jsonl"))


def blind_runs(ctx: Context) -> list[BlindRun]:
    runs = []
    for directory in run_directories(ctx.spec.directory):
        for run in read_runs([directory]):
            if run.task != ctx.spec.name or not run.scored or not run.iterations:
                continue
            seed = run.plan.data_seed if run.plan and run.plan.data_seed is not None else ctx.seed
            name = str(directory.relative_to(ctx.spec.directory))
            key = run.plan.data_key if run.plan else ""
            runs.append(BlindRun(name, run.model, seed, run.iterations[0].score, run.score, data_key=key))
    return runs


def _version(data_key: str) -> int | None:
    match = re.match(r"v(\d+)-", data_key)
    return int(match.group(1)) if match else None


def _reference(ctx: Context, seed: int) -> float | None:
    for figures in (ctx.figures, ctx.saved):
        if figures is not None and seed in figures.reference:
            return figures.reference[seed]
    return None


def _generic(ctx: Context) -> float | None:
    for figures in (ctx.figures, ctx.saved):
        if figures is not None and figures.best_generic() is not None:
            return figures.best_generic()
    return None


def _within(value: float, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"between {low:g} and {high:g}"
    return f"at least {low:g}" if low is not None else f"at most {high:g}"


def run(ctx: Context) -> list[Finding]:
    calibration = ctx.spec.calibration
    runs = blind_runs(ctx)
    findings = []
    stale = [r for r in runs if _version(r.data_key) not in (None, ctx.spec.data_version)]
    if stale:
        where = ", ".join(f"{r.directory} ({r.data_key})" for r in stale)
        findings.append(
            failed(
                "calibration.stale",
                f"blind runs of another data version than {ctx.spec.data_version}, not counted: {where}",
                "keep only runs of the current data version under calibration/ (earlier ones live in the history)",
            )
        )
        runs = [r for r in runs if r not in stale]
    if calibration.tier is None or calibration.family is None:
        findings.append(
            failed(
                "calibration.tier",
                "the task names no family and tier",
                'declare them in task.toml: [calibration] family = "...", tier = "easy" or "hard"',
            )
        )
    missing = sorted({r.seed for r in runs if _reference(ctx, r.seed) is None})
    if missing:
        findings.append(
            failed(
                "calibration.reference",
                f"no measured reference on data seed {', '.join(map(str, missing))} (the runs' data)",
                f"run the full check and keep it: weirdml check-task {ctx.spec.directory} --save",
            )
        )
        return findings
    runs = [_with_shares(ctx, r) for r in runs]
    ctx.figures.blind_runs = runs
    if calibration.published is not None:
        return [*findings, _published(ctx, runs)]
    if calibration.tier is None:
        return findings
    targets = TARGETS[calibration.tier]
    return [*findings, *_tier(ctx, runs, targets)]


def _with_shares(ctx: Context, run: BlindRun) -> BlindRun:
    chance, ref = ctx.chance(run.seed), _reference(ctx, run.seed)
    assert ref is not None
    return BlindRun(
        run.directory,
        run.model,
        run.seed,
        run.first,
        run.best,
        share(run.first, chance, ref),
        share(run.best, chance, ref),
    )


def _runs_text(runs: list[BlindRun]) -> str:
    return "; ".join(
        f"{r.directory}: first {r.first:.3f} (s {r.s_first:.2f}), best {r.best:.3f} (s {r.s_best:.2f})" for r in runs
    )


def _published(ctx: Context, runs: list[BlindRun]) -> Finding:
    check, best = "calibration.published", ctx.spec.calibration.published_best
    name = ctx.spec.calibration.published
    if not runs or best is None:
        return not_applicable(check, f"follows the published {name}: calibrated by the published field")
    median = statistics.median(r.best for r in runs)
    figure = f"{len(runs)} blind run{'s' * (len(runs) > 1)} ({_runs_text(runs)}); "
    figure += f"median best of five {median:.3f}, published best {best:.3f}"
    if median > best:
        return failed(
            check,
            figure + ": a strong model beats the published field's best",
            "make the task harder where its data allows",
        )
    return passed(check, figure)


def _tier(ctx: Context, runs: list[BlindRun], targets: Targets) -> list[Finding]:
    tier = ctx.spec.calibration.tier
    findings = []
    if len(runs) < targets.runs:
        findings.append(
            failed(
                "calibration.runs",
                f"{len(runs)} blind run{'s' * (len(runs) != 1)}; a {tier} task needs at least {targets.runs}",
                "play more blind runs (each a fresh contestant) and ship each in calibration/runN/",
            )
        )
    else:
        findings.append(passed("calibration.runs", f"{len(runs)} blind runs ({_runs_text(runs)})"))
    if runs:
        findings.append(
            _median("calibration.first_try", [r.s_first for r in runs], targets.first_min, targets.first_max, tier)
        )
        if targets.best_min is not None or targets.best_max is not None:
            findings.append(
                _median("calibration.best_of_five", [r.s_best for r in runs], targets.best_min, targets.best_max, tier)
            )
    findings.append(_generic_share(ctx, targets, tier))
    return findings


_FIXES = {
    "calibration.first_try": "a strong first try should find part, not all, of the structure on a hard twin "
    "(and most of it on an easy one)",
    "calibration.best_of_five": "at chance: give partial credit as a model finds more of the structure; "
    "saturated: put more structure to find in the data",
    "calibration.generic": "generic learners must reach a quarter of the way on an easy twin "
    "and stay under it on a hard one",
}


def _median(check: str, shares: list[float | None], low: float | None, high: float | None, tier: str | None) -> Finding:
    values = [s for s in shares if s is not None]
    median = statistics.median(values)
    each = ", ".join(f"{v:.2f}" for v in values)
    figure = f"median s {median:.2f} over {len(values)} run{'s' * (len(values) > 1)} ({each}); "
    figure += f"a {tier} task's target is {_bounds(low, high)}"
    if not _within(median, low, high):
        at_chance = " (at chance)" if median < 0.1 else ""
        return failed(check, figure + at_chance, _FIXES[check])
    return passed(check, figure)


def _generic_share(ctx: Context, targets: Targets, tier: str | None) -> Finding:
    check = "calibration.generic"
    generic, ref = _generic(ctx), _reference(ctx, ctx.seed)
    if generic is None or ref is None:
        return failed(
            check,
            "no generic-learner figure measured",
            f"run the full check and keep it: weirdml check-task {ctx.spec.directory} --save",
        )
    s = share(generic, ctx.chance(), ref)
    bounds = _bounds(targets.generic_min, targets.generic_max)
    figure = f"best generic learner {generic:.3f}, s = {s:.2f}; a {tier} task's target is {bounds}"
    if not _within(s, targets.generic_min, targets.generic_max):
        return failed(check, figure, _FIXES[check])
    return passed(check, figure)


def saved_path(task_dir: Path) -> Path:
    """Where a task's saved full check lives, beside its blind runs."""
    return task_dir / CALIBRATION_DIR / SAVED_FILE
