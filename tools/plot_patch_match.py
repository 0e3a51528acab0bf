"""Plot a few patch_match samples: the picture with its hole, the five candidates, the right one marked.

    python tools/plot_patch_match.py            # training samples (labels are public)
    python tools/plot_patch_match.py --test     # test samples, marked with the hidden answers

Writes reports/figures/patch_match_samples.png.
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
    parser.add_argument("--test", action="store_true", help="plot test samples with the hidden answers")
    parser.add_argument("-n", type=int, default=6, help="samples (rows)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures")
    args = parser.parse_args()
    data = build_data(load_task(ROOT / "tasks" / "patch_match"), args.cache)
    split = "test" if args.test else "train"
    images, holes, patches = (
        np.load(data.public_dir / f"{split}_{name}.npy") for name in ("images", "holes", "patches")
    )
    labels = data.answers() if args.test else np.load(data.public_dir / "train_labels.npy")
    k = patches.shape[1]
    picks = np.random.default_rng(0).choice(len(images), size=args.n, replace=False)
    fig, axes = plt.subplots(args.n, k + 1, figsize=(1.3 * (k + 1), 1.4 * args.n))
    for row, i in enumerate(picks):
        r, c = holes[i]
        axes[row, 0].imshow(images[i], cmap="gray", vmin=0, vmax=1)
        axes[row, 0].add_patch(plt.Rectangle((c - 0.5, r - 0.5), 8, 8, fill=False, edgecolor="tab:red", lw=1))
        for j in range(k):
            ax = axes[row, j + 1]
            ax.imshow(patches[i, j], cmap="gray", vmin=0, vmax=1)
            if j == labels[i]:
                for side in ax.spines.values():
                    side.set_edgecolor("tab:green")
                    side.set_linewidth(3)
        for ax in axes[row]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_title("picture", fontsize=8)
    for j in range(k):
        axes[0, j + 1].set_title(f"candidate {j}", fontsize=8)
    fig.suptitle(f"patch_match ({split}): the hole (red) and its candidates; the right one framed green", fontsize=9)
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "patch_match_samples.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
