"""Draw a grid of splash_rules training pictures, one row per rule.

    python tools/plot_splash_rules.py               # -> reports/figures/splash_rules_samples.png
    python tools/plot_splash_rules.py --per-class 6 --out /tmp/splash.png

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
RULES = (
    "0: bigger fly farther,\ntails point outward",
    "1: bigger fly farther,\ntails point back",
    "2: smaller fly farther,\ntails point outward",
    "3: smaller fly farther,\ntails point back",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-class", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "splash_rules_samples.png")
    args = parser.parse_args()
    spec = load_task(ROOT / "tasks" / "splash_rules")
    with tempfile.TemporaryDirectory() as tmp:
        load_builder(spec)(Path(tmp), spec.seed, **spec.params, n_train=8 * args.per_class, n_test=4)
        images = np.load(Path(tmp) / "train_data.npy")
        labels = np.load(Path(tmp) / "train_labels.npy")
    fig, axes = plt.subplots(len(RULES), args.per_class, figsize=(1.6 * args.per_class + 1.5, 1.7 * len(RULES)))
    for rule, row in enumerate(axes):
        for ax, index in zip(row, np.flatnonzero(labels == rule), strict=False):
            ax.imshow(images[index], interpolation="nearest")
        for ax in row:
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(RULES[rule], fontsize=8)
    fig.suptitle(f"splash_rules: training pictures by rule (seed {spec.seed})")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
