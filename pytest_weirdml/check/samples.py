"""A built data set read back as samples: which public files hold the training inputs, the
training labels and the test inputs, and each sample's values and raw bytes.

The layout is found from the file names the published tasks use (``train_X`` beside ``test_X``,
``train_labels``/``train_flags``, ``<prefix>_offsets.npy`` splitting ``<prefix>_data.npy`` into
ragged samples) unless ``[check]`` in ``task.toml`` names it:

    [check]
    labels = "train_labels.npy"                      # the training labels
    inputs = { "train_data_labeled.npy" = "test_data.npy" }   # training file -> its test twin
    sets = ["train_data.npy", "test_data.npy"]       # files whose samples are sets of elements

Text files hold one sample per line (a CSV file's first line is its header).
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_weirdml.errors import TaskError

ARRAY, RAGGED, LINES, CSV = "array", "ragged", "lines", "csv"
_LABEL_NAMES = ("train_labels.npy", "train_flags.npy")
_OFFSETS = re.compile(r"(?P<prefix>.+)_offsets\.npy")


@dataclass(frozen=True)
class Column:
    """One input file read as samples: ``values`` per sample (an array row, a ragged slice of
    elements, or a text line) and each sample's raw bytes and byte offset in its file."""

    file: str
    kind: str
    values: Sequence[Any]
    raw: Sequence[bytes]
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def numeric(self) -> bool:
        return self.kind in (ARRAY, RAGGED)


@dataclass(frozen=True)
class Layout:
    """Which public file is what: the labels, and each training input file with its test twin."""

    labels: str
    pairs: tuple[tuple[str, str], ...]
    sets: frozenset[str]
    offsets: Mapping[str, str]


@dataclass(frozen=True)
class Samples:
    """A data set as samples: the training and test columns (paired by position), the training
    labels as rows and the hidden test answers as rows."""

    layout: Layout
    train: tuple[Column, ...]
    test: tuple[Column, ...]
    labels: np.ndarray
    answers: np.ndarray


def _str_list(declared: Mapping[str, Any], key: str) -> list[str]:
    value = declared.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"task.toml [check] {key}: a list of public file names, got {value!r}")
    return value


def find_layout(public_files: Sequence[str], declared: Mapping[str, Any]) -> Layout:
    """The layout of a task's public files; ``TaskError`` naming the ``[check]`` key to set."""
    files = set(public_files)
    offsets = {m["prefix"] + "_data.npy": f for f in files if (m := _OFFSETS.fullmatch(f))}
    unpaired = [
        f for f in sorted(files) if f.startswith("train_") and f.endswith(".npy") and "test_" + f[6:] not in files
    ]
    unpaired = [f for f in unpaired if f not in offsets.values()]
    labels = declared.get("labels") or next((n for n in _LABEL_NAMES if n in files), None)
    if labels is None and len(unpaired) == 1:
        labels = unpaired[0]
    if not isinstance(labels, str) or labels not in files:
        raise TaskError(
            f"cannot tell which public file holds the training labels (looked for {', '.join(_LABEL_NAMES)}, "
            "or one training .npy file without a test twin); "
            'name it in task.toml: [check] labels = "FILE"'
        )
    declared_inputs = declared.get("inputs", {})
    if not isinstance(declared_inputs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and {k, v} <= files for k, v in declared_inputs.items()
    ):
        raise TaskError(
            f"task.toml [check] inputs: a table of public training file = its test file, got {declared_inputs!r}"
        )
    pairs = dict(declared_inputs)
    if not pairs:
        for name in sorted(files - {labels} - set(offsets.values())):
            twin = "test_" + name.removeprefix("train_")
            if name.startswith("train_") and twin in files:
                pairs[name] = twin
    if not pairs:
        raise TaskError(
            "cannot pair the training inputs with their test files (no train_X beside test_X); "
            'name them in task.toml: [check] inputs = { "TRAIN_FILE" = "TEST_FILE" }'
        )
    sets = frozenset(_str_list(declared, "sets")) | {name for name in offsets if name in files}
    unknown = sorted(sets - files)
    if unknown:
        raise TaskError(f"task.toml [check] sets names files that are not public: {unknown}")
    return Layout(labels=labels, pairs=tuple(sorted(pairs.items())), sets=sets, offsets=offsets)


