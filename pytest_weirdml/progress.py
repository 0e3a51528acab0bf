"""Live progress on the controller: one line per finished iteration, and a status line.

Each iteration line carries the session's place (``[37/150]``: items done of all). The status
line says how many items are done, which runs are in flight and what each is doing (from the
``activity`` boards), the time elapsed, an estimate of the time left from the items finished so
far, and the money spent (against ``--weirdml-max-cost`` when set). It is written when an item
ends and, while runs are in flight, every ``LIVE_EVERY_S`` on a terminal (redrawn in place, as
the last line) or every ``LOG_EVERY_S`` into a log. ``-q`` keeps the status line alone;
``-p no:terminal`` shows nothing.

Without xdist the iterations run in this process, and ``pytest_weirdml_iteration`` hands each
record to ``Progress.show`` directly. Under ``-n N`` they run in workers whose output xdist
hides, and xdist offers no public channel for messages in the middle of a test (its report
channel carries only phase reports; a made-up report would count in the terminal's tallies and
in JUnit XML). Every worker already appends each finished iteration to the session's records at
once (fsync'ed, one complete line per iteration, under a file lock), so the controller follows
that file from a thread (``session.RecordsTail``), and each worker's board from its file.

A progress line never lands in the middle of pytest's own line of dots: it starts on a fresh
line, and the next dot starts another. Threads write while the main thread writes test results,
so all take one lock (``Progress.lock``, held around the terminal's result hooks by the
collector), and the live status line is erased before anything else is written.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_weirdml.activity import Board, Doing, read_boards
from pytest_weirdml.records import IterationRecord

LIVE_EVERY_S = 2.0
LOG_EVERY_S = 60.0
# A run waiting for a person (the human model): the terminal is theirs (an editor may be open on
# it), so the status line is not redrawn in place, only written as items end.
PERSON = "waiting for a person"


def iteration_line(record: IterationRecord, best: float, place: str = "") -> str:
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
        f"{verdict} · best {best:.4f}{extra}{' ' + place if place else ''}"
    )


def clock(seconds: float) -> str:
    """``1:02:03`` or ``2:03``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def status_text(
    done: int, total: int, doing: list[Doing], elapsed: float, spent: float, max_cost: float | None, now: float
) -> str:
    # Counts, time and money first: a narrow terminal cuts the line, and then only the detail
    # of the runs in flight goes.
    parts = [f"weirdml status: {done}/{total} done", f"elapsed {clock(elapsed)}"]
    if 0 < done < total:
        parts.append(f"about {clock(elapsed / done * (total - done))} left")
    money = f"${spent:.4f} spent"
    parts.append(money if max_cost is None else f"{money} of --weirdml-max-cost=${max_cost:g}")
    if doing:
        each = "; ".join(f"{d.item} {d.what} {max(0, int(now - d.since))} s" for d in doing)
        parts.append(f"{len(doing)} in flight ({each})")
    return " · ".join(parts)


