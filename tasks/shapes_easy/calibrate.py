"""Calibrate the shapes tasks: how far simple and strong learners get on held-out training data.

    python tasks/shapes_easy/calibrate.py                 # shapes_easy, data seed 0
    python tasks/shapes_easy/calibrate.py --hard --seed 1 # shapes_hard, data seed 1
    python tasks/shapes_easy/calibrate.py --only pointnet --only sorted_cnn

Builds the task's data with its own builder, keeps the first 750 training clouds for training
and scores each learner on the other 250 (the hidden test answers are never read). Every learner
trains for a fixed number of epochs, so the figures do not depend on how busy the machine is,
and is scored after its last epoch (nothing is selected on the held-out clouds). The learners
are those of the published write-ups' discussion of the task:

- ``raw_mlp``: an MLP on the 1024 raw coordinates, as they come;
- ``pointnet``: the same small MLP applied to every point, then a max over the points;
- ``sorted_cnn``: the points sorted by x, then a 1-D CNN along that order;
- ``hist_cnn``: a 32x32 histogram of the cloud and a small 2-D CNN;
- ``hist_cnn_aug``: the same with random scaling, translation and flips (mirrors and quarter
  turns) of the clouds while training.

``GENERIC_LEARNERS`` gives all five to ``weirdml check-task`` for shapes_easy as functions of the
built public files and a work factor that scales their epochs; there they train on every
training cloud and predict the test clouds.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # importing the module (as the task checker does) changes nothing
    # Idle OpenMP threads must sleep, not spin: on a busy CPU spinning makes each step far slower.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
N_FIT = 750
BINS = 32
RANGE = {False: (0.0, 1.0), True: (-0.3, 1.3)}  # the histograms' square for shapes_easy, shapes_hard


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs) times ``work``, at least 1."""
    return max(1, round(amount * work))


def read_public(public: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training clouds, their labels and the test clouds of a directory of public files."""
    x_train = np.load(public / "train_data.npy")
    y_train = np.load(public / "train_flags.npy")
    x_test = np.load(public / "test_data.npy")
    return x_train, y_train, x_test


def load_data(seed: int, hard: bool) -> tuple[np.ndarray, np.ndarray]:
    spec = importlib.util.spec_from_file_location("shapes_data", HERE / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        module.build(Path(tmp), seed, hard=hard)
        x_train, y_train, _ = read_public(Path(tmp))
        return x_train, y_train


def standardise(points: torch.Tensor) -> torch.Tensor:
    """Coordinates centred on the square's middle and scaled to about unit spread."""
    return (points - 0.5) * 4


class RawMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(1024, 256),
            nn.ReLU(),
            nn.Dropout(0.3),
            nn.Linear(256, 128),
            nn.ReLU(),
            nn.Linear(128, 5),
        )

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.net(standardise(points))


class PointNet(nn.Module):
    """A shared per-point MLP and a max over the points: blind to their order."""

    def __init__(self) -> None:
        super().__init__()
        self.point = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 128))
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 5))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.head(self.point(standardise(points)).max(dim=1).values)


class SortedCNN(nn.Module):
    """A 1-D CNN over the points in order of x."""

    def __init__(self) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv1d(cin, cout, 5, padding=2), nn.BatchNorm1d(cout), nn.ReLU(), nn.MaxPool1d(2))

        self.features = nn.Sequential(block(2, 32), block(32, 64), block(64, 128), block(128, 128))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.3), nn.Linear(128 * 32, 128), nn.ReLU(), nn.Linear(128, 5))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        order = points[..., 0].argsort(dim=1)
        ordered = torch.gather(points, 1, order[..., None].expand(-1, -1, 2))
        return self.head(self.features(standardise(ordered).transpose(1, 2)))


def histogram(points: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """(N, P, 2) -> (N, 1, BINS, BINS) square-rooted counts over [lo, hi]^2."""
    u = (points - lo) / (hi - lo)
    keep = ((u >= 0) & (u < 1)).all(dim=2).float()
    idx = (u.clamp(0, 1 - 1e-6) * BINS).long()
    counts = torch.zeros(len(points), BINS * BINS)
    counts.scatter_add_(1, idx[..., 1] * BINS + idx[..., 0], keep)
    return counts.view(-1, 1, BINS, BINS).sqrt()


class HistCNN(nn.Module):
    """A 2-D CNN over the cloud's histogram, pooled globally (so a shape is found anywhere)."""

    def __init__(self, lo: float, hi: float) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))

        self.features = nn.Sequential(block(1, 32), block(32, 64), block(64, 128), block(128, 128))
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(128, 5))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(histogram(points, self.lo, self.hi)).amax(dim=(2, 3)))


