"""A session directory, ``reports/<session>/``, and its one source of truth: ``records.jsonl``.

Every run appends its plan before its first model call (``records.RunStart``), every finished
iteration is appended the moment it is scored, and every run that ends appends how it ended
(``records.RunEnd``): finished, or stopped by a harness error.
Everything else in the directory (``summary.json``, the CSVs, ``report.html``, the
transcripts) is built from these records by ``pytest_weirdml.report.build``, at the end of a
session and by ``weirdml report`` alike, so the two give the same files.

The public API, for the plugin, the report command and anything that compares sessions:

- ``SessionDir(path)``: ``append``, ``end_run``, ``started``, ``finished`` and ``check_resumable``
  (resume), ``read``, ``runs`` (grouped, with their status), ``summary`` (the ``summary.json``
  written last);
- ``group_runs(records)``: iterations and run ends -> ``RunRecord`` per (session, task, model, run);
- ``read_runs(directories)``: the runs of one or several sessions (a merge);
- ``RecordsTail``: follows a growing records file (live progress under xdist).

The file itself, line by line (appends that end at a record boundary, a reader that skips a
damaged line with a warning), is ``pytest_weirdml.recordfile``; every line fits the reader
(``pytest_weirdml.linecap``).

No pytest here: the same code serves the plugin, the command line and other tools.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_weirdml.recordfile import ANY_RUN, RunKey, append_line, read_records
from pytest_weirdml.records import (
    ERROR,
    FINISHED,
    INCOMPLETE,
    IterationRecord,
    Record,
    RunEnd,
    RunPlan,
    RunRecord,
    RunStart,
    legacy_plan,
    parse_record,
)

RECORDS_FILE = "records.jsonl"
SUMMARY_FILE = "summary.json"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SessionDir:
    """One session's directory. Appending is safe from several processes (xdist workers)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records_path = path / RECORDS_FILE
        self._lock = FileLock(str(self.records_path) + ".lock")

    @property
    def name(self) -> str:
        return self.path.name

    def exists(self) -> bool:
        """Whether the directory holds records (a session that ran no task item has none)."""
        return self.records_path.is_file()

    # Writing -------------------------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Append one record line, synced to disk; under the lock, a torn last line (a writer
        killed mid-write) is dropped first, and a write that fails (a full disk) is undone, so
        the file always ends at a record boundary."""
        self.path.mkdir(parents=True, exist_ok=True)
        data = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            append_line(self.records_path, data)

    def end_run(self, task: str, model: str, run: int, *, session: str, error: str | None = None) -> RunEnd:
        """Record that a run finished (``error=None``) or that a harness error stopped it."""
        end = RunEnd(
            task=task,
            model=model,
            run=run,
            status=FINISHED if error is None else ERROR,
            error=error,
            ended_at=now(),
            session=session,
        )
        self.append(end)
        return end

    # Reading -------------------------------------------------------------------------------

    def read(self) -> list[Record]:
        """Every complete record, in the order written (a torn last line is skipped)."""
        return list(read_records(self.records_path)) if self.exists() else []

    def iterations(self) -> list[IterationRecord]:
        return [r for r in self.read() if isinstance(r, IterationRecord)]

    def runs(self) -> list[RunRecord]:
        """Every run of the session, with its status (``finished``, ``error``, ``incomplete``)."""
        return read_runs([self.path]) if self.exists() else []

    def started(self, task: str, model: str, run: int) -> RunStart | None:
        """The first recorded start of a run (its plan), or ``None``: what a resumed run keeps."""
        return next(
            (r for r in self.read() if isinstance(r, RunStart) and (r.task, r.model, r.run) == (task, model, run)),
            None,
        )

    def finished(self, task: str, model: str, run: int) -> list[IterationRecord]:
        """The iterations already recorded for one run, in order: what a resumed run replays.

        Only an unbroken prefix 1..k can be continued.
        """
        found = {
            r.iteration: r
            for r in self.read()
            if isinstance(r, IterationRecord) and (r.task, r.model, r.run) == (task, model, run)
        }
        prefix: list[IterationRecord] = []
        while len(prefix) + 1 in found:
            prefix.append(found[len(prefix) + 1])
        return prefix

    def check_resumable(self) -> None:
        """``ValueError`` for a directory a resumed session must not continue, saying why and what
        to do: its records are a link (appending would write through it), hold a line that is not a
        valid record, or belong to another session (a renamed copy, whose runs would split in two)."""
        if self.records_path.is_symlink() or not self.records_path.is_file():
            raise ValueError(f"{self.records_path} is not a regular file (a link?); a session appends only to its own")
        others = sorted({r.session for r in self.read() if r.session and r.session != self.name})
        if others:
            home = self.path.parent / others[0]
            raise ValueError(
                f"{self.path} holds the records of session {', '.join(others)}, not of {self.name} (a renamed "
                f"copy?); resumed under this name its runs would count twice. Resume the session under its own "
                f"name: move the directory back to {home} and pass --weirdml-resume={home}"
            )

    def summary(self) -> dict[str, Any] | None:
        """The ``summary.json`` last built for this session (``None`` before the first)."""
        path = self.path / SUMMARY_FILE
        if not path.is_file():
            return None
        summary: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return summary


def group_runs(
    records: Iterable[Record], *, default_session: str = "", damaged: Collection[RunKey] = ()
) -> list[RunRecord]:
    """Runs from records, one per (session, task, model, run), sorted by that key.

    A resumed session may record an iteration twice: the last one is what the run used. A run's
    plan is its first start (schemas 1 and 2: the conditions its iterations carried). A run's
    status is its last end, unless an iteration came after it (the run went on: ``incomplete``
    until it ends again). A finished run that lost a line (``damaged`` names it, or ``ANY_RUN``
    every run) is ``incomplete`` unless it still holds its start and every planned submission: no
    summary scores what is left of it, and a resume makes it whole. Iterations of schema 1,
    written before runs recorded their end, count as a finished run, as they did then. Records
    without a session name take ``default_session`` (the directory's name), so that sessions still
    merge apart.
    """
    iterations: dict[tuple[str, str, str, int], dict[int, IterationRecord]] = {}
    ends: dict[tuple[str, str, str, int], RunEnd] = {}
    starts: dict[tuple[str, str, str, int], RunStart] = {}
    for record in records:
        if not record.session:
            record.session = default_session
        key = (record.session, record.task, record.model, record.run)
        if isinstance(record, RunStart):
            starts.setdefault(key, record)
            iterations.setdefault(key, {})
        elif isinstance(record, RunEnd):
            ends[key] = record
            iterations.setdefault(key, {})
        else:
            iterations.setdefault(key, {})[record.iteration] = record
            ends.pop(key, None)
    runs = []
    for key in sorted(iterations):
        session, task, model, run = key
        its = [iterations[key][i] for i in sorted(iterations[key])]
        end = ends.get(key)
        if end is not None:
            status, error, ended_at = end.status, end.error, end.ended_at
        elif its and all(it.schema < 2 for it in its):
            status, error, ended_at = FINISHED, None, ""
        else:
            status, error, ended_at = INCOMPLETE, None, ""
        start = starts.get(key)
        plan = start.plan if start is not None else legacy_plan(its)
        if status == FINISHED and {(task, model, run), ANY_RUN} & set(damaged) and not _whole(start, plan, its):
            status = INCOMPLETE
        runs.append(RunRecord(task, model, run, its, session, status, error, ended_at, plan))
    return runs


def _whole(start: RunStart | None, plan: RunPlan | None, its: list[IterationRecord]) -> bool:
    """Whether a finished run holds every line it wrote: its start (schema 3 writes one first) and
    every submission it planned (a finished run made them all)."""
    if start is None and plan is None:
        return False
    planned = plan.iterations_planned if plan is not None else 0
    return [it.iteration for it in its] == list(range(1, planned + 1)) if planned else bool(its)


def read_runs(directories: Sequence[Path]) -> list[RunRecord]:
    """The runs of one or several sessions, merged. ``FileNotFoundError`` names a directory
    without records."""
    records: list[Record] = []
    damaged: set[RunKey] = set()
    for directory in directories:
        session = SessionDir(directory)
        if not session.exists():
            raise FileNotFoundError(f"{session.records_path}: no records; pass a session directory under reports/")
        for record in read_records(session.records_path, lambda key: damaged.add(key or ANY_RUN)):
            # Grouped per file: a directory's name stands in for a session name it lacks.
            if not record.session:
                record.session = session.name
            records.append(record)
    return group_runs(records, damaged=damaged)


class RecordsTail(threading.Thread):
    """Polls a records file from its current end and passes each new iteration on."""

    def __init__(self, path: Path, on_iteration: Callable[[IterationRecord], None], *, interval_s: float = 1.0) -> None:
        super().__init__(name="weirdml-records-tail", daemon=True)
        self.path = path
        self.on_iteration = on_iteration
        self.interval_s = interval_s
        self._done = threading.Event()
        # Lines already there belong to an earlier (resumed) part of the session.
        self._offset = path.stat().st_size if path.is_file() else 0

    def poll(self) -> None:
        if not self.path.is_file():
            return
        with open(self.path, "rb") as fh:
            # A write undone (a full disk) may have shortened the file below what was read.
            self._offset = min(self._offset, os.fstat(fh.fileno()).st_size)
            fh.seek(self._offset)
            chunk = fh.read()
        # Only whole lines: a worker may be half-way through writing the last one.
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for line in chunk[:end].splitlines():
            try:
                record = parse_record(line)
            except ValueError:
                continue
            if isinstance(record, IterationRecord):
                self.on_iteration(record)

    def run(self) -> None:
        while not self._done.wait(self.interval_s):
            self.poll()

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)
        self.poll()
