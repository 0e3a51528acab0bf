"""Live progress: one line per finished iteration while the session runs.

Without xdist the iterations run in this process, and ``pytest_weirdml_iteration`` hands each
record to ``Progress.show`` directly. Under ``-n N`` they run in workers whose output xdist
hides, and xdist offers no public channel for messages in the middle of a test (its report
channel carries only phase reports; a made-up report would count in the terminal's tallies and
in JUnit XML). Every worker already appends each finished iteration to the session's
``records.jsonl`` at once (fsync'ed, one complete line per iteration, under a file lock), so the
controller tails that file from a thread: no new protocol, nothing extra on the workers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest


def iteration_line(record: Mapping[str, Any], best: float) -> str:
    verdict = f"acc {record['score']:.4f}"
    if record.get("zero_reason"):
        verdict += f" ({record['zero_reason']})"
    extra = ""
    if record.get("code") is not None:
        extra += f" · script {record.get('duration_s', 0.0):.1f} s"
    if record.get("cost_usd") is not None:
        extra += f" · ${record['cost_usd']:.4f}"
    return (
        f"weirdml {record['task']} · {record['model']} · run {record['run']} · iteration {record['iteration']}: "
        f"{verdict} · best {best:.4f}{extra}"
    )


class Progress:
    """Formats and writes progress lines; remembers each run's best accuracy so far."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._best: dict[tuple[str, str, str, int], float] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.config.get_verbosity() >= 0 and self._reporter() is not None

    def _reporter(self) -> pytest.TerminalReporter | None:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def show(self, record: Mapping[str, Any]) -> None:
        tr = self._reporter()
        if tr is None or self.config.get_verbosity() < 0:
            return
        key = (record.get("session", ""), record["task"], record["model"], record["run"])
        with self._lock:
            best = max(self._best.get(key, 0.0), float(record["score"]))
            self._best[key] = best
            line = iteration_line(record, best)
            capman = self.config.pluginmanager.get_plugin("capturemanager")
            # Inside a test the output is captured; the line must reach the terminal now.
            if capman is not None:
                with capman.global_and_fixture_disabled():
                    tr.write_line(line)
            else:
                tr.write_line(line)


class RecordsTail(threading.Thread):
    """Polls a ``records.jsonl`` from its current end and passes each new complete line on."""

    def __init__(self, path: Path, on_record: Callable[[dict[str, Any]], None], *, interval_s: float = 1.0) -> None:
        super().__init__(name="weirdml-progress", daemon=True)
        self.path = path
        self.on_record = on_record
        self.interval_s = interval_s
        self._done = threading.Event()
        # Lines already there belong to an earlier (resumed) part of the session.
        self._offset = path.stat().st_size if path.is_file() else 0

    def poll(self) -> None:
        if not self.path.is_file():
            return
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
        # Only whole lines: a worker may be half-way through writing the last one.
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for line in chunk[:end].splitlines():
            try:
                self.on_record(json.loads(line))
            except (ValueError, KeyError):
                continue

    def run(self) -> None:
        while not self._done.wait(self.interval_s):
            self.poll()

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)
        self.poll()
