"""The controller-side plugin that gathers run scores from test reports (xdist-safe)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_weirdml.config import Settings
from pytest_weirdml.items import MARKER
from pytest_weirdml.report import summary as summary_mod
from pytest_weirdml.report import terminal


class ResultsCollector:
    """Registered only where reports arrive: the single process, or the xdist controller."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runs: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.runs.extend(value for name, value in report.user_properties if name == "weirdml")  # type: ignore[misc]
        if report.failed and report.when != "call" and MARKER in report.keywords:
            self.errors.append(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.runs and not self.errors:
            return
        summary = summary_mod.build_summary(self.runs, errors=self.errors, resamples=self.settings.bootstrap)
        if not self.runs:
            terminalreporter.write_sep("=", "weirdml summary")
            terminalreporter.write_line(f"no run finished; {len(self.errors)} item(s) hit a harness error")
            return
        where = self.settings.session_dir
        summary["session"] = self.settings.session
        summary_mod.write_summary(summary, where)
        terminal.write_summary(terminalreporter, summary, str(where))
