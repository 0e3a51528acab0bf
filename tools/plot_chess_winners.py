"""Save an overview of the chess_winners games to reports/figures/chess_winners_samples.png.

    python tools/plot_chess_winners.py

Panels: game length (full moves) per outcome, outcome frequencies in train and test, and how
often the last shown move is a mate, a check or a capture, per outcome. It reads the hidden test
answers, which is why this tool is for task authors only.
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
OUTCOMES = ("draw", "white wins", "black wins")
COLOURS = ("tab:gray", "tab:orange", "tab:blue")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pytest-weirdml" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "figures" / "chess_winners_samples.png")
    args = parser.parse_args()
    data = build_data(load_task(ROOT / "tasks" / "chess_winners"), args.cache)
    train = (data.public_dir / "train_games.txt").read_text().splitlines()
    test = (data.public_dir / "test_games.txt").read_text().splitlines()
    y_train, y_test = np.load(data.public_dir / "train_labels.npy"), data.answers()
    games, labels = train + test, np.concatenate([y_train, y_test])
    tokens = [g.split() for g in games]
    full_moves = np.array([len(t) / 2 for t in tokens])

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    ax = axes[0]
    bins = np.arange(0, full_moves.max() + 5, 4)
    for label, (name, colour) in enumerate(zip(OUTCOMES, COLOURS, strict=True)):
        sel = full_moves[labels == label]
        ax.hist(
            sel,
            bins=bins,
            histtype="step",
            linewidth=2,
            color=colour,
            density=True,
            label=f"{name} (n={sel.size}, median {np.median(sel):.0f})",
        )
    ax.set_xlabel("game length shown (full moves)")
    ax.set_ylabel("density")
    ax.set_title("game length per outcome (train + test)")
    ax.legend()

    ax = axes[1]
    width = 0.38
    for k, (name, y) in enumerate((("train", y_train), ("test", y_test))):
        freq = np.bincount(y, minlength=3) / y.size
        bars = ax.bar(
            np.arange(3) + (k - 0.5) * width,
            freq,
            width,
            label=name,
            color=COLOURS,
            alpha=0.5 + 0.4 * k,
            edgecolor="black",
        )
        ax.bar_label(bars, labels=[f"{f:.1%}" for f in freq], fontsize=8)
    ax.set_xticks(np.arange(3), OUTCOMES)
    ax.set_ylabel("share of games")
    ax.set_title("outcome frequencies (left bar train, right bar test)")

    ax = axes[2]
    marks = (("ends in mate '#'", "#"), ("ends in check '+'", "+"), ("ends in capture 'x'", "x"))
    for label, (name, colour) in enumerate(zip(OUTCOMES, COLOURS, strict=True)):
        last = [t[-1] for t, y in zip(tokens, labels, strict=True) if y == label]
        shares = [np.mean([m in tok for tok in last]) for _, m in marks]
        ax.bar(np.arange(3) + (label - 1) * 0.27, shares, 0.27, color=colour, label=name)
    ax.set_xticks(np.arange(3), [name for name, _ in marks])
    ax.set_ylabel("share of games of that outcome")
    ax.set_title("last shown move, per outcome")
    ax.legend()

    fig.suptitle(f"chess_winners: {len(games)} games between simulated weak players; half of them lost their last move")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100, bbox_inches="tight")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
