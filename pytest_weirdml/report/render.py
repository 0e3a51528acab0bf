"""Write a session's files: ``summary.json``, ``results.csv`` and ``report.html``.

Used at the end of a pytest session (from the run summaries that reached the controller) and by
``python -m pytest_weirdml.report`` (from one or several sessions' ``records.jsonl``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_weirdml.records import RECORDS_FILE, IterationRecord, RunRecord, read_records
from pytest_weirdml.report import export, figures
from pytest_weirdml.report.html import REPORT_FILE, render_html
from pytest_weirdml.report.summary import build_summary, write_summary


def load_records(session_dir: Path) -> list[IterationRecord]:
    path = session_dir / RECORDS_FILE
    return list(read_records(path)) if path.is_file() else []


def runs_from_records(records: Iterable[IterationRecord]) -> list[dict[str, Any]]:
    """Run summaries rebuilt from iteration records, one per (session, task, model, run)."""
    grouped: dict[tuple[str, str, str, int], dict[int, IterationRecord]] = {}
    for rec in records:
        # A resumed session may record an iteration twice; the last one is what the run used.
        grouped.setdefault((rec.session, rec.task, rec.model, rec.run), {})[rec.iteration] = rec
    runs = []
    for (session, task, model, run), its in sorted(grouped.items()):
        record = RunRecord(task=task, model=model, run=run, iterations=[its[i] for i in sorted(its)])
        runs.append({**record.summary(), "session": session})
    return runs


def write_reports(
    summary: dict[str, Any],
    out_dir: Path,
    records: Sequence[IterationRecord],
    *,
    leaderboard: Path | None = None,
) -> dict[str, Path]:
    """Write every file into ``out_dir``; return their paths by kind."""
    published: list[export.PublishedRow] = []
    published_note = None
    if leaderboard is not None:
        published = export.read_leaderboard(leaderboard)
        tasks = ", ".join(summary["tasks"])
        how = (
            f"each as its mean over the tasks run here ({tasks})"
            if export.comparable(published, summary["tasks"])
            else f"each as its own published average: the table lacks some of the tasks run here ({tasks}), "
            "so these are not like-for-like"
        )
        published_note = (
            f"Grey: {len(published)} published rows from {leaderboard.name}, {how}; bar charts show a few, "
            "spread by accuracy."
        )
    paths = {
        "summary": write_summary(summary, out_dir),
        "csv": export.write_results_csv(summary, out_dir / export.RESULTS_FILE),
    }
    if figures.available():
        figs, note = figures.all_figures(summary, published), None
    else:
        figs, note = [], "Figures need matplotlib: pip install 'pytest-weirdml[report]'."
    page = render_html(summary, records, figs, figures_note=note, published_note=published_note)
    paths["html"] = out_dir / REPORT_FILE
    paths["html"].write_text(page, encoding="utf-8")
    return paths


def rerender(
    session_dirs: Sequence[Path],
    out_dir: Path,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    leaderboard: Path | None = None,
) -> dict[str, Path]:
    """Rebuild summary and report from sessions' records without running anything."""
    records: list[IterationRecord] = []
    for directory in session_dirs:
        if not (directory / RECORDS_FILE).is_file():
            raise FileNotFoundError(f"{directory / RECORDS_FILE}: no records; pass a session directory under reports/")
        found = load_records(directory)
        # Records written before sessions were stamped still merge apart, by their directory.
        records.extend(r if r.session else _with_session(r, directory.name) for r in found)
    runs = runs_from_records(records)
    if not runs:
        raise ValueError(f"no finished iterations in {', '.join(map(str, session_dirs))}")
    summary = build_summary(runs, resamples=resamples, seed=seed)
    return write_reports(summary, out_dir, records, leaderboard=leaderboard)


def _with_session(record: IterationRecord, session: str) -> IterationRecord:
    record.session = session
    return record
