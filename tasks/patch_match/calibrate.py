"""Calibration of patch_match on one data seed.

    python tasks/patch_match/calibrate.py [--seed N] [--reference]

Builds the data for the seed into a temporary directory and prints the accuracy of:
- chance: the majority class share of the test answers;
- seam rule: no learning, the candidate whose border differs least from the picture next to it,
  as the candidates are given, and with each candidate in its best-fitting orientation (data
  version 3 turns every candidate; the rule tries the builder's ``TURNS`` orientations);
- first try, MLP: the raw picture and the five raw candidates, flattened, into one MLP with five
  outputs (what a generalist writes first for "which of these five");
- first try, CNN: a CNN over the picture and a CNN over each candidate, their features joined by
  a head with five outputs;
- with --reference, the task's reference.py run on the data as the sandbox runs it.
The first tries train for a fixed number of epochs, so the figures do not depend on the load.
``GENERIC_LEARNERS`` gives the two first tries (not the seam rule, which is the task's structure)
to ``weirdml check-task`` as functions of the built public files and a work factor that scales
their epochs.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
HOLE = 8
EPOCHS = 30  # the first tries' epochs at work 1.0
Split = tuple[np.ndarray, ...]


def scaled(amount: int, work: float) -> int:
    """A learner's fixed amount of work (epochs) times ``work``, at least 1."""
    return max(1, round(amount * work))


def load_builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("patch_match_data", HERE / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


def read_public(public: Path) -> tuple[Split, Split]:
    """The training arrays (images, holes, patches, labels) and the test arrays (images, holes,
    patches) of a directory of public files."""
    train = tuple(np.load(public / f"train_{name}.npy") for name in ("images", "holes", "patches", "labels"))
    test = tuple(np.load(public / f"test_{name}.npy") for name in ("images", "holes", "patches"))
    return train, test


def seam_rule(images: np.ndarray, holes: np.ndarray, patches: np.ndarray, turns: int = 1) -> np.ndarray:
    """Index of the best-fitting candidate, each tried in the builder's first ``turns`` orientations."""
    orient = load_builder().__globals__["orient"]
    return np.min([seam_costs(images, holes, orient(patches, t)) for t in range(turns)], axis=0).argmin(axis=1)


def seam_costs(images: np.ndarray, holes: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """(N, K) sum of absolute steps between each candidate's border and the picture next to it
    (also the rule the data tests bound)."""
    costs = np.zeros(patches.shape[:2])
    for n, (r, c) in enumerate(holes):
        p = patches[n]
        costs[n] += np.abs(p[:, 0, :] - images[n, r - 1, c : c + HOLE]).sum(1)
        costs[n] += np.abs(p[:, -1, :] - images[n, r + HOLE, c : c + HOLE]).sum(1)
        costs[n] += np.abs(p[:, :, 0] - images[n, r : r + HOLE, c - 1]).sum(1)
        costs[n] += np.abs(p[:, :, -1] - images[n, r : r + HOLE, c + HOLE]).sum(1)
    return costs


class RawMLP(nn.Module):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(28 * 28 + 2 + k * HOLE * HOLE, 512), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, k),
        )  # fmt: skip

    def forward(self, image: torch.Tensor, hole: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([image.flatten(1), hole / 28.0, patches.flatten(1)], dim=1))


class TwoCNN(nn.Module):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.image = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 49, 128),
        )  # fmt: skip
        self.patch = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 64),
        )  # fmt: skip
        self.head = nn.Sequential(
            nn.ReLU(), nn.Dropout(0.3), nn.Linear(128 + 2 + k * 64, 256), nn.ReLU(), nn.Linear(256, k)
        )

    def forward(self, image: torch.Tensor, hole: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
        n, k = patches.shape[:2]
        fi = self.image(image[:, None])
        fp = self.patch(patches.reshape(n * k, 1, HOLE, HOLE)).reshape(n, -1)
        return self.head(torch.cat([fi, hole / 28.0, fp], dim=1))


def first_try(model: nn.Module, train: Split, test: Split, work: float = 1.0) -> np.ndarray:
    torch.manual_seed(0)
    image, hole, patches, labels = (torch.tensor(a) for a in train)
    hole = hole.float()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-3)
    for _ in range(scaled(EPOCHS, work)):
        model.train()
        for idx in torch.randperm(len(image)).split(64):
            loss = F.cross_entropy(model(image[idx], hole[idx], patches[idx]), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    t_image, t_hole, t_patches = (torch.tensor(a) for a in test)
    with torch.no_grad():
        return model(t_image, t_hole.float(), t_patches).argmax(dim=1).numpy()


def _generic(make: Callable[[int], nn.Module]) -> Callable[[Path, float], np.ndarray]:
    def run(public: Path, work: float) -> np.ndarray:
        train, test = read_public(public)
        torch.manual_seed(0)
        return first_try(make(train[2].shape[1]), train, test, work)

    return run


# For ``weirdml check-task``: name -> (public directory, work factor) -> test predictions.
GENERIC_LEARNERS: dict[str, Callable[[Path, float], np.ndarray]] = {"mlp": _generic(RawMLP), "cnn": _generic(TwoCNN)}


def run_reference(public: Path, answers: np.ndarray) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(public, work / "data")
        (work / "results").mkdir()
        shutil.copy(HERE / "reference.py", work / "solution.py")
        subprocess.run([sys.executable, "solution.py"], cwd=work, timeout=120, check=True, capture_output=True)
        preds = np.loadtxt(work / "results" / "test_preds.txt", dtype=np.int64)
    return float(np.mean(preds == answers))


def main(params: Mapping[str, Any] | None = None, description: str | None = __doc__) -> None:
    """The command line; ``params`` go to the builder (patch_match_easy's calibrate.py runs this
    one on its own data)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", action="store_true", help="also run the task's reference.py")
    parser.add_argument("--quick", action="store_true", help="skip the first tries (minutes on a loaded CPU)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        answers = load_builder()(out, args.seed, **(params or {}))
        print(f"seed {args.seed}: built in {time.perf_counter() - start:.2f} s")
        train, test = read_public(out)
        k = train[2].shape[1]
        print(f"chance (majority share): {np.bincount(answers).max() / len(answers):.3f}")
        print(f"seam rule (no learning), as given: {np.mean(seam_rule(*test) == answers):.3f}")
        turns = load_builder().__globals__["TURNS"]
        best_turn = np.mean(seam_rule(*test, turns=turns) == answers)
        print(f"seam rule (no learning), best of {turns} orientations: {best_turn:.3f}")
        for name, model in (
            () if args.quick else (("first try, MLP on raw input", RawMLP(k)), ("first try, CNN per input", TwoCNN(k)))
        ):
            start = time.perf_counter()
            acc = float(np.mean(first_try(model, train, test) == answers))
            print(f"{name}: {acc:.3f} ({time.perf_counter() - start:.0f} s)")
        if args.reference:
            print(f"reference: {run_reference(out, answers):.3f}")


if __name__ == "__main__":
    main()
