"""The ``weirdml`` command: what a user needs around a pytest session.

    weirdml report SESSION_DIR [SESSION_DIR ...] -o OUT   rebuild (and merge) reports from records
    weirdml compare BASELINE SESSION_DIR [...]            judge sessions against a baseline
    weirdml image build|check|tag|requirements            the Docker sandbox's image and packages
    weirdml env build|path                                the local sandbox's own Python environment
    weirdml models                                        aliases, model ids, prices, API keys set
    weirdml tasks [DIR] [--json]                          every task: family, tier, markers, chance, reference
    weirdml tasks-path                                    the directory of the bundled tasks
    weirdml horizons SESSION_DIR... [--published]         time horizons, with their figures
    weirdml check-task TASK_DIR... [--quick] [--json]     whether a task measures what it should

The options the command shares with the plugin (``--bootstrap``, ``--leaderboard``, ``--margin``,
``--force``) come from the plugin's own definitions (``pytest_weirdml.options``): the same checks
and help texts.

Running the bundled tasks from anywhere: ``pytest "$(weirdml tasks-path)" --weirdml-model=baseline``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from pytest_weirdml import __version__, task_list
from pytest_weirdml.check import cli as check_cli
from pytest_weirdml.horizons import cli as horizons_cli
from pytest_weirdml.options import COMMAND, add_comparison_options, add_statistics_options
from pytest_weirdml.table import align, comparison_lines


def main(argv: list[str] | None = None, *, prog: str = "weirdml") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="What a user of pytest-weirdml needs around a session.")
    parser.add_argument("--version", action="version", version=f"pytest-weirdml {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_report(sub)
    _add_compare(sub)
    _add_image(sub)
    env = sub.add_parser("env", help="build the local sandbox's own Python environment, or print its interpreter")
    env_sub = env.add_subparsers(dest="env_command", required=True, metavar="ACTION")
    env_build = env_sub.add_parser("build", help="build the environment unless it is ready")
    env_build.add_argument(
        "--force", action="store_true", help="rebuild it even when it is ready (refused while a session uses it)"
    )
    env_sub.add_parser("path", help="print the environment's interpreter (nothing is built)")
    models = sub.add_parser("models", help="list model aliases, their model ids and prices, and which API keys are set")
    models.add_argument(
        "--rootdir",
        type=Path,
        default=Path.cwd(),
        help="where pyproject.toml / weirdml.toml with your models config live (default: here)",
    )
    sub.add_parser("tasks-path", help="print the directory of the bundled tasks (for pytest to run)")
    horizons_cli.add_parser(sub)
    check_cli.add_parser(sub)
    task_list.add_parser(sub)
    args = parser.parse_args(argv)
    handlers = {
        "report": _report,
        "image": _image,
        "env": _env,
        "models": _models,
        "tasks-path": _tasks_path,
        "compare": _compare,
        "horizons": horizons_cli.run,
        "check-task": check_cli.run,
        "tasks": task_list.run,
    }
    return handlers[args.command](args)


def _add_report(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser(
        "report",
        help="rebuild summary.json, the results CSVs, report.html and the transcripts from records",
        description="Rebuild summary.json, the results CSVs, report.html and the transcripts from the "
        "records.jsonl of one or several sessions (merging them), without running anything: the same "
        "files a session writes when it ends.",
    )
    report.add_argument("sessions", nargs="+", type=Path, metavar="SESSION_DIR", help="reports/<session> directories")
    report.add_argument("-o", "--out", type=Path, required=True, help="directory to write the files into")
    add_statistics_options(report.add_argument, COMMAND)
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")


def _add_compare(sub: argparse._SubParsersAction) -> None:
    compare = sub.add_parser(
        "compare",
        help="compare finished sessions with a baseline; exit 1 on a regression or a model with unscored runs",
        description="Compare a session (or several, merged) with a baseline, as --weirdml-baseline does at the "
        "end of a session: exit 0 without regression, 1 with one, 2 when the comparison is refused or an input "
        "cannot be read.",
    )
    compare.add_argument("baseline", type=Path, metavar="BASELINE", help="a baseline file or a session directory")
    compare.add_argument("sessions", nargs="+", type=Path, metavar="SESSION_DIR", help="the sessions to judge")
    add_comparison_options(compare.add_argument, COMMAND)
    add_statistics_options(compare.add_argument, COMMAND)


def _add_image(sub: argparse._SubParsersAction) -> None:
    image = sub.add_parser("image", help="build or check the Docker sandbox's image")
    image_sub = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    build = image_sub.add_parser("build", help="build the image unless it is present (offline by default)")
    build.add_argument("--dockerfile", action="store_true", help="docker build from the recipe's Dockerfile")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag is present")
    image_sub.add_parser("check", help="say whether the image is built (exit 1 when it is not)")
    image_sub.add_parser("tag", help="print the tag the docker sandbox uses")
    image_sub.add_parser(
        "requirements", help="print the sandbox's pinned packages (pip's format; the local sandbox needs them too)"
    )


def _compare(args: argparse.Namespace) -> int:
    from pytest_weirdml.baseline import BaselineError, compare, from_session, load
    from pytest_weirdml.session import read_runs

    margin = args.weirdml_regression_margin or 0.0
    try:
        baseline = load(args.baseline)
        now = from_session(read_runs(args.sessions), source=", ".join(map(str, args.sessions)))
        comparison = compare(
            baseline, now, margin=margin, resamples=args.weirdml_bootstrap, force=args.weirdml_baseline_force
        )
    except (BaselineError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # What the session's summary prints of its comparison, without the terminal's colours.
    print(f"comparison with {args.baseline} (margin {margin:g})")
    for line, _style in comparison_lines(comparison.as_dict()):
        print(line)
    # A model with unscored runs is not passed either (its dropped runs might have been its worst).
    return 1 if comparison.regressions or comparison.incomplete else 0


def _report(args: argparse.Namespace) -> int:
    from pytest_weirdml.recordfile import RecordsWarning
    from pytest_weirdml.report.build import build_reports
    from pytest_weirdml.untrusted import printable

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecordsWarning)
        try:
            built = build_reports(
                args.sessions,
                args.out,
                resamples=args.weirdml_bootstrap,
                seed=args.seed,
                leaderboard=args.weirdml_leaderboard,
            )
        except (OSError, ValueError) as exc:
            built = None
            failure = exc
    for said in dict.fromkeys(str(found.message) for found in caught):
        print(printable(f"warning: {said}"), file=sys.stderr)
    if built is None:
        print(f"error: {failure}", file=sys.stderr)
        return 2
    isolation: dict[str, set[str]] = {}
    for run in built.runs:
        isolation.setdefault(run.session, set()).add(run.conditions()["isolation"])
    for session, values in sorted(isolation.items()):
        print(printable(f"isolation of {session}: {', '.join(sorted(values))}"))
    for kind, path in built.paths.items():
        print(f"{kind}: {path}")
    return 0


def _env(args: argparse.Namespace) -> int:
    from pytest_weirdml.errors import SandboxError
    from pytest_weirdml.sandbox import venv

    if args.env_command == "path":
        print(venv.interpreter(venv.env_dir()))
        return 0
    try:
        print(venv.ensure(force=args.force))
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _image(args: argparse.Namespace) -> int:
    from pytest_weirdml.errors import SandboxError
    from pytest_weirdml.sandbox import image, requirements_text

    if args.image_command == "requirements":
        print(requirements_text(), end="")
        return 0
    tag = image.image_tag()
    if args.image_command == "tag":
        print(tag)
        return 0
    from pytest_weirdml.sandbox.docker import connect

    try:
        client = connect()
        if args.image_command == "check":
            present = image.image_present(client, tag)
            print(tag if present else image.missing_image_message(tag))
            return 0 if present else 1
        print(image.build(client, dockerfile=args.dockerfile, force=args.force))
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _models(args: argparse.Namespace) -> int:
    from pytest_weirdml.models import OFFLINE, PROVIDERS, Catalog

    try:
        catalog = Catalog.load(args.rootdir)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"models config: {', '.join(catalog.sources)}")
    print(f"offline: {', '.join(entry.usage for entry in OFFLINE.entries())}")
    aliases = sorted(name for name, entry in catalog.models.items() if "model" in entry)
    ids = sorted(name for name, entry in catalog.models.items() if "model" not in entry)
    rows = []
    for name in aliases + ids:
        config = catalog.lookup(name)
        note = f"deprecated: retires {config.retires}, use {config.replacement}" if config.retires else ""
        rows.append((name if name in aliases else "", config.spec, config.price_text(), note))
    for line in align(("alias", "model", "price", "notes"), rows, left=4):
        print(line)
    print("API keys (set / not set; values are never shown):")
    for provider in PROVIDERS.names():
        names = catalog.lookup(f"{provider}:any").api_key_env
        if not names:
            print(f"  {provider}: needs none")
            continue
        found = [name for name in names if os.environ.get(name)]
        state = f"{found[0]} is set" if found else f"not set ({' or '.join(names)})"
        print(f"  {provider}: {state}")
    return 0


def _tasks_path(args: argparse.Namespace) -> int:
    from pytest_weirdml.tasks import bundled_tasks_dir

    try:
        print(bundled_tasks_dir())
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