def augment(points: torch.Tensor) -> torch.Tensor:
    """Random scale and translation about the centre, and a random flip of the square."""
    n = len(points)
    c = points - 0.5
    swap = torch.rand(n, 1) < 0.5
    c = torch.where(swap[..., None], c.flip(2), c)
    c = c * torch.where(torch.rand(n, 1, 2) < 0.5, -1.0, 1.0)
    scale = torch.exp(torch.empty(n, 1, 1).uniform_(-0.5, 0.4))
    shift = torch.empty(n, 1, 2).uniform_(-0.3, 0.3)
    return c * scale + 0.5 + shift


def train_predict(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    x_test: torch.Tensor,
    epochs: int,
    lr: float = 1e-3,
    aug: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Train for ``epochs`` and return the predictions for ``x_test`` after the last epoch."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * ((len(x) + 31) // 32))
    for _ in range(epochs):
        model.train()
        for idx in torch.randperm(len(x)).split(32):
            batch = x[idx] if aug is None else aug(x[idx])
            loss = F.cross_entropy(model(batch), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    model.eval()
    with torch.no_grad():
        return torch.cat([model(chunk).argmax(1) for chunk in x_test.split(250)])


@dataclasses.dataclass(frozen=True)
class Learner:
    make: Callable[[bool], nn.Module]  # the network, for shapes_hard (True) or shapes_easy
    epochs: int
    lr: float = 1e-3
    aug: Callable[[torch.Tensor], torch.Tensor] | None = None

    def __call__(
        self, hard: bool, x: torch.Tensor, y: torch.Tensor, x_test: torch.Tensor, work: float = 1.0
    ) -> torch.Tensor:
        return train_predict(self.make(hard), x, y, x_test, scaled(self.epochs, work), self.lr, self.aug)


LEARNERS: dict[str, Learner] = {
    "raw_mlp": Learner(lambda hard: RawMLP(), epochs=100),
    "pointnet": Learner(lambda hard: PointNet(), epochs=80, lr=2e-3),
    "sorted_cnn": Learner(lambda hard: SortedCNN(), epochs=60),
    "hist_cnn": Learner(lambda hard: HistCNN(*RANGE[hard]), epochs=60),
    "hist_cnn_aug": Learner(lambda hard: HistCNN(*RANGE[hard]), epochs=120, lr=2e-3, aug=augment),
}


def _generic(learner: Learner) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        x, y, x_test = (torch.tensor(a) for a in read_public(public))
        torch.manual_seed(0)
        return learner(False, x, y, x_test, work).numpy()

    return run


# For ``weirdml check-task`` (shapes_easy): name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {
    name: _generic(learner) for name, learner in LEARNERS.items()
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hard", action="store_true", help="calibrate shapes_hard instead of shapes_easy")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0, the task's own)")
    parser.add_argument("--only", action="append", help="run only these learners (repeatable)")
    args = parser.parse_args()
    torch.manual_seed(0)
    cores = min(2, len(os.sched_getaffinity(0)))
    # Threads that spin on cores other processes are using slow training many-fold.
    torch.set_num_threads(cores if os.getloadavg()[0] < cores else 1)
    data, flags = load_data(args.seed, args.hard)
    x, y = torch.tensor(data[:N_FIT]), torch.tensor(flags[:N_FIT])
    x_val, y_val = torch.tensor(data[N_FIT:]), torch.tensor(flags[N_FIT:])
    task = "shapes_hard" if args.hard else "shapes_easy"
    print(f"{task}, data seed {args.seed}: train on {len(x)} training clouds, score on the other {len(x_val)}")
    for name in args.only or LEARNERS:
        start = time.perf_counter()
        acc = float((LEARNERS[name](args.hard, x, y, x_val, 1.0) == y_val).float().mean())
        print(f"{name:14s} held-out accuracy {acc:.3f}  ({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
