"""``weirdml check-task TASK_DIR [...] [--quick] [--only GROUP] [--json] [--save]``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.check import GROUPS, QUICK_GROUPS, CheckSettings, check_task, table
from pytest_weirdml.check.calibration import saved_path
from pytest_weirdml.check.findings import FAIL, NA, Finding, TaskReport
from pytest_weirdml.errors import TaskError
from pytest_weirdml.tasks import TASK_FILE, load_task

_MARKS = {"pass": "PASS", FAIL: "FAIL", NA: "n/a "}


def add_parser(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "check-task",
        help="check that a task measures what it should, leaks nothing and holds on faster hardware",
        description="Check task directories: the build (determinism, seeds, files as the prompt says, train "
        "and test apart), leaks (row index, position, byte length, element order, copied labels), the bars "
        "(example script at chance, reference over 0.85 on seeds 0-2 on one core, generic learners), compute "
        "sensitivity (a quarter and four times the limit or work) and the calibration of the shipped blind runs "
        "against the task's tier. Exit 1 when a check fails, 2 when a directory is not a task.",
    )
    parser.add_argument(
        "tasks", nargs="+", type=Path, metavar="TASK_DIR", help="task directories (or a directory of them)"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"only what takes seconds: {', '.join(QUICK_GROUPS)} (no reference runs)"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(GROUPS),
        metavar="GROUP",
        help=f"run only these groups ({', '.join(GROUPS)}); repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print the reports as one JSON list")
    parser.add_argument(
        "--table", action="store_true", help="end with a Markdown table: one row of figures and failed checks per task"
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="keep the report (a full check, or one with the bars group) as calibration/check.json in the task dir",
    )
    parser.add_argument("--sandbox", default="local", help="the sandbox scripts run in (default: local)")
    parser.add_argument(
        "--python",
        default=None,
        help="the interpreter the local sandbox runs scripts with (default: its own environment)",
    )
    parser.add_argument("--cache", type=Path, default=None, help="the data cache (default: the harness's)")
    parser.add_argument("--core", type=int, default=None, help="the core one-core runs use (default: the last one)")
    parser.set_defaults(check_parser=parser)


def _task_dirs(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        if (path / TASK_FILE).is_file():
            found.append(path)
            continue
        inner = sorted(p.parent for p in path.glob(f"*/{TASK_FILE}"))
        if not inner:
            raise TaskError(f"{path}: no {TASK_FILE} here or in its subdirectories; pass a task directory")
        found.extend(inner)
    return found


def _default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml" / "data"


def run(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.check_parser
    if args.save and (args.quick or (args.only and "bars" not in args.only)):
        parser.error("--save keeps measured figures: drop --quick, and keep the bars group in --only")
    try:
        specs = [load_task(d) for d in _task_dirs(args.tasks)]
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from pytest_weirdml.sandbox.choose import open_sandbox

    groups = (
        tuple(g for g in GROUPS if g in args.only) if args.only else (QUICK_GROUPS if args.quick else tuple(GROUPS))
    )
    settings = CheckSettings(
        cache=(args.cache or _default_cache()).expanduser(),
        open_sandbox=lambda: open_sandbox(args.sandbox, python=args.python),
        groups=groups,
        quick=args.quick,
        cores=() if args.core is None else (args.core,),
    )
    reports = []
    for spec in specs:
        if not args.json:
            print(
                f"{spec.name} ({spec.calibration.tier or 'no tier'}, family {spec.calibration.family or '-'})",
                flush=True,
            )
        report = check_task(spec, settings, on_finding=None if args.json else _print_finding)
        reports.append(report)
        if args.save:
            _save(report, saved_path(spec.directory))
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2))
    else:
        _print_summary(reports)
    if args.table and not args.json:
        print("\n".join(table.lines(reports)))
    return 1 if any(r.failures for r in reports) else 0


def _print_finding(finding: Finding) -> None:
    print(f"  {_MARKS.get(finding.status, finding.status)} {finding.check}: {finding.message}", flush=True)
    if finding.fix:
        print(f"       fix: {finding.fix}", flush=True)


def _print_summary(reports: list[TaskReport]) -> None:
    failing = [r for r in reports if r.failures]
    print(f"{len(reports)} task{'s' * (len(reports) != 1)} checked, {len(failing)} with failed checks")
    for report in failing:
        print(f"  {report.task}: {', '.join(f.check for f in report.failures)}")


def _save(report: TaskReport, path: Path) -> None:
    """Written whole or not at all, never through a link (the harness's one atomic writer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(report.as_dict(), indent=2) + "\n")
    print(f"saved {path}")
