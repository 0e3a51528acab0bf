"""The controller-side plugin: live progress and the status line while the session runs, then
the session's files and the terminal summary at its end.

The files come from the session's records alone (``report.build_reports``, the function
``weirdml report`` calls too), so what the session writes equals what a rebuild writes. Test
reports carry nothing the summary needs.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_weirdml import gate, terminal
from pytest_weirdml.baseline import Baseline
from pytest_weirdml.budget import NOT_RUN, spent_usd
from pytest_weirdml.config import Settings
from pytest_weirdml.fixtures import BOARD_KEY
from pytest_weirdml.progress import Progress
from pytest_weirdml.report.build import build_reports
from pytest_weirdml.session import RecordsTail, SessionDir
from pytest_weirdml.tasks import TASK_FILE

if TYPE_CHECKING:
    from pytest_weirdml.records import IterationRecord


class ResultsCollector:
    """Registered only where reports arrive: the single process, or the xdist controller."""

    def __init__(self, settings: Settings, baseline: Baseline | None = None) -> None:
        self.settings = settings
        self.gate = gate.gate_of(settings.gate, baseline)
        self.verdicts = gate.Verdicts()
        self.comparison: dict[str, Any] | None = None
        self.progress: Progress | None = None
        self._tail: RecordsTail | None = None
        self.summary: dict[str, Any] | None = None
        self.files: dict[str, str] = {}
        self.failure: str | None = None
        self.not_run: list[str] = []  # the items the cost cap kept from starting
        self._boards: Path | None = None

    def boards_dir(self) -> Path:
        """Where xdist workers write their boards of runs in flight (made on first use)."""
        if self._boards is None:
            self._boards = Path(tempfile.mkdtemp(prefix="weirdml-boards-"))
        return self._boards

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        self.progress = Progress(config, config.stash[BOARD_KEY], self._boards, self.settings.max_cost)
        if not self.progress.enabled:
            return
        # Under xdist the iterations run in workers: follow them through the records file.
        if config.pluginmanager.hasplugin("dsession"):
            self.progress.boards = self.boards_dir()
            self._tail = RecordsTail(SessionDir(self.settings.session_dir).records_path, self.progress.show)
            self._tail.start()
        self.progress.start()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.progress is not None:
            self.progress.total = _count(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if self.progress is not None:
            self.progress.total = max(self.progress.total, _count(ids))

    def pytest_weirdml_iteration(self, item: pytest.Item, record: IterationRecord) -> None:
        if self.progress is not None and self._tail is None:
            self.progress.show(record)

    # The terminal writes test results in these hooks; a progress line from the tail thread
    # waits for them to finish, so it never lands in the middle of their output.
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        self.verdicts.see(report)
        if report.skipped and NOT_RUN in str(report.longrepr):
            self.not_run.append(report.nodeid)
        with self._quiet():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        with self._quiet():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        with self._quiet():
            result = yield
        if self.progress is not None and self.progress.enabled and _count([nodeid]):
            self.progress.finished()
        return result

    @contextlib.contextmanager
    def _quiet(self) -> Generator[None, None, None]:
        if self.progress is None:
            yield
            return
        with self.progress.lock:
            self.progress.erase_live()
            yield

    # Before junitxml writes its file: the gate's verdicts become properties of the items.
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the files here, not in the terminal summary, so ``-p no:terminal`` still gets them."""
        if self._tail is not None:
            self._tail.stop()
            self._tail = None
        if self.progress is not None:
            self.progress.stop()
        if self._boards is not None:
            shutil.rmtree(self._boards, ignore_errors=True)
        directory = SessionDir(self.settings.session_dir)
        if not directory.exists():
            # No task item ran: perhaps the baseline refused every one of them.
            if self.gate is not None:
                self.comparison = {"baseline": self.gate.baseline.source, "margin": self.gate.margin}
                self.verdicts.finish(session, self.comparison)
            return
        try:
            built = build_reports(
                [directory.path],
                directory.path,
                resamples=self.settings.report.bootstrap,
                leaderboard=self.settings.report.leaderboard,
                gate=self.gate,
            )
        except (OSError, ValueError) as exc:
            # The records stay as they are; `weirdml report` can rebuild once the cause is fixed.
            self.failure = f"the session's reports could not be built: {exc}"
            return
        self.summary = built.summary
        self.files = {"records": str(directory.records_path), **{kind: str(path) for kind, path in built.paths.items()}}
        if self.gate is not None:
            self.comparison = built.summary["comparison"]
            self.verdicts.finish(session, self.comparison)
        saved = gate.save(self.settings.gate, list(built.runs), self.comparison, source=str(directory.path))
        if saved is not None:
            self.files["baseline"] = saved

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.summary is not None:
            terminal.write_summary(terminalreporter, self.summary, self.files)
        elif self.failure:
            terminalreporter.write_sep("=", "weirdml summary")
            terminalreporter.write_line(self.failure, red=True)
        if self.not_run and self.settings.max_cost is not None:
            spent, cap = spent_usd(self.settings.session_dir), self.settings.max_cost
            names = ", ".join(nodeid.rpartition("::")[2] for nodeid in self.not_run)
            terminalreporter.write_line(
                f"weirdml: the session's spending (${spent:.4f}) reached --weirdml-max-cost=${cap:g}; "
                f"{len(self.not_run)} item(s) not run: {names}",
                yellow=True,
            )
        if self.comparison is not None:
            terminal.write_comparison(terminalreporter, self.comparison, list(self.verdicts.refused))


def _count(nodeids: Any) -> int:
    """How many of these are task items (``<dir>/task.toml::<task>[<model>-<run>]``)."""
    return sum(1 for nodeid in nodeids if f"{TASK_FILE}::" in nodeid)
