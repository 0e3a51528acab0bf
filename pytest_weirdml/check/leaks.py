"""Leak checks: what carries no task meaning must not predict the labels.

A generic learner (gradient-boosted trees, one per answer column) fits each set of meaningless
features on the training samples and predicts the test samples; it must stay within the margin
of chance (three standard errors, at least 0.02):

- ``leaks.row_index``: a sample's index and its residues (mod 2, 3, 4, 5, 7, 8, 10);
- ``leaks.position``: where a sample starts in its file (text files; an array's is its index);
- ``leaks.byte_length``: a text sample's length in bytes;
- ``leaks.element_order``: for samples that are sets (ragged files, ``[check] sets``): statistics
  of the elements in file order (steps between neighbours, lag-1 autocorrelation) against the same
  statistics after each sample's elements are shuffled; the file order must add nothing;
- ``leaks.label_copy``: no public file holds the test answers (as the bytes of a common dtype or
  as text), their order is not sorted, and no position of a training sample equals its label (or
  one of its label's columns) far more often than the majority label share;
- ``leaks.reference_order`` (full check): the reference scores the same on the samples with
  their elements shuffled.

A task states which apply: ``[check] leaks = ["row_index", ...]`` (default: all), and a set task
whose element order is meaningful says so with ``order_meaningful = true`` (its prompt must say
what the order means).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from pytest_weirdml.check.context import Context
from pytest_weirdml.check.findings import Finding, failed, guarded, not_applicable, passed
from pytest_weirdml.check.learners import INSTALL, fit_predict, gbm, sklearn_missing
from pytest_weirdml.check.samples import Column, Samples, elements, with_elements_shuffled
from pytest_weirdml.tasks import TaskData

KINDS = ("row_index", "position", "byte_length", "element_order", "label_copy")
RESIDUES = (2, 3, 4, 5, 7, 8, 10)
COPY_AGREEMENT = 0.9
QUICK_SAMPLES = 4000
# A few meaningless features need few boosting rounds (30): enough to fit a parity or a residue.
LEAK_WORK = 0.3


def declared_kinds(ctx: Context) -> tuple[str, ...]:
    value = ctx.spec.check.get("leaks", list(KINDS))
    unknown = sorted(set(value) - set(KINDS)) if isinstance(value, list) else value
    if unknown:
        raise ValueError(f"task.toml [check] leaks: unknown {unknown}; choose from {', '.join(KINDS)}")
    return tuple(value)


def run(ctx: Context) -> list[Finding]:
    missing = sklearn_missing()
    if missing:
        return [failed("leaks", missing, INSTALL)]
    kinds = declared_kinds(ctx)
    samples = ctx.samples()
    chance, margin = ctx.chance(), ctx.margin()
    checks = {
        "element_order": lambda: _element_order(ctx, samples, margin),
        "label_copy": lambda: _answers_in_files(ctx.data().public_dir, ctx.data().answers()) or _label_copy(samples),
    }
    findings = []
    for kind in KINDS:
        if kind not in kinds:
            findings.append(not_applicable(f"leaks.{kind}", "the task declares it does not apply ([check] leaks)"))
            continue
        measure = checks.get(kind, lambda kind=kind: _meaningless(kind, samples, chance, margin))
        findings.append(guarded(f"leaks.{kind}", measure))
    if not ctx.quick:
        findings.append(guarded("leaks.reference_order", lambda: reference_order(ctx)))
    return findings


def _features(kind: str, columns: tuple[Column, ...]) -> np.ndarray | None:
    count = len(columns[0])
    if kind == "row_index":
        index = np.arange(count)
        return np.column_stack([index, index / max(count, 1)] + [index % r for r in RESIDUES]).astype(np.float64)
    text = [c for c in columns if not c.numeric]
    if not text:
        return None
    if kind == "position":
        return np.column_stack([c.offsets for c in text] + [c.offsets % r for c in text for r in RESIDUES])
    return np.column_stack([[len(raw) for raw in c.raw] for c in text]).astype(np.float64)


def _score(x: np.ndarray, xt: np.ndarray, samples: Samples) -> float:
    preds = fit_predict(gbm(LEAK_WORK), x, samples.labels, xt)
    return float(np.mean(preds == samples.answers))


def _meaningless(kind: str, samples: Samples, chance: float, margin: float) -> Finding:
    x, xt = _features(kind, samples.train), _features(kind, samples.test)
    check = f"leaks.{kind}"
    if x is None or xt is None:
        return not_applicable(check, "no text file: a sample's position and length are fixed by its index")
    score = _score(x, xt, samples)
    figure = (
        f"a learner on {kind.replace('_', ' ')} alone scores {score:.3f} (chance {chance:.3f}, margin {margin:.3f})"
    )
    if score > chance + margin:
        return failed(
            check,
            figure,
            f"the {kind.replace('_', ' ')} of a sample tells its label: shuffle the samples' order "
            "(and pad or vary what the length reveals) before writing the files",
        )
    return passed(check, figure)


STEP_BINS = np.geomspace(1e-3, 2.0, 9)
ANGLE_BINS = np.linspace(0.0, np.pi, 10)
SMALL_STEP = 0.05


def _order_stats(points: np.ndarray) -> np.ndarray:
    """What the file order of a set's elements shows: the histogram of steps between neighbours
    (relative to the set's spread), the histogram of turning angles along runs of short steps
    (an outline written point after point turns smoothly), and the lag-1 autocorrelation."""
    size = len(STEP_BINS) - 1 + len(ANGLE_BINS) - 1 + 2
    if len(points) < 3:
        return np.zeros(size)
    centred = points - points.mean(0)
    spread = np.linalg.norm(centred, axis=1).mean() + 1e-12
    moves = np.diff(points, axis=0) / spread
    steps = np.linalg.norm(moves, axis=1)
    step_hist = np.histogram(np.clip(steps, STEP_BINS[0], STEP_BINS[-1]), STEP_BINS)[0] / len(steps)
    short = (steps[1:] < SMALL_STEP) & (steps[:-1] < SMALL_STEP) & (steps[1:] > 0) & (steps[:-1] > 0)
    cosines = (moves[1:] * moves[:-1]).sum(1)[short] / (steps[1:] * steps[:-1])[short]
    angle_hist = np.histogram(np.arccos(np.clip(cosines, -1, 1)), ANGLE_BINS)[0] / len(steps)
    lag = (centred[1:] * centred[:-1]).sum() / ((centred**2).sum() + 1e-12)
    return np.concatenate([step_hist, angle_hist, [float(short.mean()), lag]])


def _set_features(columns: tuple[Column, ...], sets: frozenset[str], shuffled: bool) -> np.ndarray:
    rng = np.random.default_rng(0)
    per_sample = []
    for i in range(min(len(columns[0]), QUICK_SAMPLES)):
        row = []
        for column in columns:
            if column.file in sets:
                points = elements(column, i).astype(np.float64)
                row.append(_order_stats(points[rng.permutation(len(points))] if shuffled else points))
        per_sample.append(np.concatenate(row))
    return np.asarray(per_sample)


def _element_order(ctx: Context, samples: Samples, margin: float) -> Finding:
    check = "leaks.element_order"
    sets = samples.layout.sets
    if not sets:
        return not_applicable(check, "no sample is a set of elements (ragged files, [check] sets)")
    if ctx.spec.check.get("order_meaningful"):
        if "order" not in ctx.spec.prompt.lower():
            return failed(
                check, "order_meaningful = true, but the prompt never says what the order means", "say it in prompt.md"
            )
        return not_applicable(check, "the task declares the order of elements meaningful, and its prompt says so")
    ordered = _score(_set_features(samples.train, sets, False), _set_features(samples.test, sets, False), samples)
    control = _score(_set_features(samples.train, sets, True), _set_features(samples.test, sets, True), samples)
    figure = (
        f"statistics of the elements in file order score {ordered:.3f}, the same after shuffling each sample "
        f"{control:.3f} (margin {margin:.3f}; files {', '.join(sorted(sets))})"
    )
    if ordered > control + margin:
        return failed(
            check,
            figure + ": the order of the elements in the file carries the labels",
            "write each sample's elements in a random order in data.py, or declare [check] order_meaningful = true "
            "and say in prompt.md what the order means",
        )
    return passed(check, figure)


def _answers_in_files(public: Path, answers: np.ndarray) -> Finding | None:
    """A failed finding when a public file holds the answers, or their order gives them away."""
    rows = answers.reshape(len(answers), -1)
    needles = {answers.astype(t).tobytes() for t in (np.int64, np.int32, np.int16, np.uint8, np.float32, np.float64)}
    for sep in (" ", "", "\n", ","):
        needles.add(sep.join(map(str, answers.reshape(-1)[:64])).encode())
    needles.add("\n".join(" ".join(map(str, row)) for row in rows[:20]).encode())
    fix = "keep the answers out of every public file (they go only in build()'s return value), in a random test order"
    for path in sorted(public.iterdir()):
        blob = path.read_bytes()
        if any(needle in blob for needle in needles):
            return failed("leaks.label_copy", f"{path.name} holds the test answers", fix)
    if len(np.unique(rows[:, 0])) > 1 and np.array_equal(rows[:, 0], np.sort(rows[:, 0])):
        return failed("leaks.label_copy", "the test samples are sorted by their answer", fix)
    return None


def _label_copy(samples: Samples) -> Finding:
    check = "leaks.label_copy"
    numeric = [c for c in samples.train if c.numeric and c.kind != "ragged"]
    if not numeric:
        return passed(
            check, "no public file holds the test answers (and no sample has fixed-size numbers to copy a label into)"
        )
    labels = samples.labels
    majority = max(float(np.unique(col, return_counts=True)[1].max()) / len(col) for col in labels.T)
    worst, where = 0.0, "no entry ever equals it"
    for column in numeric:
        flat = np.asarray(column.values).reshape(len(column), -1)[:, :4096]
        for j in range(min(labels.shape[1], 16)):
            agreement = (np.round(flat.astype(np.float64)) == labels[:, j : j + 1]).mean(0)
            position = int(np.argmax(agreement))
            if agreement[position] > worst:
                worst, where = float(agreement[position]), f"{column.file} entry {position}, label column {j}"
    figure = "no public file holds the test answers; the most label-like entry agrees with the label on "
    figure += f"{worst:.3f} of training samples ({where}; majority share {majority:.3f})"
    if worst >= COPY_AGREEMENT and worst > majority + 0.2:
        return failed(
            check, figure + ": the label is copied into the sample", "leave the label out of the sample's values"
        )
    return passed(check, figure)


def reference_order(ctx: Context) -> Finding:
    """The reference on the task's own data and on a copy whose set samples are shuffled."""
    check = "leaks.reference_order"
    layout = ctx.samples().layout
    if not layout.sets or ctx.spec.check.get("order_meaningful") or "element_order" not in declared_kinds(ctx):
        return not_applicable(check, "no set samples whose order must not matter")
    if not ctx.spec.reference_path.is_file():
        return not_applicable(check, "the task has no reference solution")
    code = ctx.spec.reference_path.read_text(encoding="utf-8")
    data = ctx.data()
    plain = ctx.figures.reference.get(ctx.seed)
    if plain is None:
        plain = ctx.run(code, data)[1].accuracy
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with_elements_shuffled(data.public_dir, root / "public", layout, seed=ctx.seed + 1000)
        (root / "hidden").mkdir()
        (root / "hidden" / "answers.npy").write_bytes(data.answers_path.read_bytes())
        shuffled = ctx.run(code, TaskData(root, ctx.seed))[1].accuracy
    ctx.figures.reference_shuffled = shuffled
    margin = ctx.margin()
    figure = f"the reference scores {plain:.3f} on the files as built and {shuffled:.3f} "
    figure += f"with every set's elements shuffled (margin {margin:.3f})"
    if plain - shuffled > margin:
        return failed(
            check,
            figure + ": the reference reads the order of the elements",
            "write each sample's elements in a random order in data.py (and let the reference ignore the order)",
        )
    return passed(check, figure)
