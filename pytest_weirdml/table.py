"""Text tables and the comparison as lines: what the terminal, the baseline's verdicts and the
``weirdml`` command print, made in one place. No pytest here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_weirdml.untrusted import printable

# A line and how a terminal may colour it: ``red``, ``green``, ``yellow``, ``bold`` -> True.
Styled = tuple[str, dict[str, bool]]


def align(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> list[str]:
    """The header line, then a line per row: columns sized to fit, the first ``left`` aligned left,
    the others (numbers) right, trailing blanks cut."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    return [
        "  ".join(
            str(c).ljust(w) if i < left else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in table
    ]


def _estimate(est: Mapping[str, Any], signed: bool = False) -> str:
    spec = "+.3f" if signed else ".3f"
    return f"{format(est['mean'], spec)} [{format(est['ci_low'], spec)}, {format(est['ci_high'], spec)}]"


def comparison_cells(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Comparison rows (``Comparison.as_dict()["rows"]``) as text: model, task, baseline, now,
    delta, verdict, with ``REGRESSION`` in capitals."""
    header = ["model", "task", "baseline [95% CI]", "now [95% CI]", "delta [95% CI]", "verdict"]
    cells = [
        [
            row["model"],
            row["task"],
            _estimate(row["baseline"]),
            _estimate(row["now"]),
            _estimate(row["delta"], signed=True),
            "REGRESSION" if row["verdict"] == "regression" else row["verdict"],
        ]
        for row in rows
    ]
    return header, cells


def comparison_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """``comparison_cells`` aligned: the header line, then a line per row."""
    header, cells = comparison_cells(rows)
    return align(header, cells, left=2)


def comparison_lines(comparison: Mapping[str, Any], refused_items: Sequence[str] = ()) -> list[Styled]:
    """The regression gate's verdict: one row per compared (model, task) and model overall, then
    what could not be compared and why, then the verdict. Names, notes and reasons come from a
    baseline file or records: every line is stripped of control characters."""
    out: list[Styled] = []
    if comparison.get("refused"):
        out.append((str(comparison["refused"]), {"red": True}))
    isolation = comparison.get("isolation") or {}
    if isolation:
        sides = "; ".join(f"{side} {', '.join(values) or '-'}" for side, values in isolation.items())
        out.append((f"isolation: {sides}", {"red": any("none" in v for v in isolation.values())}))
    rows = comparison.get("rows", [])
    if rows:
        header, *lines = comparison_table(rows)
        out.append((header, {"bold": True}))
        out += [
            (
                line,
                {
                    "red": line.endswith("REGRESSION"),
                    "green": line.endswith("improvement"),
                    "yellow": line.endswith("incomplete"),
                },
            )
            for line in lines
        ]
    out += [(f"not run, the baseline was made under other conditions: {item}", {"red": True}) for item in refused_items]
    if comparison.get("only_in_baseline"):
        out.append((f"only in the baseline (not compared): {', '.join(comparison['only_in_baseline'])}", {}))
    if comparison.get("only_now"):
        out.append((f"not in the baseline (not compared): {', '.join(comparison['only_now'])}", {}))
    out += [(f"note: {note}", {"yellow": True}) for note in comparison.get("notes", [])]
    incomplete = comparison.get("incomplete", {})
    if incomplete:
        listed = ", ".join(f"{model} ({n} run(s) not scored)" for model, n in incomplete.items())
        out.append((f"incomplete, so not passed: {listed}", {"yellow": True, "bold": True}))
    regressions = comparison.get("regressions", [])
    if regressions:
        listed = ", ".join(f"{r['model']} / {r['task']} ({r['delta']:+.3f})" for r in regressions)
        out.append((f"{len(regressions)} regression(s) against the baseline: {listed}", {"red": True, "bold": True}))
    elif rows and not comparison.get("refused") and not refused_items and not incomplete:
        out.append(("no regression against the baseline", {"green": True}))
    return [(printable(text), style) for text, style in out]
