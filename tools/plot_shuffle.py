"""Plot a few shuffle_easy and shuffle_hard samples, shuffled and re-assembled from their labels.

    python tools/plot_shuffle.py            # training samples (labels are public)
    python tools/plot_shuffle.py --test     # test samples, re-assembled with the hidden answers

Writes reports/figures/shuffle_easy_samples.png and reports/figures/shuffle_hard_samples.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from pytest_weirdml.tasks import build_data, load_builder, load_task

ROOT = Path(__file__).resolve().parents[1]
GAP = 1


def _tile(patches: np.ndarray, gap: int) -> np.ndarray:
    """(9, C, 9, 9) patches in the given order -> (H, W, C) 3x3 mosaic with white gaps."""
    c = patches.shape[1]
    side = 3 * 9 + 2 * gap
    canvas = np.ones((side, side, c), dtype=np.float32)
    for k, patch in enumerate(patches):
        r, col = divmod(k, 3)
        canvas[r * (9 + gap) : r * (9 + gap) + 9, col * (9 + gap) : col * (9 + gap) + 9] = patch.transpose(1, 2, 0)
    return canvas


def plot(name: str, cache: Path, use_test: bool, n: int, out_dir: Path) -> Path:
    spec = load_task(ROOT / "tasks" / name)
    data = build_data(spec, cache)
    assemble = load_builder(spec).__globals__["assemble"]
    x = np.load(data.public_dir / ("test_data.npy" if use_test else "train_data.npy"))
    y = data.answers() if use_test else np.load(data.public_dir / "train_labels.npy")
    if x.ndim == 4:
        x = x[:, :, None]
    picks = np.random.default_rng(0).choice(len(x), size=n, replace=False)
    fig, axes = plt.subplots(2, n, figsize=(1.6 * n, 3.6))
    for j, i in enumerate(picks):
        shuffled = _tile(x[i], GAP)
        whole = assemble(x[i : i + 1], y[i : i + 1])[0].transpose(1, 2, 0)
        for row, img in enumerate((shuffled, whole)):
            ax = axes[row, j]
            ax.imshow(img.squeeze(-1) if img.shape[-1] == 1 else img, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0, j].set_title(f"#{i}", fontsize=8)
    axes[0, 0].set_ylabel("shuffled", fontsize=8)
    axes[1, 0].set_ylabel("re-assembled", fontsize=8)
    split = "test" if use_test else "train"
    fig.suptitle(f"{name} ({split}): patches as given, and placed by their labels", fontsize=9)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}_samples.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test", action="store_true", help="plot test samples with the hidden answers")
    parser.add_argument("-n", type=int, default=8, help="samples per task")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures")
    args = parser.parse_args()
    for name in ("shuffle_easy", "shuffle_hard"):
        print(plot(name, args.cache, args.test, args.n, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
