"""``python -m pytest_weirdml.report SESSION_DIR [SESSION_DIR ...] -o OUT``: re-render and merge."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_weirdml.report.render import rerender


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_weirdml.report",
        description="Rebuild summary.json, results.csv and report.html from the records.jsonl of one or "
        "several sessions (merging them), without running anything.",
    )
    parser.add_argument("sessions", nargs="+", type=Path, metavar="SESSION_DIR", help="reports/<session> directories")
    parser.add_argument("-o", "--out", type=Path, required=True, help="directory to write the files into")
    parser.add_argument(
        "--leaderboard",
        type=Path,
        default=None,
        metavar="PATH",
        help="a published results CSV whose rows are drawn beside ours (default: none)",
    )
    parser.add_argument(
        "--bootstrap", type=int, default=10_000, metavar="N", help="bootstrap resamples (default: 10000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    args = parser.parse_args(argv)
    if args.bootstrap < 1:
        parser.error(f"--bootstrap must be at least 1, got {args.bootstrap}")
    try:
        paths = rerender(
            args.sessions, args.out, resamples=args.bootstrap, seed=args.seed, leaderboard=args.leaderboard
        )
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
