"""Draw a grid of shapes_crowd training clouds, each titled with the kinds it holds.

    python tools/plot_shapes_crowd.py               # -> reports/figures/shapes_crowd_samples.png
    python tools/plot_shapes_crowd.py --rows 3 --cols 6 --out /tmp/crowd.png

Builds a small training set with the task's own builder and seed into a temporary directory.
Needs matplotlib (``pip install matplotlib``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from pytest_weirdml.tasks import load_builder, load_task

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("circle", "square", "triangle", "pentagon", "star")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "shapes_crowd_samples.png")
    args = parser.parse_args()
    spec = load_task(ROOT / "tasks" / "shapes_crowd")
    n = args.rows * args.cols
    with tempfile.TemporaryDirectory() as tmp:
        load_builder(spec)(Path(tmp), spec.seed, **spec.params, n_train=n, n_test=1)
        points = np.load(Path(tmp) / "train_data.npy")
        offsets = np.load(Path(tmp) / "train_offsets.npy")
        labels = np.load(Path(tmp) / "train_labels.npy")
    fig, axes = plt.subplots(args.rows, args.cols, figsize=(2 * args.cols, 2.1 * args.rows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        cloud = points[offsets[i] : offsets[i + 1]]
        ax.scatter(cloud[:, 0], cloud[:, 1], s=1.0, c="k", linewidths=0)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        kinds = ", ".join(KINDS[k] for k in np.flatnonzero(labels[i]))
        ax.set_title(f"{kinds}\n{len(cloud)} points", fontsize=7)
    fig.suptitle(f"shapes_crowd: training clouds and the kinds they hold (seed {spec.seed})")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
