"""``weirdml horizons SESSION_DIR... [--published] [--json] [-o DIR] [--tasks DIR]``: the time
horizons of finished sessions (and with ``--published``, of the published models, recomputed
from the published runs and estimates), with the fit and timeline figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_weirdml.horizons.fit import RESAMPLES, SEED, fit_horizon, make_points
from pytest_weirdml.option_types import whole


def add_parser(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "horizons",
        help="time horizons of finished sessions (and of the published models) with their figures",
        description="Fit each model's time horizon by the published WeirdML method: the human working time at "
        "which the model reaches a threshold with 50%% probability, with a 95%% interval from resampling the tasks. "
        "Tasks without [time_estimates] are left out (and named).",
    )
    parser.add_argument("sessions", nargs="*", type=Path, metavar="SESSION_DIR", help="reports/<session> directories")
    parser.add_argument(
        "--published", action="store_true", help="recompute the published models' horizons from the published runs"
    )
    parser.add_argument("--json", action="store_true", help="print the fits as one JSON object (hours)")
    parser.add_argument(
        "-o", "--out", type=Path, default=Path("horizons"), help="where the figures go (default: ./horizons)"
    )
    parser.add_argument(
        "--tasks",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a task directory, or a directory of them, whose [time_estimates] replace those the records kept",
    )
    parser.add_argument(
        "--resamples", type=whole("--resamples"), default=RESAMPLES, metavar="N", help=f"default: {RESAMPLES}"
    )
    parser.add_argument("--seed", type=int, default=SEED, help=f"bootstrap seed (default: {SEED}, the published one)")
    parser.set_defaults(horizons_parser=parser)


def _task_estimates(paths: list[Path]) -> dict[str, Any]:
    from pytest_weirdml.tasks import TASK_FILE, load_task

    found = {}
    for path in paths:
        dirs = [path] if (path / TASK_FILE).is_file() else sorted(p.parent for p in path.glob(f"*/{TASK_FILE}"))
        if not dirs:
            raise ValueError(f"{path}: no {TASK_FILE} here or in its subdirectories")
        for directory in dirs:
            spec = load_task(directory)
            if spec.time_estimates is not None:
                found[spec.name] = spec.time_estimates
    return found


def run(args: argparse.Namespace) -> int:
    from pytest_weirdml.errors import TaskError
    from pytest_weirdml.horizons import published as pub
    from pytest_weirdml.horizons.sessions import horizon_row, model_points
    from pytest_weirdml.session import read_runs

    if not args.sessions and not args.published:
        args.horizons_parser.error("give SESSION_DIR(s), --published, or both")
    fits: dict[str, dict[str, Any]] = {}
    points: dict[str, Any] = {}
    notes: list[str] = []
    try:
        if args.sessions:
            used, without, points = model_points(read_runs(args.sessions), _task_estimates(args.tasks))
            if not used:
                raise ValueError("no task of these sessions has [time_estimates]; see --tasks")
            notes.append("tasks used: " + ", ".join(f"{t} ({e.describe()})" for t, e in sorted(used.items())))
            if without:
                notes.append(f"left out (no [time_estimates]): {', '.join(without)}")
            for model, p in points.items():
                fits[model] = horizon_row(fit_horizon(p, resamples=args.resamples, seed=args.seed), p)
    except (OSError, ValueError, TaskError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    published = []
    if args.published:
        pairs = pub.estimate_pairs()
        for entry in pub.published_models():
            p = make_points(entry.scores, pairs)
            published.append(entry)
            points[entry.display_name] = p
            fits[entry.display_name] = horizon_row(fit_horizon(p, resamples=args.resamples, seed=args.seed), p)
        notes.append("published models: the published runs on their 17 tasks, the published estimates (horizons/data)")
    written = _figures(args.out, fits, points, [m.display_name for m in published])
    if args.json:
        keys = ("x50_hours", "q025", "q975", "n_data", "n_success")
        print(json.dumps({name: {k: fit[k] for k in keys} for name, fit in fits.items()}, indent=2))
        return 0
    _print(fits, notes, written, published, args.resamples)
    return 0


def _figures(out: Path, fits: dict[str, Any], points: dict[str, Any], recomputed: list[str]) -> list[Path]:
    from pytest_weirdml.horizons.report import figure_files, timeline_entries
    from pytest_weirdml.report import figures

    if not figures.available():
        return []
    ours = {name: fit for name, fit in fits.items() if name not in recomputed}
    entries = timeline_entries(ours)
    # The recomputed published models are the grey points (published_horizons.json), which they reproduce.
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, png in figure_files(fits, points, entries).items():
        (out / name).write_bytes(png)
        written.append(out / name)
    return written


def _print(fits: dict[str, Any], notes: list[str], written: list[Path], published: list[Any], resamples: int) -> None:
    from pytest_weirdml.horizons.report import HEADER, table_rows
    from pytest_weirdml.table import align

    print(f"time horizon (hours a person needs, at which a model succeeds with 50%; {resamples} task resamples):")
    for note in notes:
        print(note)
    for line in align(HEADER, table_rows(fits)):
        print(line)
    for entry in published:
        p = entry.published
        print(
            f"published {entry.display_name}: {p['x50_hours_q50']:.3f} h [{p['x50_hours_q025']:.3f}, "
            f"{p['x50_hours_q975']:.3f}]; recomputed {fits[entry.display_name]['x50_hours']:.3f} h "
            f"[{fits[entry.display_name]['q025']:.3f}, {fits[entry.display_name]['q975']:.3f}]"
        )
    for path in written:
        print(f"figure: {path}")
