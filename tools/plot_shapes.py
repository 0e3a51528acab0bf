"""Draw a grid of training samples per class for shapes_easy and shapes_hard.

    python tools/plot_shapes.py               # -> reports/figures/shapes_{easy,hard}_samples.png
    python tools/plot_shapes.py --per-class 8 --out-dir /tmp/figs

Builds the data with each task's own spec (seed, params) into a temporary directory.
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
CLASSES = ("circle", "square", "triangle", "pentagon", "star")


def plot_task(name: str, per_class: int, out_dir: Path) -> Path:
    spec = load_task(ROOT / "tasks" / name)
    with tempfile.TemporaryDirectory() as tmp:
        load_builder(spec)(Path(tmp), spec.seed, **spec.params)
        data = np.load(Path(tmp) / "train_data.npy")
        flags = np.load(Path(tmp) / "train_flags.npy")
    # shapes_hard's noise may reach 0.3 outside the unit square (drawn in red).
    pad = 0.35 if spec.params.get("hard") else 0.05
    fig, axes = plt.subplots(len(CLASSES), per_class, figsize=(1.6 * per_class, 1.6 * len(CLASSES)), squeeze=False)
    for label, row in enumerate(axes):
        for ax, index in zip(row, np.flatnonzero(flags == label)[:per_class], strict=False):
            ax.scatter(data[index, :, 0], data[index, :, 1], s=1.5, c="k", linewidths=0)
            ax.add_patch(plt.Rectangle((0, 0), 1, 1, fill=False, lw=0.5, ec="tab:red"))
            ax.set_xlim(-pad, 1 + pad)
            ax.set_ylim(-pad, 1 + pad)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(f"{label} {CLASSES[label]}")
    fig.suptitle(f"{name}: training samples by class (seed {spec.seed})")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}_samples.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-class", type=int, default=8, help="samples per class (default 8)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "reports" / "figures")
    parser.add_argument("--task", choices=["shapes_easy", "shapes_hard"], action="append")
    args = parser.parse_args()
    for name in args.task or ["shapes_easy", "shapes_hard"]:
        print(plot_task(name, args.per_class, args.out_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
