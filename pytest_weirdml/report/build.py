"""The one way a session's files are made: ``summary.json``, the results CSVs, ``report.html``
and the transcripts, all from records.

A session calls ``build_reports`` on its own directory when it ends; ``weirdml report`` calls it
on one or several session directories (merging them). Both read the same records through
``pytest_weirdml.session``, so a live and a rebuilt report are the same by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_weirdml.atomic import write_atomic
from pytest_weirdml.baseline import Baseline, BaselineError, compare, from_session
from pytest_weirdml.horizons import report as horizon_report
from pytest_weirdml.horizons.sessions import model_points
from pytest_weirdml.records import RunRecord
from pytest_weirdml.report import export, figures
from pytest_weirdml.report.html import REPORT_FILE, render_html
from pytest_weirdml.report.published import PublishedRow, comparable_rows, read_leaderboard
from pytest_weirdml.report.summary import summarize, write_summary
from pytest_weirdml.report.transcript import TRANSCRIPTS_DIR, write_transcript
from pytest_weirdml.session import read_runs


@dataclass(frozen=True)
class Reports:
    """What was built: the summary, and the files by kind (``summary``, ``csv``, ``csv_own``,
    ``html``, ``transcripts``)."""

    summary: dict[str, Any]
    paths: dict[str, Path]
    runs: Sequence[RunRecord] = ()


def build_reports(
    session_dirs: Sequence[Path],
    out_dir: Path,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    leaderboard: Path | None = None,
    gate: Gate | None = None,
) -> Reports:
    """Read the sessions' records and write every file into ``out_dir``.

    Raises ``FileNotFoundError`` for a directory without records and ``ValueError`` for an
    unreadable records file or published table.
    """
    runs = read_runs(session_dirs)
    if not runs:
        raise ValueError(f"no runs recorded in {', '.join(map(str, session_dirs))}")
    return write_reports(runs, out_dir, resamples=resamples, seed=seed, leaderboard=leaderboard, gate=gate)


@dataclass(frozen=True)
class Gate:
    """A comparison with a baseline to put in the summary (``summary["comparison"]``)."""

    baseline: Baseline
    margin: float = 0.0
    force: bool = False


def compared(gate: Gate, runs: Sequence[RunRecord], resamples: int, seed: int) -> dict[str, Any]:
    """The comparison of these runs with the gate's baseline, or why it was refused."""
    try:
        comparison = compare(
            gate.baseline,
            from_session(runs),
            margin=gate.margin,
            resamples=resamples,
            seed=seed,
            force=gate.force,
        )
    except BaselineError as exc:
        return {"baseline": gate.baseline.source, "margin": gate.margin, "refused": str(exc)}
    return comparison.as_dict()


def write_reports(
    runs: Sequence[RunRecord],
    out_dir: Path,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    leaderboard: Path | None = None,
    gate: Gate | None = None,
) -> Reports:
    summary = summarize(runs, resamples=resamples, seed=seed)
    if gate is not None:
        summary["comparison"] = compared(gate, runs, resamples, seed)
    published, published_note = _published(summary, leaderboard)
    paths = {"summary": write_summary(summary, out_dir), **export.write_results(summary, out_dir)}
    if not summary["models"]:
        figs, note = [], "No run finished: there is nothing to draw."
    elif figures.available():
        figs, note = figures.all_figures(summary, published), None
    else:
        figs, note = [], "Figures need matplotlib: pip install 'pytest-weirdml[report]'."
    horizon_html = ""
    if "horizons" in summary:
        horizon_html = horizon_report.html_section(
            summary, model_points(runs)[2], figures=bool(summary["models"]) and figures.available()
        )
    page = render_html(summary, runs, figs, figures_note=note, published_note=published_note, horizon_html=horizon_html)
    paths["html"] = out_dir / REPORT_FILE
    write_atomic(paths["html"], page)
    by_session = len({run.session for run in runs}) > 1
    for run in runs:
        write_transcript(out_dir, run, by_session=by_session)
    paths["transcripts"] = out_dir / TRANSCRIPTS_DIR
    return Reports(summary, paths, runs)


def _published(summary: dict[str, Any], leaderboard: Path | None) -> tuple[list[PublishedRow], str | None]:
    """The published rows the figures compare with (those that have every shared task), and
    the sentence that says how."""
    if leaderboard is None:
        return [], None
    rows = read_leaderboard(leaderboard)
    shared = summary["published_tasks"]
    if not shared:
        return [], (
            f"{leaderboard.name} is not drawn: it has none of the tasks run here ({', '.join(summary['tasks'])})."
        )
    usable = comparable_rows(rows, shared)
    return usable, (
        f"Grey: {len(usable)} of the {len(rows)} published rows of {leaderboard.name}, those with every task "
        f"shared with this session ({', '.join(shared)}). Both sides are compared on exactly these tasks: each "
        "published row as its mean over them, each of our models as its mean over them; bar charts show a few "
        "rows, spread by accuracy."
    )
