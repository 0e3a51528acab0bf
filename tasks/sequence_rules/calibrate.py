"""Calibrate sequence_rules: what generic learners score on the test set, with and without features.

These learners see the raw values of the merged sequences (data version 2: a labelled run and a
distractor run interleaved); the README gives the proxy plays with rule searches.

    python tasks/sequence_rules/calibrate.py                 # data seed 0, every learner
    python tasks/sequence_rules/calibrate.py --seed 1 --only mlp --only gbm

Builds the task's data with its own builder into a temporary directory and scores each learner
on the hidden test answers. Every learner does a fixed amount of work (epochs, boosting rounds),
so the figures do not depend on how busy the machine is; nothing is selected on the test set.

First tries, on the raw values (what a capable generalist writes without finding the rules):

- ``mlp``: an MLP on the 12 values, standardised per position over the training set;
- ``mlp_log``: the same MLP on sign(x) * log(1 + |x|), for values that span orders of magnitude;
- ``gbm``: gradient-boosted trees on the 12 values.

Partial structure, for comparison (scale-free shapes and differences, no arithmetic rules):

- ``mlp_shape``: the MLP on each sequence standardised by its own mean and spread;
- ``gbm_diffs``: boosted trees on the standardised sequence, its first and its second
  differences, each divided by the sequence's mean absolute step.

``GENERIC_LEARNERS`` gives the three first tries (not the partial-structure learners) to
``weirdml check-task`` as functions of the built public files and a work factor that scales
their epochs and boosting rounds.

The reference (reference.py) adds the rules' tests and is measured as a submission:
``python tools/try_task.py tasks/sequence_rules``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
N_CLASSES = 8
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]
Data = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
FIRST_TRIES = ("mlp", "mlp_log", "gbm")


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs, boosting rounds) times ``work``, at least 1."""
    return max(1, round(amount * work))


def read_public(public: Path) -> Arrays:
    """The training sequences (as floats), their labels and the test sequences of a directory of
    public files."""
    x_train = np.load(public / "train_data.npy").astype(np.float64)
    y_train = np.load(public / "train_labels.npy")
    x_test = np.load(public / "test_data.npy").astype(np.float64)
    return x_train, y_train, x_test


def load_data(seed: int, params: Mapping[str, Any] | None = None) -> Data:
    """The data of ``seed`` from this task's builder with ``params`` (sequence_rules_easy passes
    its own, ``version = 1``)."""
    spec = importlib.util.spec_from_file_location("sequence_rules_data", HERE / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        answers = module.build(Path(tmp), seed, **(params or {}))
        return (*read_public(Path(tmp)), answers)


def _mlp(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, work: float = 1.0) -> np.ndarray:
    """A two-hidden-layer MLP on inputs standardised per column with the training statistics."""
    mean, std = x_train.mean(0), x_train.std(0) + 1e-9
    xt = torch.tensor((x_train - mean) / std, dtype=torch.float32)
    xs = torch.tensor((x_test - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y_train)
    model = nn.Sequential(
        nn.Linear(xt.shape[1], 256),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(256, 256),
        nn.ReLU(),
        nn.Dropout(0.2),
        nn.Linear(256, N_CLASSES),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    for _ in range(scaled(100, work)):
        model.train()
        order = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            idx = order[i : i + 64]
            loss = F.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        return model(xs).argmax(1).numpy()


def _gbm(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, work: float = 1.0) -> np.ndarray:
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(max_iter=scaled(300, work), learning_rate=0.05, random_state=0)
    return model.fit(x_train, y_train).predict(x_test)


def _signed_log(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


def _shape(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-9)


def _diffs(x: np.ndarray) -> np.ndarray:
    d1 = np.diff(x, axis=1)
    scale = np.abs(d1).mean(1, keepdims=True) + 1e-9
    return np.concatenate([_shape(x), d1 / scale, np.diff(d1, axis=1) / scale], axis=1)


LEARNERS: dict[str, Callable[[Arrays, float], np.ndarray]] = {
    "mlp": lambda d, work: _mlp(d[0], d[1], d[2], work),
    "mlp_log": lambda d, work: _mlp(_signed_log(d[0]), d[1], _signed_log(d[2]), work),
    "gbm": lambda d, work: _gbm(d[0], d[1], d[2], work),
    "mlp_shape": lambda d, work: _mlp(_shape(d[0]), d[1], _shape(d[2]), work),
    "gbm_diffs": lambda d, work: _gbm(_diffs(d[0]), d[1], _diffs(d[2]), work),
}


def _generic(learner: Callable[[Arrays, float], np.ndarray]) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        torch.manual_seed(0)  # as main() seeds before each learner
        return learner(read_public(public), work)

    return run


# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {
    name: _generic(LEARNERS[name]) for name in FIRST_TRIES
}


def main(params: Mapping[str, Any] | None = None, description: str | None = __doc__) -> int:
    """The command line; ``params`` go to the builder (sequence_rules_easy's calibrate.py runs this
    one on its own data)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0, the task's own)")
    parser.add_argument("--only", choices=sorted(LEARNERS), action="append", help="run only these learners")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    # Threads that spin on cores other processes are using slow everything several-fold.
    threads = cores if os.getloadavg()[0] < cores else 1
    torch.set_num_threads(threads)
    threadpool_limits(threads)
    start = time.perf_counter()
    data = load_data(args.seed, params)
    answers = data[3]
    print(
        f"data seed {args.seed}, {threads} threads: built in {time.perf_counter() - start:.1f} s; "
        f"chance (majority class) {np.bincount(answers).max() / len(answers):.3f}",
        flush=True,
    )
    for name in args.only or list(LEARNERS):
        torch.manual_seed(0)
        start = time.perf_counter()
        preds = LEARNERS[name](data[:3], 1.0)
        per_class = [np.mean(preds[answers == c] == c) for c in range(N_CLASSES)]
        print(
            f"{name:9s} accuracy {np.mean(preds == answers):.3f}  per family {np.round(per_class, 2).tolist()}"
            f"  ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
