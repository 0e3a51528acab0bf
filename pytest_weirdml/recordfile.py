"""A records file line by line: each line appended whole or not at all, and read back past any
damage a crash, a full disk or an older writer left.

``append_line`` (called under the session's lock) first drops a torn last line, the half line of a
writer killed mid-write, so no line is ever glued to it; a write that fails (a full disk) is
truncated back to where it started, so the file always ends at a record boundary.
``read_records`` skips a line that is not a whole record with a ``RecordsWarning`` naming the file
and the line, and reads every other line. No pytest here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from pytest_weirdml.records import Record, parse_record
from pytest_weirdml.schema import MAX_LINE_CHARS
from pytest_weirdml.untrusted import is_safe_name

# A run's (task, model, run number).
RunKey = tuple[str, str, int]
# A damaged line whose head does not say which run it belonged to: every run is in doubt.
ANY_RUN: RunKey = ("", "", -1)
# How every record line starts (its first fields are the task, the model and the run).
_RECORD_START = '{"task": '
_HEAD = re.compile(r'\{"task": "([A-Za-z0-9_][A-Za-z0-9_.-]{0,199})", "model": "([^"\\]{1,200})", "run": (\d{1,9})[,}]')


def append_line(path: Path, data: bytes) -> None:
    """Append ``data`` (one whole line) to ``path`` and sync it to disk, never through a link. A
    torn last line is dropped first; a failed write is undone. The caller holds the file's lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        start = _end_at_line(fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            # A session killed right after this call must still find the line on disk.
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)


class RecordsWarning(UserWarning):
    """A line of a records file that is no record (torn by a crash or a full disk, or longer than
    a record can be) was skipped; every other line was read."""


def read_records(path: Path, on_damage: Callable[[RunKey | None], None] = lambda key: None) -> Iterator[Record]:
    """Every complete record of a records file, in order.

    A torn last line (a writer killed mid-write) is left out. A line that is not JSON (torn in the
    middle by an older writer, or glued to the next) or longer than ``MAX_LINE_CHARS`` (never read
    whole) is skipped with a ``RecordsWarning`` naming the file and the line; a record glued to the
    end of a torn line is kept; ``on_damage`` is told the run a skipped line belonged to (``(task,
    model, run)``, read from its head), or ``None`` when the head does not say. A line that is JSON
    but not a valid record (``pytest_weirdml.schema``) is no accident: ``ValueError`` names the
    file, the line and the field.
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(iter(lambda: fh.readline(MAX_LINE_CHARS + 1), ""), start=1):
            if len(line) > MAX_LINE_CHARS:
                on_damage(_run_of(line))
                _read_past_line(fh)
                _skipped(path, number, f"is longer than {MAX_LINE_CHARS >> 20} MiB characters, more than a record")
                continue
            if not line.endswith("\n"):
                break
            try:
                yield parse_record(line)
            except json.JSONDecodeError as exc:
                on_damage(_run_of(line))
                glued = _glued_record(line)
                kept = "; the record glued to its end is kept" if glued is not None else ""
                _skipped(
                    path, number, f"is not a whole record ({exc.msg.removesuffix(' at')}, column {exc.colno}){kept}"
                )
                if glued is not None:
                    yield glued
            except ValueError as exc:
                raise ValueError(f"{path} line {number}: {exc}") from None


def _skipped(path: Path, number: int, why: str) -> None:
    warnings.warn(f"{path} line {number} {why}; skipped, every other line is read", RecordsWarning, stacklevel=3)


def _read_past_line(fh: TextIO) -> None:
    while (chunk := fh.readline(1 << 20)) and not chunk.endswith("\n"):
        pass


def _glued_record(line: str) -> Record | None:
    """A whole record written after a torn one on the same line (by a writer that did not drop
    the torn tail first). A record line starts with ``{"task": ``, which cannot occur unescaped
    inside a JSON string."""
    start = line.find(_RECORD_START, 1)
    while start > 0:
        with contextlib.suppress(ValueError):
            return parse_record(line[start:])
        start = line.find(_RECORD_START, start + 1)
    return None


def _run_of(line: str) -> RunKey | None:
    """The run a damaged line belonged to, from its head (a record's first fields are its task, its
    model and its run), or ``None``."""
    head = _HEAD.match(line)
    return (head[1], head[2], int(head[3])) if head is not None and is_safe_name(head[2]) else None


def _end_at_line(fd: int) -> int:
    """Drop a torn last line (the file does not end in a newline); the file's size after."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end, keep = size, 0
    while end > 0:
        begin = max(0, end - (1 << 16))
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found >= 0:
            keep = begin + found + 1
            break
        end = begin
    os.ftruncate(fd, keep)
    return keep
