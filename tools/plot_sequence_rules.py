"""Save sequence_rules samples, one panel per family, to reports/figures/sequence_rules_samples.png.

    python tools/plot_sequence_rules.py [--per-family 6]

Builds the task's training data with its own spec into a temporary directory and draws each
family's first sequences, each scaled to its own range (raw values differ by orders of
magnitude), with the family's name from the builder. For task authors: the names are hidden
from the model.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from pytest_weirdml.tasks import load_builder, load_task

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-family", type=int, default=6)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "sequence_rules_samples.png")
    args = parser.parse_args()
    spec = load_task(ROOT / "tasks" / "sequence_rules")
    build = load_builder(spec)
    families = sys.modules[build.__module__].FAMILIES
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), spec.seed, **spec.params)
        x = np.load(Path(tmp) / "train_data.npy").astype(np.float64)
        y = np.load(Path(tmp) / "train_labels.npy")
    fig, axes = plt.subplots(2, 4, figsize=(14, 6), squeeze=False)
    for family, ax in enumerate(axes.flat):
        for row in x[y == family][: args.per_family]:
            ax.plot((row - row.min()) / max(np.ptp(row), 1.0), marker=".", lw=0.8)
        ax.set_title(f"{family}: {families[family]}", fontsize=10)
        ax.set_xticks(range(0, 12, 2))
        ax.set_yticks([])
    fig.suptitle(f"sequence_rules: training sequences by family, each scaled to its range (seed {spec.seed})")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=90)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
