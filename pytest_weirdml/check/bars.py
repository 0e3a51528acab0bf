"""Bars: the floor and the ceiling a task is measured between.

- ``bars.example`` (quick): the prompt's example script runs in the sandbox, writes predictions
  of the right shape, and scores no better than chance (it is the ``baseline`` model's script);
- ``bars.reference``: the reference on seeds 0, 1 and 2, one core, the task's limit, reaches 0.85;
- ``bars.generic``: the generic learners' figure on the task's own seed (their share s of the way
  from chance to the reference is judged by the calibration check, against the tier).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pytest_weirdml.check import learners
from pytest_weirdml.check.context import Context, share
from pytest_weirdml.check.findings import Finding, failed, guarded, not_applicable, passed
from pytest_weirdml.extract import code_blocks

REFERENCE_BAR = 0.85
REFERENCE_SEEDS = (0, 1, 2)


def example(ctx: Context) -> Finding:
    check = "bars.example"
    blocks = code_blocks(ctx.spec.prompt)
    if not blocks:
        return failed(
            check, "the prompt has no example script", "end prompt.md with an example script in a ```python block"
        )
    result, score = ctx.run(max(blocks, key=len), ctx.data())
    ctx.figures.example = score.accuracy
    chance, margin = ctx.chance(), ctx.margin()
    if score.zero_reason is not None:
        return failed(
            check,
            f"the example script scores 0: {score.zero_reason}",
            "make the example script run and write predictions of the right shape",
        )
    figure = f"the example script scores {score.accuracy:.3f} in {result.duration_s:.1f} s (chance {chance:.3f})"
    if score.accuracy > chance + margin:
        return failed(
            check,
            figure + ": above chance",
            "the example script only shows the format: make its predictions dummy ones",
        )
    return passed(check, figure)


def reference(ctx: Context) -> Finding:
    check = "bars.reference"
    path = ctx.spec.reference_path
    if not path.is_file():
        return failed(
            check, f"{path.name} not found", "add a reference solution: a strong script that budgets its time"
        )
    code = path.read_text(encoding="utf-8")
    lines = []
    for seed in REFERENCE_SEEDS:
        result, score = ctx.run(code, ctx.data(seed))
        ctx.figures.reference[seed] = score.accuracy
        reason = f", {score.zero_reason}" if score.zero_reason else ""
        lines.append(f"seed {seed}: {score.accuracy:.3f} in {result.duration_s:.0f} s{reason}")
    cores = len(ctx.cores)
    figure = f"the reference on {cores} core{'s' * (cores > 1)} within {ctx.spec.time_limit_s:g} s: " + "; ".join(lines)
    low = [seed for seed, score in ctx.figures.reference.items() if score < REFERENCE_BAR]
    if low:
        return failed(
            check,
            figure + f": under {REFERENCE_BAR} on seed{'s' * (len(low) > 1)} {', '.join(map(str, low))}",
            "strengthen reference.py (it is the ceiling s is measured against) "
            "or make the task's structure learnable in the limit",
        )
    return passed(check, figure)


def generic(ctx: Context) -> Finding:
    check = "bars.generic"
    missing = learners.sklearn_missing()
    if missing:
        return failed(check, missing, learners.INSTALL)
    source, scores = learners.measure(ctx.spec.directory, ctx.samples(), ctx.data().public_dir, 1.0)
    ctx.figures.generic["1x"] = scores
    ctx.figures.generic_source = source
    if not scores:
        return not_applicable(check, "no generic learner applies to these files")
    chance = ctx.chance()
    ref = ctx.figures.reference.get(ctx.seed)
    parts = [f"{name} {score:.3f}" for name, score in sorted(scores.items())]
    best = max(scores.values())
    s_text = f", s = {share(best, chance, ref):.2f}" if ref is not None else ""
    return passed(
        check, f"generic learners ({source}): {', '.join(parts)}; best {best:.3f} (chance {chance:.3f}{s_text})"
    )


def run(ctx: Context) -> list[Finding]:
    checks: list[tuple[str, Callable[[Context], Finding]]] = [("bars.example", example)]
    if not ctx.quick:
        checks += [("bars.reference", reference), ("bars.generic", generic)]
    return [guarded(name, partial(check, ctx)) for name, check in checks]
