"""Live progress: one line per finished iteration, on a line of its own, while the session runs.

Without xdist the iterations run in this process, and ``pytest_weirdml_iteration`` hands each
record to ``Progress.show`` directly. Under ``-n N`` they run in workers whose output xdist
hides, and xdist offers no public channel for messages in the middle of a test (its report
channel carries only phase reports; a made-up report would count in the terminal's tallies and
in JUnit XML). Every worker already appends each finished iteration to the session's records at
once (fsync'ed, one complete line per iteration, under a file lock), so the controller follows
that file from a thread (``session.RecordsTail``): no new protocol, nothing extra on workers.

A progress line never lands in the middle of pytest's own line of dots: it starts on a fresh
line, and the next dot starts another. Under xdist the tail thread writes while the main thread
writes test results, so both take one lock (``Progress.lock``, held around the terminal's
result hooks by the collector).
"""

from __future__ import annotations

import threading

import pytest

from pytest_weirdml.records import IterationRecord


def iteration_line(record: IterationRecord, best: float) -> str:
    verdict = f"acc {record.score:.4f}"
    if record.zero_reason:
        verdict += f" ({record.zero_reason})"
    extra = ""
    if record.code is not None:
        extra += f" · script {record.duration_s:.1f} s"
    if record.usage.cost_usd is not None:
        extra += f" · ${record.usage.cost_usd:.4f}"
    return (
        f"weirdml {record.task} · {record.model} · run {record.run} · iteration {record.iteration}: "
        f"{verdict} · best {best:.4f}{extra}"
    )


class Progress:
    """Formats and writes progress lines; remembers each run's best accuracy so far."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.lock = threading.RLock()
        self._best: dict[tuple[str, str, str, int], float] = {}

    def _reporter(self) -> pytest.TerminalReporter | None:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    @property
    def enabled(self) -> bool:
        return self.config.get_verbosity() >= 0 and self._reporter() is not None

    def show(self, record: IterationRecord) -> None:
        tr = self._reporter()
        if tr is None or self.config.get_verbosity() < 0:
            return
        key = (record.session, record.task, record.model, record.run)
        with self.lock:
            best = max(self._best.get(key, 0.0), record.score)
            self._best[key] = best
            capman = self.config.pluginmanager.get_plugin("capturemanager")
            # Inside a test the output is captured; the line must reach the terminal now.
            if capman is not None:
                with capman.global_and_fixture_disabled():
                    self._own_line(tr, iteration_line(record, best))
            else:
                self._own_line(tr, iteration_line(record, best))

    def _own_line(self, tr: pytest.TerminalReporter, line: str) -> None:
        # ensure_newline ends a line the reporter knows it started (a file's dots) and makes
        # it start the next result on a new line; under xdist the dots run without that
        # bookkeeping, so the writer's own column says whether the current line is open.
        tr.ensure_newline()
        if self.config.get_terminal_writer().width_of_current_line:
            tr.write("\n")
        tr.write_line(line)
