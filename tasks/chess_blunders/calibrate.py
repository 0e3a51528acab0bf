"""First-try learners for chess_blunders: what a capable generalist writes before finding the structure.

    python tasks/chess_blunders/calibrate.py [--seed N] [--only gbm]

Builds the task's data for the seed (into the usual data cache), encodes each row the generic
way (one-hot board of 12 piece planes x the string's 64 places, side to move, promotion, one-hot
from and to places, moving and captured piece type; the CNN reads the board, the two places and
the side to move as 8x8 planes, the places in the string's order) and prints each learner's
test accuracy beside chance (the majority class share). The learners do a fixed amount of
work, whatever the machine's load. ``GENERIC_LEARNERS`` gives all four to ``weirdml check-task``
as functions of the built public files and a work factor that scales their rounds, iterations
and epochs.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

if __name__ == "__main__":  # importing the module (as the task checker does) changes nothing
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from pytest_weirdml.tasks import build_data, load_task

TASK_DIR = Path(__file__).resolve().parent
PIECES = "PNBRQKpnbrqk"
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (rounds, iterations, epochs) times ``work``, at least 1."""
    return max(1, round(amount * work))


def encode(row: dict[str, str]) -> np.ndarray:
    """One row the generic way: the board as 12 piece planes over the 64 places of the string (its
    hidden order unknown, so taken as it comes), side to move, promotion, one-hot from and to
    places, and the moving and the captured piece type."""
    cells = row["board"]
    board = np.zeros((12, 64), np.float32)
    for place, ch in enumerate(cells):
        if ch != ".":
            board[PIECES.index(ch), place] = 1
    frm, to = int(row["from"]), int(row["to"])
    one_hot = np.zeros(64 + 64 + 6 + 7, np.float32)
    one_hot[frm] = 1
    one_hot[64 + to] = 1
    one_hot[128 + "pnbrqk".index(cells[frm].lower())] = 1
    one_hot[134 + ("pnbrqk".index(cells[to].lower()) if cells[to] != "." else 6)] = 1
    return np.concatenate([board.ravel(), [row["turn"] == "w", row["promotion"] != "-"], one_hot])


def _rows(path: Path) -> np.ndarray:
    with path.open(newline="") as f:
        return np.array([encode(r) for r in csv.DictReader(f)])


def read_public(public: Path) -> Arrays:
    """The encoded training rows, their labels and the encoded test rows of a directory of public files."""
    x = _rows(public / "train_positions.csv")
    y = np.load(public / "train_labels.npy")
    xt = _rows(public / "test_positions.csv")
    return x, y, xt


def gbm(x: np.ndarray, y: np.ndarray, xt: np.ndarray, work: float = 1.0) -> np.ndarray:
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(max_iter=scaled(300, work), learning_rate=0.05, random_state=0)
    return model.fit(x, y).predict(xt)


def mlp(x: np.ndarray, y: np.ndarray, xt: np.ndarray, work: float = 1.0) -> np.ndarray:
    from sklearn.neural_network import MLPClassifier

    model = MLPClassifier((256, 64), max_iter=scaled(300, work), early_stopping=True, random_state=0)
    return model.fit(x, y).predict(xt)


def logreg(x: np.ndarray, y: np.ndarray, xt: np.ndarray, work: float = 1.0) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=0.1, max_iter=scaled(2000, work)).fit(x, y).predict(xt)


def cnn(x: np.ndarray, y: np.ndarray, xt: np.ndarray, work: float = 1.0) -> np.ndarray:
    """A small convolutional network on 15 planes: 12 piece planes, from and to square, side to move."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def planes(rows: np.ndarray) -> torch.Tensor:
        stacked = np.concatenate([rows[:, :768], rows[:, 770:898], np.repeat(rows[:, 768:769], 64, 1)], 1)
        return torch.from_numpy(stacked.reshape(-1, 15, 8, 8).astype(np.float32))

    torch.manual_seed(0)
    torch.set_num_threads(1)
    X, Y, XT = planes(x), torch.from_numpy(y), planes(xt)
    net = nn.Sequential(
        nn.Conv2d(15, 64, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Dropout(0.3),
        nn.Linear(64 * 64, 64),
        nn.ReLU(),
        nn.Linear(64, 2),
    )
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)
    for _ in range(scaled(30, work)):
        net.train()
        perm = torch.randperm(len(X))
        for i in range(0, len(X), 64):
            idx = perm[i : i + 64]
            loss = F.cross_entropy(net(X[idx]), Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        return net(XT).argmax(1).numpy()


LEARNERS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]] = {
    "gbm": gbm,
    "mlp": mlp,
    "logreg": logreg,
    "cnn": cnn,
}


def _generic(
    learner: Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray],
) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        with warnings.catch_warnings():
            # Work is capped on purpose (the checker turns it): not converging is expected.
            warnings.filterwarnings("ignore", message=".*(converge|iterations).*")
            return learner(*read_public(public), work)

    return run


# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {
    name: _generic(learner) for name, learner in LEARNERS.items()
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="data seed (default: the task's own)")
    parser.add_argument("--only", action="append", choices=sorted(LEARNERS), help="run only these learners")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    args = parser.parse_args()
    spec = load_task(TASK_DIR)
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=args.seed)
    start = time.perf_counter()
    data = build_data(spec, args.cache)
    print(f"data seed {spec.seed}: {data.root} ({time.perf_counter() - start:.1f} s)")
    x, y, xt = read_public(data.public_dir)
    answers = data.answers()
    print(f"chance (majority class of the test answers): {np.bincount(answers).max() / len(answers):.3f}")
    for name in args.only or list(LEARNERS):
        start = time.perf_counter()
        preds = LEARNERS[name](x, y, xt, 1.0)
        print(
            f"{name}: test accuracy {np.mean(preds == answers):.3f} ({time.perf_counter() - start:.0f} s)", flush=True
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
