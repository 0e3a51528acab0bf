"""Save a grid of digits_shift samples to reports/figures/digits_shift_samples.png.

    python tools/plot_digits_shift.py [--per-style 4]

One row per digit: a few training pictures of each training style (typeface, pen strokes,
pixel characters), then test pictures (7-segment displays, framed thick) sorted by their hidden
labels, which is why this tool is for task authors only.
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
STYLES = ("typeface", "strokes", "pixels")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-style", type=int, default=4)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "digits_shift_samples.png")
    args = parser.parse_args()
    data = build_data(load_task(ROOT / "tasks" / "digits_shift"), args.cache)
    x = np.load(data.public_dir / "train_data.npy")
    y = np.load(data.public_dir / "train_labels.npy")
    styles = np.load(data.public_dir / "train_styles.npy")
    test_x, test_y = np.load(data.public_dir / "test_data.npy"), data.answers()
    k = args.per_style
    cols = 4 * k  # k per training style, then k test pictures
    digits = np.unique(y)
    fig, axes = plt.subplots(len(digits), cols, figsize=(cols * 0.5, len(digits) * 1.0))
    for row, digit in enumerate(digits):
        samples = [img for s in range(3) for img in x[(y == digit) & (styles == s)][:k]]
        samples += list(test_x[test_y == digit][:k])
        for col, img in enumerate(samples):
            ax = axes[row, col]
            ax.imshow(img, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_linewidth(2.0 if col >= 3 * k else 0.3)
            if row == 0 and col % k == 0:
                ax.set_title(STYLES[col // k] if col < 3 * k else "test", fontsize=8, loc="left")
        axes[row, 0].set_ylabel(str(digit), rotation=0, labelpad=10, va="center")
    fig.suptitle("digits_shift: training pictures by style, then test pictures (thick frame), by digit")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
