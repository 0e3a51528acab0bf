"""Save a grid of hidden_parity pictures with their factors to reports/figures/hidden_parity_samples.png.

    python tools/plot_hidden_parity.py [--rows 4] [--cols 8] [--seed 0]

Draws fresh pictures with the task's own generator (the drawn values of the built files are not
stored) and writes each picture's six relevant bits and its label above it: square outline,
4 or more dots, outline hue in 160..340 degrees, bar direction in 20..110 degrees, outline radius
in 5.25..6.75, bar longer than 9 pixels. For task authors: the figure shows what the prompt does
not say.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from pytest_weirdml.tasks import load_builder, load_task

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "hidden_parity_samples.png")
    args = parser.parse_args()
    module = sys.modules[load_builder(load_task(ROOT / "tasks" / "hidden_parity")).__module__]
    rng = np.random.default_rng(args.seed)
    factors, labels = module.factors(rng, args.rows * args.cols)
    relevant = module.relevant_bits(factors)
    fig, axes = plt.subplots(args.rows, args.cols, figsize=(1.5 * args.cols, 1.7 * args.rows), squeeze=False)
    for ax, row, bits, label in zip(axes.flat, factors, relevant, labels, strict=True):
        ax.imshow(module.picture(rng, row)[0], interpolation="nearest")
        ax.set_title(f"{''.join(map(str, bits))} y={label}", fontsize=8, family="monospace")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("hidden_parity: bits (square, 4+ dots, hue 160..340, bar 20..110 deg, radius 5.25..6.75, bar > 9)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
