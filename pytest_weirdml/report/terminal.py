"""The terminal summary: a (model, task) table with intervals, then one line per model."""

from __future__ import annotations

from typing import Any

import pytest


def _ci(row: dict[str, Any]) -> str:
    return f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def write_summary(tr: pytest.TerminalReporter, summary: dict[str, Any], where: str) -> None:
    models = summary["models"]
    verbose = tr.config.get_verbosity() >= 0
    tr.write_sep("=", "weirdml summary")
    if verbose:
        width = max([len("task")] + [len(t) for m in models.values() for t in m["tasks"]])
        mwidth = max([len("model")] + [len(m) for m in models])
        tr.write_line(f"{'task':<{width}}  {'model':<{mwidth}}  runs  mean    95% CI")
        for model, row in models.items():
            for task, cell in row["tasks"].items():
                tr.write_line(
                    f"{task:<{width}}  {model:<{mwidth}}  {cell['runs']:>4}  {cell['mean']:.3f}   {_ci(cell)}"
                )
        tr.write_line("")
    mwidth = max([len("model")] + [len(m) for m in models])
    tr.write_line(f"{'model':<{mwidth}}  tasks  runs  overall  95% CI          SE     failures  median exec")
    for model, row in models.items():
        exec_s = row["exec_time_median_s"]
        exec_text = f"{exec_s:.1f} s" if exec_s is not None else "-"
        tr.write_line(
            f"{model:<{mwidth}}  {len(row['tasks']):>5}  {row['runs']:>4}  {row['overall']['mean']:.3f}    "
            f"{_ci(row['overall'])}  {row['overall']['se']:.3f}  {row['failure_rate']:>7.1%}  {exec_text:>11}"
        )
    if summary["errors"]:
        tr.write_line(f"{len(summary['errors'])} item(s) hit a harness error and are not scored (see the errors above)")
    tr.write_line(f"records, transcripts and summary.json: {where}")
