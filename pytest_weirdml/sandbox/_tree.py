"""Walk and remove a tree a script made, however deep, without recursion and without links.

A script may leave a ``results/`` tree deeper than Python's recursion limit, or with paths longer
than ``PATH_MAX``; ``shutil.rmtree`` then raises ``RecursionError`` and ``os.scandir`` on the
full path fails. This walk holds one directory descriptor at a time: it enters a child by name
relative to the current descriptor (``O_NOFOLLOW``: a link is never entered, only unlinked) and
comes back through ``..``, checking that it lands on the directory it left, so a tree moved about
while it is walked can never lead it outside.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Usage:
    """What a tree holds: bytes of its blocks and its entries (files, directories, links...)."""

    bytes: int = 0
    entries: int = 0


@dataclass
class _Frame:
    name: str
    identity: tuple[int, int]
    pending: list[str] | None = None


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _open_child(name: str, parent: int, *, remove: bool) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        if not remove:
            return None
        # A script may chmod its directories to 0; the script is gone when the harness removes.
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        if remove:
            raise
        return None


def _list(fd: int, device: int, usage: Usage, *, remove: bool) -> list[str]:
    """The subdirectories of ``fd`` on ``device``; files are counted (and unlinked when removing)."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            usage.entries += 1
            usage.bytes += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                if info.st_dev == device:
                    subdirs.append(entry.name)
                elif remove:
                    raise OSError(f"{entry.name} is a mount point the harness did not make")
            elif remove:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def walk(top: Path, *, remove: bool = False) -> Usage:
    """Measure the tree under ``top`` (``remove=False``), or remove it, ``top`` included.

    Removing raises ``OSError`` when something cannot be removed; measuring skips what it cannot
    read (a script that hides a directory from the harness still pays for it in the cap's bytes
    it wrote before; the tmpfs cap is the hard bound).
    """
    usage = Usage()
    fd = os.open(top, _DIR_FLAGS)
    try:
        device = os.fstat(fd).st_dev
        stack = [_Frame("", _identity(fd))]
        while stack:
            frame = stack[-1]
            if frame.pending is None:
                frame.pending = _list(fd, device, usage, remove=remove)
            if frame.pending:
                name = frame.pending.pop()
                child = _open_child(name, fd, remove=remove)
                if child is None:
                    continue
                os.close(fd)
                fd = child
                stack.append(_Frame(name, _identity(fd)))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            if _identity(fd) != stack[-1].identity:
                raise OSError(f"the tree under {top} moved while it was walked")
            if remove:
                os.rmdir(frame.name, dir_fd=fd)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    if remove:
        os.rmdir(top)
    return usage