def read_samples(public: Path, answers: np.ndarray, layout: Layout) -> Samples:
    """Every paired input file of a built data set, as samples; ``TaskError`` when a training file
    and the labels (or a test file and the answers) disagree on the number of samples."""
    labels = np.load(public / layout.labels, allow_pickle=False)
    labels = labels.reshape(len(labels), -1)
    rows = answers.reshape(len(answers), -1)
    train = tuple(read_column(public, name, layout) for name, _ in layout.pairs)
    test = tuple(read_column(public, name, layout) for _, name in layout.pairs)
    for columns, count, what in ((train, len(labels), layout.labels), (test, len(rows), "the hidden answers")):
        for column in columns:
            if len(column) != count:
                raise TaskError(
                    f"{column.file} holds {len(column)} samples but {what} {count}; "
                    'pair the files in task.toml: [check] inputs = { "TRAIN_FILE" = "TEST_FILE" }'
                )
    return Samples(layout=layout, train=train, test=test, labels=labels, answers=rows)


def read_column(public: Path, name: str, layout: Layout) -> Column:
    path = public / name
    if name.endswith(".npy"):
        array = np.load(path, allow_pickle=False)
        if name in layout.offsets:
            return _ragged(name, array, np.load(public / layout.offsets[name], allow_pickle=False))
        values = array.reshape(len(array), *array.shape[1:]) if array.ndim else array.reshape(1)
        raw = [row.tobytes() for row in values]
        return Column(name, ARRAY, values, raw, np.arange(len(values)) * max(values[0].nbytes, 1))
    blob = path.read_bytes()
    lines = blob.splitlines(keepends=True)
    starts = np.cumsum([0] + [len(line) for line in lines])[:-1]
    if name.endswith(".csv"):
        lines, starts = lines[1:], starts[1:]
        rows = list(csv.reader(io.StringIO(b"".join(lines).decode("utf-8", errors="replace"))))
        return Column(name, CSV, rows, lines, np.asarray(starts))
    texts = [line.decode("utf-8", errors="replace").rstrip("\r\n") for line in lines]
    return Column(name, LINES, texts, lines, np.asarray(starts))


def _ragged(name: str, array: np.ndarray, offsets: np.ndarray) -> Column:
    bounds = offsets.astype(np.int64)
    values = [array[a:b] for a, b in itertools.pairwise(bounds)]
    raw = [v.tobytes() for v in values]
    return Column(name, RAGGED, values, raw, bounds[:-1] * array[:1].nbytes)


def elements(column: Column, index: int) -> np.ndarray:
    """A set sample's elements as rows (a ragged slice, or an array sample's first axis)."""
    value = np.asarray(column.values[index])
    return value.reshape(len(value), -1) if value.ndim > 1 else value.reshape(-1, 1)


def with_elements_shuffled(public: Path, out: Path, layout: Layout, seed: int) -> None:
    """A copy of a built public directory whose set files hold each sample's elements in a new
    random order (everything else byte for byte), for measuring what the order is worth."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(public.iterdir()):
        target = out / path.name
        if path.name not in layout.sets:
            target.write_bytes(path.read_bytes())
            continue
        array = np.load(path, allow_pickle=False)
        if path.name in layout.offsets:
            bounds = np.load(public / layout.offsets[path.name], allow_pickle=False).astype(np.int64)
            order = np.concatenate([a + rng.permutation(b - a) for a, b in itertools.pairwise(bounds)])
            shuffled = array[order] if len(order) else array
        else:
            shuffled = np.stack([row[rng.permutation(len(row))] for row in array]) if len(array) else array
        np.save(target, shuffled, allow_pickle=False)
