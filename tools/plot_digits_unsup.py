"""Save a grid of digits_unsup samples, one row per class, to reports/figures/digits_unsup_samples.png.

    python tools/plot_digits_unsup.py [--per-class 14]

The first columns of each row are the class's labelled samples (framed in black), the rest are
test samples sorted by their hidden labels, which is why this tool is for task authors only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from pytest_weirdml.tasks import build_data, load_task

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-class", type=int, default=14)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "digits_unsup_samples.png")
    args = parser.parse_args()
    data = build_data(load_task(ROOT / "tasks" / "digits_unsup"), args.cache)
    lab_x = np.load(data.public_dir / "train_data_labeled.npy")
    lab_y = np.load(data.public_dir / "train_labels.npy")
    test_x = np.load(data.public_dir / "test_data.npy")
    test_y = data.answers()
    classes = np.unique(lab_y)
    fig, axes = plt.subplots(len(classes), args.per_class, figsize=(args.per_class * 0.55, len(classes) * 1.1))
    for row, label in enumerate(classes):
        labelled = list(lab_x[lab_y == label])
        tests = list(test_x[test_y == label])
        samples = (labelled + tests)[: args.per_class]
        for col in range(args.per_class):
            ax = axes[row, col]
            ax.set_xticks([])
            ax.set_yticks([])
            if col < len(samples):
                ax.imshow(samples[col], interpolation="nearest")
            is_labelled = col < len(labelled)
            for spine in ax.spines.values():
                spine.set_linewidth(2.0 if is_labelled else 0.3)
            if col == 0:
                share = np.mean(test_y == label)
                ax.set_ylabel(f"{label}\n{share:.0%}", rotation=0, labelpad=14, va="center")
    fig.suptitle("digits_unsup: labelled (thick frame) then test samples, by class (test share)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
