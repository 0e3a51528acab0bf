"""The controller-side plugin: gathers run scores from test reports (xdist-safe), shows live
progress, and writes the terminal summary and the session's files at the end."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest

from pytest_weirdml.config import Settings
from pytest_weirdml.items import MARKER
from pytest_weirdml.records import RECORDS_FILE
from pytest_weirdml.report import summary as summary_mod
from pytest_weirdml.report import terminal
from pytest_weirdml.report.progress import Progress, RecordsTail

if TYPE_CHECKING:
    from pytest_weirdml.records import IterationRecord


def run_summaries(report: pytest.TestReport) -> list[dict[str, Any]]:
    """The run summaries a report carries (a JSON string; a dict from older writers)."""
    found = []
    for name, value in report.user_properties:
        if name == "weirdml":
            found.append(json.loads(value) if isinstance(value, str) else dict(value))  # type: ignore[call-overload]
    return found


class ResultsCollector:
    """Registered only where reports arrive: the single process, or the xdist controller."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runs: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.progress: Progress | None = None
        self._tail: RecordsTail | None = None
        self.summary: dict[str, Any] | None = None
        self.files: dict[str, str] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        self.progress = Progress(config)
        # Under xdist the iterations run in workers: follow them through the records file.
        if config.pluginmanager.hasplugin("dsession") and self.progress.enabled:
            self._tail = RecordsTail(self.settings.session_dir / RECORDS_FILE, self.progress.show)
            self._tail.start()

    def pytest_weirdml_iteration(self, item: pytest.Item, record: IterationRecord) -> None:
        if self.progress is not None and self._tail is None:
            self.progress.show(dataclasses.asdict(record))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.runs.extend(run_summaries(report))
        if report.failed and report.when != "call" and MARKER in report.keywords:
            self.errors.append(report.nodeid)

    def pytest_sessionfinish(self) -> None:
        """Write the files here, not in the terminal summary, so ``-p no:terminal`` still gets them."""
        if self._tail is not None:
            self._tail.stop()
            self._tail = None
        if not self.runs:
            return
        from pytest_weirdml.report.render import load_records, write_reports

        where = self.settings.session_dir
        runs = [{**run, "session": self.settings.session} for run in self.runs]
        summary = summary_mod.build_summary(
            runs, errors=self.errors, resamples=self.settings.bootstrap, sessions=[self.settings.session]
        )
        summary["session"] = self.settings.session
        paths = write_reports(summary, where, load_records(where), leaderboard=self.settings.leaderboard)
        self.summary = summary
        self.files = {"records": str(where / RECORDS_FILE), **{kind: str(path) for kind, path in paths.items()}}

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.summary is not None:
            terminal.write_summary(terminalreporter, self.summary, self.files)
        elif self.errors:
            terminalreporter.write_sep("=", "weirdml summary")
            terminalreporter.write_line(f"no run finished; {len(self.errors)} item(s) hit a harness error")
