"""First-try learners for digits_shift: what a capable generalist writes before finding the structure.

    python tasks/digits_shift/calibrate.py [--seed N] [--only cnn] [--epochs 20]

Builds the task's data for the seed (into the usual data cache), then trains each learner on the
raw training pictures and prints its test accuracy beside chance (the majority class share).
Every learner does a fixed amount of work (epochs, trees), so the figures do not depend on how
busy the machine is. ``GENERIC_LEARNERS`` gives all three to ``weirdml check-task`` as functions
of the built public files and a work factor that scales their epochs and boosting rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

if __name__ == "__main__":  # importing the module (as the task checker does) changes nothing
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_weirdml.tasks import build_data, load_task

TASK_DIR = Path(__file__).resolve().parent
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]
EPOCHS = 20  # the networks' epochs at work 1.0 (--epochs changes it for the command line)


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs, boosting rounds) times ``work``, at least 1."""
    return max(1, round(amount * work))


def read_public(public: Path) -> Arrays:
    """The training pictures, their labels counted from 0 (the files count from 1) and the test
    pictures of a directory of public files."""
    x = np.load(public / "train_data.npy")
    y = np.load(public / "train_labels.npy") - 1
    xt = np.load(public / "test_data.npy")
    return x, y, xt


def _train_torch(net: nn.Module, x: np.ndarray, y: np.ndarray, xt: np.ndarray, epochs: int) -> np.ndarray:
    """Adam, mini-batches of 128, a fixed number of epochs; returns the test predictions."""
    torch.manual_seed(0)
    X, Y, XT = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(xt)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(epochs):
        net.train()
        perm = torch.randperm(len(X))
        for i in range(0, len(X), 128):
            idx = perm[i : i + 128]
            loss = F.cross_entropy(net(X[idx]), Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        return net(XT).argmax(1).numpy()


def _standardise(x: np.ndarray, xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels scaled by the training set's per-channel mean and spread, channels first."""
    x, xt = x.astype(np.float32) / 255, xt.astype(np.float32) / 255
    mean, std = x.mean((0, 1, 2)), x.std((0, 1, 2))
    return ((x - mean) / std).transpose(0, 3, 1, 2).copy(), ((xt - mean) / std).transpose(0, 3, 1, 2).copy()


def cnn(data: Arrays, work: float = 1.0, epochs: int = EPOCHS) -> np.ndarray:
    x, y, xt = data
    xs, xts = _standardise(x, xt)
    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Dropout(0.3),
        nn.Linear(64 * 7 * 3, 128),
        nn.ReLU(),
        nn.Linear(128, 6),
    )
    return _train_torch(net, xs, y, xts, scaled(epochs, work))


def mlp(data: Arrays, work: float = 1.0, epochs: int = EPOCHS) -> np.ndarray:
    x, y, xt = data
    xs, xts = _standardise(x, xt)
    net = nn.Sequential(
        nn.Flatten(), nn.Linear(315, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 6)
    )
    return _train_torch(net, xs, y, xts, scaled(epochs, work))


def gbm(data: Arrays, work: float = 1.0, epochs: int = EPOCHS) -> np.ndarray:
    """Boosted trees on the raw pixels: 200 rounds at work 1.0, whatever ``epochs`` says."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y, xt = data
    model = HistGradientBoostingClassifier(max_iter=scaled(200, work), random_state=0)
    return model.fit(x.reshape(len(x), -1), y).predict(xt.reshape(len(xt), -1))


LEARNERS: dict[str, Callable[[Arrays, float, int], np.ndarray]] = {"cnn": cnn, "mlp": mlp, "gbm": gbm}


def _generic(learner: Callable[[Arrays, float, int], np.ndarray]) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        return learner(read_public(public), work, EPOCHS) + 1  # the answers count from 1

    return run


# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {
    name: _generic(learner) for name, learner in LEARNERS.items()
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="data seed (default: the task's own)")
    parser.add_argument("--only", action="append", choices=sorted(LEARNERS), help="run only these learners")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = load_task(TASK_DIR)
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=args.seed)
    start = time.perf_counter()
    data = build_data(spec, args.cache)
    print(f"data seed {spec.seed}: {data.root} ({time.perf_counter() - start:.1f} s)")
    x, y, xt = read_public(data.public_dir)
    answers = data.answers() - 1
    print(f"chance (majority class of the test answers): {np.bincount(answers).max() / len(answers):.3f}")
    for name in args.only or list(LEARNERS):
        start = time.perf_counter()
        preds = LEARNERS[name]((x, y, xt), 1.0, args.epochs)
        print(
            f"{name}: test accuracy {np.mean(preds == answers):.3f} ({time.perf_counter() - start:.0f} s)", flush=True
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
