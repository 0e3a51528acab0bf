"""Calibrate shapes_crowd: what generic first tries on the raw clouds score on the test set.

    python tasks/shapes_crowd/calibrate.py                # data seed 0, every learner
    python tasks/shapes_crowd/calibrate.py --seed 1 --only pointnet

Builds the task's data with its own builder into a temporary directory and scores each learner
on the hidden test answers (accuracy over all entries of the (N, 5) presence rows). Every
learner does a fixed amount of work (epochs, boosting rounds), so the figures do not depend on
how busy the machine is; nothing is selected on the test set. The learners are what a capable
generalist writes first for ragged point sets without finding the structure:

- ``mlp``: each cloud cut to 512 random points of its own, or zero-padded to 512, the flattened
  coordinates plus the point count into an MLP with five sigmoid outputs;
- ``pointnet``: the standard network for point sets on the same 512 points, a shared per-point
  MLP and a max pool over the cloud's points (padding masked), five sigmoid outputs;
- ``gbm``: gradient-boosted trees, one per kind, on the cloud's 16x16 density histogram and its
  point count.

``GENERIC_LEARNERS`` gives all three to ``weirdml check-task`` as functions of the built public
files and a work factor that scales their epochs and boosting rounds.

The reference (reference.py) is measured separately, as a submission:
``python tools/try_task.py tasks/shapes_crowd``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
KINDS = 5
PAD = 512
Clouds = list[np.ndarray]
Public = tuple[Clouds, np.ndarray, Clouds]
Data = tuple[Clouds, np.ndarray, Clouds, np.ndarray]


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs, boosting rounds) times ``work``, at least 1."""
    return max(1, round(amount * work))


def read_public(public: Path) -> Public:
    """The training clouds, their presence rows and the test clouds of a directory of public files."""

    def clouds(split: str) -> Clouds:
        points = np.load(public / f"{split}_data.npy")
        offsets = np.load(public / f"{split}_offsets.npy")
        return [points[a:b] for a, b in pairwise(offsets)]

    return clouds("train"), np.load(public / "train_labels.npy"), clouds("test")


def load_data(seed: int) -> Data:
    spec = importlib.util.spec_from_file_location("shapes_crowd_data", HERE / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        answers = module.build(Path(tmp), seed)
        return (*read_public(Path(tmp)), answers)


def padded(clouds: Clouds) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, PAD, 2) coordinates, PAD random points of each cloud or all of them zero-padded, and
    the (N, PAD) mask of real points."""
    rng = np.random.default_rng(0)
    x = np.zeros((len(clouds), PAD, 2), dtype=np.float32)
    mask = np.zeros((len(clouds), PAD), dtype=bool)
    for i, cloud in enumerate(clouds):
        n = min(len(cloud), PAD)
        x[i, :n], mask[i, :n] = cloud[rng.permutation(len(cloud))[:n]], True
    return torch.tensor(x), torch.tensor(mask)


def _train(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], y: torch.Tensor, epochs: int, lr: float, log: bool = True
) -> nn.Module:
    batch = 64
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * ((len(y) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(y))
        total = 0.0
        for i in range(0, len(y), batch):
            idx = order[i : i + batch]
            loss = F.binary_cross_entropy_with_logits(model(*(t[idx] for t in inputs)), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        if log and (epoch + 1) % 10 == 0:
            print(f"    epoch {epoch + 1}: loss {total / len(y):.4f}", flush=True)
    return model.eval()


def _predict(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> np.ndarray:
    n = len(inputs[0])
    with torch.no_grad():
        logits = torch.cat([model(*(t[i : i + 250] for t in inputs)) for i in range(0, n, 250)])
    return (logits > 0).long().numpy()


class FlatMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 * PAD + 1, 512), nn.ReLU(), nn.Dropout(0.3), nn.Linear(512, 128), nn.ReLU(),
            nn.Dropout(0.3), nn.Linear(128, KINDS),
        )  # fmt: skip

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        count = mask.float().sum(1, keepdim=True) / PAD
        return self.net(torch.cat([x.flatten(1), count], dim=1))


class PointNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.point = nn.Sequential(
            nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 256), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, KINDS))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        features = self.point(x).masked_fill(~mask[..., None], float("-inf"))
        return self.head(features.amax(dim=1))


def mlp(data: Public, work: float = 1.0, log: bool = True) -> np.ndarray:
    train, labels, test = data
    y = torch.tensor(labels, dtype=torch.float32)
    return _predict(_train(FlatMLP(), padded(train), y, scaled(60, work), lr=1e-3, log=log), padded(test))


def pointnet(data: Public, work: float = 1.0, log: bool = True) -> np.ndarray:
    train, labels, test = data
    y = torch.tensor(labels, dtype=torch.float32)
    return _predict(_train(PointNet(), padded(train), y, scaled(30, work), lr=2e-3, log=log), padded(test))


def gbm(data: Public, work: float = 1.0, log: bool = True) -> np.ndarray:
    from sklearn.ensemble import HistGradientBoostingClassifier

    train, labels, test = data

    def features(clouds: Clouds) -> np.ndarray:
        rows = []
        for cloud in clouds:
            hist = np.histogram2d(cloud[:, 0], cloud[:, 1], bins=16, range=[[0, 1], [0, 1]])[0]
            rows.append(np.append(hist.reshape(-1) / len(cloud), len(cloud)))
        return np.array(rows)

    x_train, x_test = features(train), features(test)
    columns = []
    for kind in range(KINDS):
        model = HistGradientBoostingClassifier(
            max_iter=scaled(200, work), learning_rate=0.05, early_stopping=False, random_state=0
        )
        columns.append(model.fit(x_train, labels[:, kind]).predict(x_test))
    return np.stack(columns, axis=1)


LEARNERS: dict[str, Callable[[Public, float, bool], np.ndarray]] = {"mlp": mlp, "pointnet": pointnet, "gbm": gbm}


def _generic(learner: Callable[[Public, float, bool], np.ndarray]) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        torch.manual_seed(0)
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
    torch.manual_seed(0)
    cores = min(2, len(os.sched_getaffinity(0)))
    # Threads that spin on cores other processes are using slow training several-fold; the
    # work is fixed, so the thread count changes the time, not the figures.
    torch.set_num_threads(cores if os.getloadavg()[0] < cores else 1)
    start = time.perf_counter()
    data = load_data(args.seed)
    answers = data[3]
    majority = max(answers.mean(), 1 - answers.mean())
    print(
        f"data seed {args.seed}: built in {time.perf_counter() - start:.1f} s; "
        f"chance (majority entry) {majority:.3f}; kinds per test cloud {np.bincount(answers.sum(1)).tolist()}"
    )
    for name in args.only or list(LEARNERS):
        start = time.perf_counter()
        preds = LEARNERS[name](data[:3], 1.0, True)
        print(f"{name:8s} accuracy {np.mean(preds == answers):.3f}  ({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
