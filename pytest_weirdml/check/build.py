"""Build checks: the data is what the prompt says and what a seed makes, and train and test are apart.

- ``build.deterministic``: a fresh build of the task's seed gives the cached build's bytes;
- ``build.seeded``: the next seed gives other bytes in every public file and other answers;
- ``build.prompt_files``: the prompt names every public file, and where it gives an array's shape
  and dtype they are the file's;
- ``build.disjoint``: no test sample is a training sample, exactly or nearly;
- ``build.label_shares``: the label shares are those ``[check] label_shares`` says the prompt gives.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

import numpy as np

from pytest_weirdml.check.context import Context
from pytest_weirdml.check.findings import Finding, failed, guarded, not_applicable, passed
from pytest_weirdml.check.learners import column_features
from pytest_weirdml.check.samples import Samples
from pytest_weirdml.tasks import load_builder

# A test sample nearer to a training sample than this share of the typical nearest distance is
# a near duplicate; more than this share of near duplicates fails.
NEAR = 0.01
NEAR_SHARE_ALLOWED = 0.01
_DTYPE_WORDS = {
    "float": "f",
    "float16": "f",
    "float32": "f",
    "float64": "f",
    "int": "iu",
    "integer": "iu",
    "int8": "i",
    "int16": "i",
    "int32": "i",
    "int64": "i",
    "uint8": "u",
    "uint16": "u",
    "bool": "b",
}


def run(ctx: Context) -> list[Finding]:
    checks = (
        ("build.deterministic", lambda: _deterministic(ctx)),
        ("build.seeded", lambda: _seeded(ctx)),
        ("build.prompt_files", lambda: _prompt_files(ctx)),
        ("build.disjoint", lambda: _disjoint(ctx.samples())),
        ("build.label_shares", lambda: _label_shares(ctx)),
    )
    return [guarded(name, check) for name, check in checks]


def _fresh_build(ctx: Context, seed: int, out: Path) -> np.ndarray:
    return load_builder(ctx.spec)(out, seed, **ctx.spec.params)


def _deterministic(ctx: Context) -> Finding:
    data = ctx.data()
    with tempfile.TemporaryDirectory() as tmp:
        answers = _fresh_build(ctx, ctx.seed, Path(tmp))
        differ = [
            n for n in ctx.spec.public_files if (Path(tmp) / n).read_bytes() != (data.public_dir / n).read_bytes()
        ]
    if not np.array_equal(answers, data.answers()):
        differ.append("the hidden answers")
    if differ:
        return failed(
            "build.deterministic",
            f"two builds of seed {ctx.seed} differ in {', '.join(differ)}",
            "draw every random number from the seed passed to build() (np.random.default_rng(seed)), "
            "never from the global state, the clock, the process or a set's iteration order",
        )
    return passed(
        "build.deterministic",
        f"two builds of seed {ctx.seed} are byte-identical ({len(ctx.spec.public_files)} files and the answers)",
    )


def _seeded(ctx: Context) -> Finding:
    data = ctx.data()
    inputs = set(ctx.spec.public_files)
    with tempfile.TemporaryDirectory() as tmp:
        answers = _fresh_build(ctx, ctx.seed + 1, Path(tmp))
        same = sorted(n for n in inputs if (Path(tmp) / n).read_bytes() == (data.public_dir / n).read_bytes())
    own = data.answers()
    if answers.shape == own.shape and np.array_equal(answers, own):
        same.append("hidden answers")
    if same:
        return failed(
            "build.seeded",
            f"seeds {ctx.seed} and {ctx.seed + 1} give the same {', '.join(same)}",
            "let every seed draw fresh samples (or a fresh subset, crops, orders) and fresh answers",
        )
    return passed("build.seeded", f"seed {ctx.seed + 1} gives other bytes in all {len(inputs)} files and other answers")


def _prompt_files(ctx: Context) -> Finding:
    prompt, problems = ctx.spec.prompt, []
    for name in ctx.spec.public_files:
        if f"`{name}`" not in prompt and name not in prompt:
            problems.append(f"{name} is not named")
            continue
        if name.endswith(".npy"):
            array = np.load(ctx.data().public_dir / name, mmap_mode="r", allow_pickle=False)
            text = _description(prompt, name, ctx.spec.public_files)
            problems.extend(_described_as(name, text, array.shape, array.dtype))
    if problems:
        return failed(
            "build.prompt_files",
            "; ".join(problems),
            "say in prompt.md, for every public file, what it holds with its true shape and dtype",
        )
    return passed(
        "build.prompt_files", f"the prompt names all {len(ctx.spec.public_files)} files with their shapes and dtypes"
    )


def _description(prompt: str, name: str, others: tuple[str, ...]) -> str:
    """The prompt's text about a file: a bullet that starts by naming it, up to the next bullet or
    blank line; else the text from its first mention up to the next file named or blank line."""
    lines = prompt.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip("-* ").startswith((f"`{name}`", f"`data/{name}`"))]
    if starts:
        end = starts[0] + 1
        while end < len(lines) and lines[end].strip() and not lines[end].lstrip().startswith(("-", "*")):
            end += 1
        return " ".join(lines[starts[0] : end])
    text = prompt[prompt.index(name) + len(name) :]
    cuts = [text.find(other) for other in others if other != name and other in text] + [text.find("\n\n")]
    return text[: min((c for c in cuts if c >= 0), default=len(text))]


def _described_as(name: str, text: str, shape: tuple[int, ...], dtype: np.dtype) -> list[str]:
    problems = []
    match = re.search(r"\((\s*[\w ]+(?:\s*,\s*[\w ]*)*)\)", text)
    if match:
        said = [part.strip() for part in match.group(1).split(",") if part.strip()]
        if len(said) != len(shape) or any(p.isdigit() and int(p) != n for p, n in zip(said, shape, strict=False)):
            problems.append(f"{name} is said to be ({', '.join(said)}) but is {shape}")
    words = [w for w in re.findall(r"[a-z]+\d*", text.lower()) if w in _DTYPE_WORDS]
    if words and dtype.kind not in _DTYPE_WORDS[words[0]]:
        problems.append(f"{name} is said to be {words[0]} but is {dtype}")
    return problems


def _sample_hashes(samples: Samples, which: str) -> list[bytes]:
    columns = samples.train if which == "train" else samples.test
    count = len(columns[0])
    return [hashlib.sha256(b"\0".join(c.raw[i] for c in columns)).digest() for i in range(count)]


def _disjoint(samples: Samples) -> Finding:
    train = set(_sample_hashes(samples, "train"))
    exact = sum(h in train for h in _sample_hashes(samples, "test"))
    near, checked = _near_duplicates(samples)
    n_test = len(samples.answers)
    fix = "draw the test samples apart from the training samples (and from the same sources, where they come from one)"
    if exact:
        return failed("build.disjoint", f"{exact} of {n_test} test samples are training samples", fix)
    if checked and near > NEAR_SHARE_ALLOWED * n_test:
        return failed(
            "build.disjoint", f"{near} of {n_test} test samples nearly equal a training sample ({checked})", fix
        )
    return passed(
        "build.disjoint", f"no test sample is a training sample; near duplicates: {near} ({checked or 'not measured'})"
    )


def _near_duplicates(samples: Samples) -> tuple[int, str]:
    """Test samples whose nearest training sample is far nearer than usual, over the numeric
    inputs (standardised, at most 64 random projections); for text, the same multiset of words."""
    numeric = [i for i, c in enumerate(samples.train) if c.numeric]
    if not numeric:
        train_bags = {tuple(sorted(_words(samples, "train", i))) for i in range(len(samples.labels))}
        near = sum(tuple(sorted(_words(samples, "test", i))) in train_bags for i in range(len(samples.answers)))
        return near, "same words in any order"
    x = np.hstack([column_features(samples.train[i]) for i in numeric]).astype(np.float64)
    xt = np.hstack([column_features(samples.test[i]) for i in numeric]).astype(np.float64)
    mean, std = x.mean(0), x.std(0)
    std[std == 0] = 1.0
    x, xt = (x - mean) / std, (xt - mean) / std
    if x.shape[1] > 64:
        projection = np.random.default_rng(0).standard_normal((x.shape[1], 64)) / 8.0
        x, xt = x @ projection, xt @ projection
    nearest = np.array([np.min(np.sum((x - row) ** 2, axis=1)) for row in xt]) ** 0.5
    typical = float(np.median(nearest))
    return int(np.sum(nearest < NEAR * typical)) if typical > 0 else 0, f"nearer than {NEAR:g} x the median distance"


def _words(samples: Samples, which: str, index: int) -> list[str]:
    columns = samples.train if which == "train" else samples.test
    return [w for c in columns for w in re.split(r"[\s,]+", str(c.values[index])) if w]


def _label_shares(ctx: Context) -> Finding:
    declared = ctx.spec.check.get("label_shares")
    if declared is None:
        return not_applicable("build.label_shares", "the task states no label shares ([check] label_shares)")
    if not isinstance(declared, dict):
        return failed(
            "build.label_shares", f"[check] label_shares is {declared!r}", 'write it as { "0" = 0.5, "1" = 0.5 }'
        )
    answers = np.concatenate([ctx.samples().labels.reshape(-1), ctx.data().answers().reshape(-1)])
    off = []
    for label, expected in declared.items():
        actual = float(np.mean(answers == int(label)))
        if abs(actual - float(expected)) > 0.02:
            off.append(f"label {label}: {actual:.3f}, said {float(expected):.3f}")
    if off:
        return failed(
            "build.label_shares",
            "; ".join(off),
            "make the data's label shares what the prompt says, or say what they are",
        )
    return passed(
        "build.label_shares", f"every label share within 0.02 of what the prompt says ({len(declared)} labels)"
    )