class Progress:
    """Counts the session's items, writes the progress lines and keeps the status line."""

    def __init__(
        self, config: pytest.Config, board: Board, boards: Path | None = None, max_cost: float | None = None
    ) -> None:
        self.config = config
        self.board = board
        self.boards = boards
        self.max_cost = max_cost
        self.lock = threading.RLock()
        self.total = 0
        self.done = 0
        self.spent = 0.0
        self._best: dict[tuple[str, str, str, int], float] = {}
        self._started = time.monotonic()
        self._live = 0  # the width of the live status line drawn last, 0 when none is shown
        self._last_status = time.monotonic()
        self._announced: set[str] = set()
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def _reporter(self) -> pytest.TerminalReporter | None:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    @property
    def enabled(self) -> bool:
        return self._reporter() is not None

    @property
    def _interactive(self) -> bool:
        tr = self._reporter()
        return tr is not None and bool(tr.isatty())

    # What happens ---------------------------------------------------------------------------

    def show(self, record: IterationRecord) -> None:
        key = (record.session, record.task, record.model, record.run)
        with self.lock:
            best = max(self._best.get(key, 0.0), record.score)
            self._best[key] = best
            self.spent += record.usage.cost_usd or 0.0
            if self.config.get_verbosity() >= 0:
                self._line(iteration_line(record, best, f"[{self.done}/{self.total}]"))

    def finished(self) -> None:
        """An item ended (passed, failed, errored or skipped)."""
        with self.lock:
            self.done += 1
            if self.done >= self.total:  # the last one: a line of its own, nothing to redraw
                self._last_status = time.monotonic()
                self._line(self.status())
            else:
                self._status(ended=True)

    def _boards(self) -> tuple[list[Doing], list[str]]:
        doing, said = self.board.entries(), self.board.said()
        if self.boards is not None:
            theirs, told = read_boards(self.boards)
            doing, said = doing + theirs, said + told
        return sorted(doing, key=lambda d: d.since), said

    def status(self) -> str:
        now = time.monotonic()
        return status_text(
            self.done, self.total, self._boards()[0], now - self._started, self.spent, self.max_cost, time.time()
        )

    def tick(self) -> None:
        """Called every second: print new announcements (data builds), refresh the status line
        while runs are in flight."""
        doing, said = self._boards()
        with self.lock:
            for text in said:
                if text not in self._announced:
                    self._announced.add(text)
                    if self.config.get_verbosity() >= 0:
                        self._line(f"weirdml {text}")
            if doing:
                self._status(ended=False)

    # Writing --------------------------------------------------------------------------------

    def _status(self, *, ended: bool) -> None:
        """The status line: at once when an item ``ended``, else when it is due (every
        ``LIVE_EVERY_S`` in place on a terminal, at once there after an erase; ``LOG_EVERY_S`` in a log)."""
        live = self._interactive and not any(d.what.startswith(PERSON) for d in self._boards()[0])
        if self._interactive and not live:
            self.erase_live()
        now = time.monotonic()
        due = now - self._last_status >= (LIVE_EVERY_S if live else LOG_EVERY_S) or (live and not self._live)
        if not (ended or due) or (self._interactive and not live and not ended):
            return
        self._last_status = now
        if live:
            self._draw_live(self.status())
        else:
            self._line(self.status())

    @contextlib.contextmanager
    def _terminal(self) -> Iterator[pytest.TerminalReporter | None]:
        tr = self._reporter()
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        # Inside a test the output is captured; these lines must reach the terminal now.
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            yield tr

    def erase_live(self) -> None:
        """Before anything else is written: the live status line goes (it comes back at the next tick)."""
        if self._live:
            with self._terminal():
                sys.stdout.write("\r" + " " * self._live + "\r")
                sys.stdout.flush()
            self._live = 0

    def _draw_live(self, text: str) -> None:
        with self._terminal() as tr:
            if tr is None:
                return
            text = text[: max(20, self.config.get_terminal_writer().fullwidth - 1)]
            if not self._live:
                self._fresh_line(tr)
                tr.flush()
            # Written past the terminal writer, which therefore still holds its line as empty: the
            # line is erased before the writer writes again.
            sys.stdout.write("\r" + text.ljust(self._live))
            sys.stdout.flush()
            self._live = len(text)

    def _line(self, line: str) -> None:
        self.erase_live()
        with self._terminal() as tr:
            if tr is not None:
                self._fresh_line(tr)
                tr.write_line(line)
                tr.flush()

    def _fresh_line(self, tr: pytest.TerminalReporter) -> None:
        # ensure_newline ends a line the reporter knows it started (a file's dots) and makes
        # it start the next result on a new line; under xdist the dots run without that
        # bookkeeping, so the writer's own column says whether the current line is open.
        tr.ensure_newline()
        if self.config.get_terminal_writer().width_of_current_line:
            tr.write("\n")

    # The ticker -----------------------------------------------------------------------------

    def start(self, every_s: float = 1.0) -> None:
        def loop() -> None:
            while not self._stop.wait(every_s):
                self.tick()

        self._ticker = threading.Thread(target=loop, name="weirdml-status", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None
        with self.lock:
            if self._live:  # the live line, drawn when the last item ended, stays as the last status
                with self._terminal():
                    sys.stdout.write("\n")
                    sys.stdout.flush()
                self._live = 0
