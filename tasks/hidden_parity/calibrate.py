"""Calibrate hidden_parity: what generic first tries on the raw pixels score on the test set.

    python tasks/hidden_parity/calibrate.py                # data seed 0, every learner
    python tasks/hidden_parity/calibrate.py --seed 1 --only cnn

Builds the task's data with its own builder into a temporary directory and scores each learner
on the hidden test answers. Every learner does a fixed amount of work (epochs, boosting rounds),
so the figures do not depend on how busy the machine is; nothing is selected on the test set.
The learners are what a capable generalist writes first without finding the hidden factors:

- ``mlp``: an MLP on the 3072 standardised pixel values;
- ``cnn``: a three-block CNN with batch norm, global pooling, dropout, AdamW, a one-cycle
  schedule and half-turn augmentation (a half turn keeps every property that decides the class;
  a mirror would not: it changes the bar's direction);
- ``gbm``: gradient-boosted trees on 2x2-pooled pixels (768 values).

``GENERIC_LEARNERS`` gives all three to ``weirdml check-task`` as functions of the built public
files and a work factor that scales their epochs and boosting rounds.

The reference (reference.py) is measured separately, as a submission:
``python tools/try_task.py tasks/hidden_parity``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]
Data = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs, boosting rounds) times ``work``, at least 1."""
    return max(1, round(amount * work))


def read_public(public: Path) -> Arrays:
    """The training pictures, their labels and the test pictures of a directory of public files."""
    x_train = np.load(public / "train_data.npy")
    y_train = np.load(public / "train_labels.npy")
    x_test = np.load(public / "test_data.npy")
    return x_train, y_train, x_test


def load_data(seed: int) -> Data:
    spec = importlib.util.spec_from_file_location("hidden_parity_data", HERE / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        answers = module.build(Path(tmp), seed)
        return (*read_public(Path(tmp)), answers)


def _tensors(x_train: np.ndarray, x_test: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Channel-first floats, standardised per channel with the training statistics."""
    xt = torch.tensor(x_train).permute(0, 3, 1, 2).float() / 255
    xs = torch.tensor(x_test).permute(0, 3, 1, 2).float() / 255
    mean, std = xt.mean((0, 2, 3), keepdim=True), xt.std((0, 2, 3), keepdim=True)
    return (xt - mean) / std, (xs - mean) / std


def _train(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, turn: bool, log: bool = True
) -> nn.Module:
    batch = 64
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * ((len(x) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x))
        total = 0.0
        for i in range(0, len(x), batch):
            idx = order[i : i + batch]
            xb = x[idx]
            if turn:
                flip = torch.rand(len(idx)) < 0.5
                xb = torch.where(flip[:, None, None, None], xb.flip((2, 3)), xb)
            loss = F.cross_entropy(model(xb), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        if log and (epoch + 1) % 10 == 0:
            print(f"    epoch {epoch + 1}: loss {total / len(x):.4f}", flush=True)
    return model.eval()


def _predict(model: nn.Module, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return torch.cat([model(x[i : i + 500]) for i in range(0, len(x), 500)]).argmax(1).numpy()


def mlp(data: Arrays, work: float = 1.0, log: bool = True) -> np.ndarray:
    x_train, y_train, x_test = data
    xt, xs = _tensors(x_train, x_test)
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(3 * 32 * 32, 512),
        nn.ReLU(),
        nn.Dropout(0.3),
        nn.Linear(512, 128),
        nn.ReLU(),
        nn.Dropout(0.3),
        nn.Linear(128, 2),
    )
    return _predict(_train(model, xt, torch.tensor(y_train), scaled(60, work), lr=1e-3, turn=False, log=log), xs)


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))


def cnn(data: Arrays, work: float = 1.0, log: bool = True) -> np.ndarray:
    x_train, y_train, x_test = data
    xt, xs = _tensors(x_train, x_test)
    model = nn.Sequential(
        _block(3, 32),
        _block(32, 64),
        _block(64, 128),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.3),
        nn.Linear(128, 2),
    )
    return _predict(_train(model, xt, torch.tensor(y_train), scaled(40, work), lr=3e-3, turn=True, log=log), xs)


def gbm(data: Arrays, work: float = 1.0, log: bool = True) -> np.ndarray:
    from sklearn.ensemble import HistGradientBoostingClassifier

    x_train, y_train, x_test = data

    def pooled(x: np.ndarray) -> np.ndarray:
        return x.reshape(len(x), 16, 2, 16, 2, 3).mean((2, 4)).reshape(len(x), -1)

    model = HistGradientBoostingClassifier(
        max_iter=scaled(300, work), learning_rate=0.05, early_stopping=False, random_state=0
    )
    return model.fit(pooled(x_train), y_train).predict(pooled(x_test))


LEARNERS: dict[str, Callable[[Arrays, float, bool], np.ndarray]] = {"mlp": mlp, "cnn": cnn, "gbm": gbm}


def _generic(learner: Callable[[Arrays, float, bool], np.ndarray]) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        torch.manual_seed(0)  # as main() seeds before each learner
        return learner(read_public(public), work, False)

    return run


# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {
    name: _generic(learner) for name, learner in LEARNERS.items()
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0, the task's own)")
    parser.add_argument("--only", choices=sorted(LEARNERS), action="append", help="run only these learners")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    # Threads that spin on cores other processes are using slow everything several-fold.
    threads = cores if os.getloadavg()[0] < cores else 1
    torch.set_num_threads(threads)
    threadpool_limits(threads)
    start = time.perf_counter()
    data = load_data(args.seed)
    answers = data[3]
    print(
        f"data seed {args.seed}, {threads} threads: built in {time.perf_counter() - start:.1f} s; "
        f"chance (majority class) {np.bincount(answers).max() / len(answers):.3f}",
        flush=True,
    )
    for name in args.only or list(LEARNERS):
        torch.manual_seed(0)
        start = time.perf_counter()
        preds = LEARNERS[name](data[:3], 1.0, True)
        print(f"{name:5s} accuracy {np.mean(preds == answers):.3f}  ({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
