"""Files written whole or not at all, never through a link: what every file built from the records
(``summary.json``, the results CSVs, ``report.html``, the transcripts) is written with.

``write_atomic`` writes a temporary file in the same directory, created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` under a name no one can take first (``tempfile.mkstemp``),
syncs it to disk and renames it over the name. A crash or a full disk leaves the old file or the
new one, never a part of it or an empty one; a link someone planted at the name is replaced, its
target never touched. No pytest here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one rename; on any failure
    the old file stays as it was and the temporary file is removed."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, part = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
    _sync_directory(path.parent)
    return path


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` would, for every thread)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _sync_directory(directory: Path) -> None:
    """The rename itself on disk (best effort: some file systems cannot sync a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
