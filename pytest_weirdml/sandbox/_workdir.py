"""A run's working directory on the host: owned, size-capped, read without trusting its contents.

Both backends give a script one host directory to write, ``results/``. The harness trusts
nothing the script leaves there:

- **Size.** Where the harness may mount (root, or ``CAP_SYS_ADMIN``), ``results/`` is a tmpfs
  of ``Limits.results_bytes``: a write past the cap fails with ``ENOSPC`` however many files the
  script makes, and nothing reaches the host disk. Elsewhere it is a plain directory that the
  backend measures while the script runs, stopping the run once it is over the cap (a weaker
  bound: a fast writer gets one polling interval past it); ``CappedWritesWarning`` says so.
- **What is read.** The predictions are read through file descriptors only: the run directory,
  then ``results`` (``O_DIRECTORY|O_NOFOLLOW``, and it must still be the directory the harness
  made), then the file (``O_NOFOLLOW|O_NONBLOCK``), after ``lstat`` has shown a regular file
  with one link; never more than the cap. A symlink (to ``/proc/self/environ``, ``/etc/passwd``,
  the hidden answers), a FIFO, a device or a directory is refused with its own reason and never
  opened.
- **Files.** The tmpfs holds at most ``RESULTS_INODES`` entries; the watched fallback counts
  them too and stops the run past that count.
- **Leftovers.** The directory's name carries its owner's pid and start time; a session killed
  with SIGKILL leaves it behind, and the next sandbox to start removes it (unmounting first,
  through descriptors: a link under its name is never followed, nor is its path resolved).
  Removal walks the tree without recursion (``_tree``), however deep the script made it; a
  directory that still cannot be removed is renamed aside (``weirdml-unremovable-...``, never
  tried again) with a ``LeftoverWarning`` naming it, and never stops a run or a session.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import re
import stat
import tempfile
import warnings
from pathlib import Path

from pytest_weirdml.sandbox import size_text
from pytest_weirdml.sandbox._tree import walk

PREFIX = "weirdml-run-"
ASIDE = "weirdml-unremovable-"
RESULTS = "results"
PREDICTIONS = "test_preds.txt"
SHOWN_PATH = f"{RESULTS}/{PREDICTIONS}"
# An honest script writes one or a few files to results/; inodes cost kernel memory.
RESULTS_INODES = 4096
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MNT_DETACH = 2
# Where a run directory is taken apart: by descriptor, never through a link.
_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NAME = re.compile(rf"^{PREFIX}(\d+)-(\d+)-")


class CappedWritesWarning(UserWarning):
    """results/ cannot be a size-capped tmpfs here; its size is only watched while scripts run."""


class LeftoverWarning(UserWarning):
    """A run directory could not be removed; it was renamed aside (the warning names it)."""


def process_start(pid: int) -> str | None:
    """The start time of a live process (to tell it from a later one with the same pid)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _mount_tmpfs(path: Path, size: int, *, inodes: int, owner: int | None, mode: int) -> None:
    options = f"size={size},nr_inodes={inodes},mode={mode:o}"
    if owner is not None:
        options += f",uid={owner},gid={owner}"
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc().mount(b"weirdml", os.fsencode(path), b"tmpfs", flags, options.encode()) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))


def _unmount(path: Path | str) -> None:
    # Lazy: a process that still holds the mount (a leftover of a crashed run) cannot block us.
    _libc().umount2(os.fsencode(path), _MNT_DETACH)


@functools.cache
def tmpfs_usable() -> tuple[bool, str]:
    """Whether this process may mount a size-capped tmpfs, and if not, why."""
    probe = Path(tempfile.mkdtemp(prefix="weirdml-mount-probe-"))
    try:
        _mount_tmpfs(probe, 1 << 20, inodes=16, owner=None, mode=0o700)
    except OSError as exc:
        return False, f"mounting a tmpfs failed ({exc.strerror}); it needs root or CAP_SYS_ADMIN"
    else:
        _unmount(probe)
        return True, ""
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def warn_if_uncapped(cap_with_tmpfs: bool) -> None:
    if cap_with_tmpfs:
        return
    why = tmpfs_usable()[1] or "the tmpfs cap is turned off"
    warnings.warn(
        f"results/ cannot be a size-capped tmpfs ({why}): its size is measured while a script runs "
        "and the run is stopped once it is over the cap, so a fast writer can put more than the cap "
        "on this disk before it is stopped; run as root for a hard cap",
        CappedWritesWarning,
        stacklevel=3,
    )


def _mount_points_in(top: int) -> list[str]:
    """Mount points at or below the directory open as ``top``, relative to it, deepest first.

    Where that directory is comes from its descriptor (``/proc/self/fd``), never from resolving
    a name, which a link swapped in could send anywhere."""
    try:
        here = os.readlink(f"/proc/self/fd/{top}")
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        # Field 5 is the mount point, with spaces and the like escaped as octal.
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point == here or point.startswith(here.rstrip("/") + "/"):
            found.append(os.path.relpath(point, here))
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def _unmount_at(top: int, relative: str) -> None:
    """Unmount what is mounted at ``relative`` under ``top``, reached one name at a time without
    following a link and unmounted through its descriptor: never a path outside ``top``."""
    fd = os.dup(top)
    try:
        for name in [part for part in relative.split("/") if part not in ("", ".")]:
            child = os.open(name, _PATH_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        _unmount(f"/proc/self/fd/{fd}")
    except OSError:
        return  # gone, or a link now: nothing of ours is mounted there
    finally:
        os.close(fd)


def _remove(path: Path) -> str | None:
    """Remove a run directory; when that fails, rename it aside and return the new name.

    The directory is opened by name in its parent without following a link (a link or a file
    under a run directory's name is left alone), its mounts are unmounted through descriptors,
    and its tree is removed without leaving it (``_tree``)."""
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        top = os.open(path.name, _PATH_FLAGS, dir_fd=parent)
    except OSError:
        os.close(parent)
        return None
    try:
        for relative in _mount_points_in(top):
            _unmount_at(top, relative)
        here, now = os.fstat(top), os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (here.st_dev, here.st_ino):
            raise OSError(f"{path} was replaced while it was removed")
        walk(Path(f"/proc/self/fd/{parent}") / path.name, remove=True)
        return None
    except FileNotFoundError:
        return None
    except Exception as exc:  # whatever a script left, it must not stop the harness
        aside = path.with_name(ASIDE + path.name.removeprefix(PREFIX))
        try:
            os.rename(path.name, aside.name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as rename_error:
            where = f"it stays at {path} ({rename_error.strerror})"
        else:
            where = f"it was renamed to {aside}"
        warnings.warn(
            f"a run directory could not be removed ({type(exc).__name__}: {exc}); {where}: remove it by hand",
            LeftoverWarning,
            stacklevel=3,
        )
        return str(aside)
    finally:
        os.close(top)
        os.close(parent)


def remove_stale(root: Path | None = None) -> list[str]:
    """Remove the run directories whose owning process is gone (a session killed with SIGKILL);
    one that cannot be removed is renamed aside, with a warning, and the session goes on. A link
    planted under a run directory's name, or swapped in for one, is never followed."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        with os.scandir(root) as entries:
            found = [(entry.name, _NAME.match(entry.name)) for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for name, match in found:
        if match is not None and process_start(int(match.group(1))) != match.group(2):
            _remove(root / name)
            removed.append(str(root / name))
    return removed


class RunDir:
    """One run's directory: ``solution.py``, ``results/`` (capped) and, for the plain local
    sandbox, a capped ``.home``. Use as a context manager; leaving it unmounts and removes it."""

    def __init__(
        self,
        root: Path | None,
        *,
        results_bytes: int,
        cap_with_tmpfs: bool,
        results_owner: int | None = None,
        home_bytes: int | None = None,
    ) -> None:
        pid = os.getpid()
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-{process_start(pid)}-", dir=root))
        self.results = self.path / RESULTS
        self.home = self.path / ".home"
        self.results_bytes = results_bytes
        self.capped = cap_with_tmpfs
        self._too_many = False
        try:
            self.results.mkdir()
            if cap_with_tmpfs:
                _mount_tmpfs(self.results, results_bytes, inodes=RESULTS_INODES, owner=results_owner, mode=0o755)
            elif results_owner is not None:
                try:
                    os.chown(self.results, results_owner, results_owner)
                except PermissionError:
                    # Not ours to give away: the container's user can write it anyway (the
                    # directory's parent is ours alone, mode 0700 or 0755).
                    self.results.chmod(0o777)
            if home_bytes is not None:
                self.home.mkdir()
                if cap_with_tmpfs:
                    _mount_tmpfs(self.home, home_bytes, inodes=1 << 16, owner=None, mode=0o700)
            status = os.stat(self.results)
            self._results_id = (status.st_dev, status.st_ino)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.left_aside = _remove(self.path)

    # The size cap -------------------------------------------------------------------------------

    def results_usage(self) -> tuple[int, int]:
        """(bytes, entries) of what the script has put under results/, however deep."""
        try:
            usage = walk(self.results)
        except OSError:
            return 0, 0
        return usage.bytes, usage.entries

    def results_size(self) -> int:
        """Bytes the files under results/ occupy (what a script has written to the host)."""
        return self.results_usage()[0]

    def over_cap(self) -> bool:
        """For the uncapped fallback, polled while the script runs: over the bytes or the files."""
        size, entries = self.results_usage()
        if entries > RESULTS_INODES:
            self._too_many = True
        return size > self.results_bytes or entries > RESULTS_INODES

    def full(self) -> bool:
        """Whether results/ reached its cap (bytes or files)."""
        if not self.capped:
            return self.over_cap()
        try:
            fs = os.statvfs(self.results)
        except OSError:
            return False
        if fs.f_favail == 0:
            self._too_many = True
        # A page or two always stays unused; anything closer to the cap is a write that failed.
        return fs.f_bavail * fs.f_frsize < 64 << 10 or self._too_many

    @property
    def too_many_files(self) -> bool:
        """results/ reached its cap on files (``RESULTS_INODES``), not on bytes."""
        return self._too_many

    def full_note(self) -> str:
        if self._too_many:
            return f"harness: results/ is full: a script may make at most {RESULTS_INODES} files there"
        return f"harness: results/ is full: a script may write at most {size_text(self.results_bytes)} there"

    # Reading the predictions --------------------------------------------------------------------

    def read_predictions(self) -> tuple[bytes | None, str | None]:
        """(content, None), (None, None) when no file was written, or (None, why it was refused)."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            top = os.open(self.path, flags | os.O_DIRECTORY)
        except OSError:
            return None, "the script's working directory was replaced; the harness reads only what it made"
        try:
            return self._read_from(top, flags)
        finally:
            os.close(top)

    def _read_from(self, top: int, flags: int) -> tuple[bytes | None, str | None]:
        try:
            results = os.open(RESULTS, flags | os.O_DIRECTORY, dir_fd=top)
        except FileNotFoundError:
            return None, f"{RESULTS}/ was removed; write the predictions into the {RESULTS}/ the harness made"
        except OSError:
            kind = _kind_at(RESULTS, top)
            return None, f"{RESULTS}/ is {kind}, not the directory the harness made; nothing in it was read"
        try:
            here = os.fstat(results)
            if (here.st_dev, here.st_ino) != self._results_id:
                return None, f"{RESULTS}/ was replaced; the harness reads only the {RESULTS}/ directory it made"
            return self._read_file(results, flags)
        finally:
            os.close(results)

    def _read_file(self, results: int, flags: int) -> tuple[bytes | None, str | None]:
        try:
            before = os.stat(PREDICTIONS, dir_fd=results, follow_symlinks=False)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, f"{SHOWN_PATH} could not be examined ({exc.strerror})"
        if not stat.S_ISREG(before.st_mode):
            kind = _kind(before.st_mode)
            return None, f"{SHOWN_PATH} is {kind}, not a regular file; write the predictions into a regular file"
        if before.st_nlink != 1:
            return None, f"{SHOWN_PATH} is a hard link to another file; write the predictions into a new file"
        try:
            fd = os.open(PREDICTIONS, flags | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=results)
        except OSError as exc:
            return None, f"{SHOWN_PATH} could not be opened ({exc.strerror})"
        try:
            after = os.fstat(fd)
            if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                return None, f"{SHOWN_PATH} changed while the harness read it"
            chunks, size = [], 0
            while size <= self.results_bytes:
                chunk = os.read(fd, min(1 << 20, self.results_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as exc:
            return None, f"{SHOWN_PATH} could not be read ({exc.strerror})"
        finally:
            os.close(fd)
        if size > self.results_bytes:
            return None, f"{SHOWN_PATH} is larger than the {size_text(self.results_bytes)} cap"
        return b"".join(chunks), None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a regular file"


def _kind_at(name: str, dir_fd: int) -> str:
    try:
        return _kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError as exc:
        return "unreadable" if exc.errno != errno.ENOENT else "gone"
