"""The run directory on the host: its safe reader, its size cap, and what a killed session leaves.

These drive ``RunDir`` directly, as a script that is not isolated (the plain local sandbox, root)
could leave it; the contract suite runs the same cases through every backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_weirdml.sandbox import _workdir
from pytest_weirdml.sandbox._tree import walk
from pytest_weirdml.sandbox._workdir import RunDir, remove_stale, tmpfs_usable

CAP = 1 << 20


@pytest.fixture(params=[True, False], ids=["tmpfs", "plain-dir"])
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunDir]:
    if request.param and not tmpfs_usable()[0]:
        pytest.skip(f"cannot mount here: {tmpfs_usable()[1]}")
    with RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=request.param) as work:
        yield work


def test_a_regular_file_is_read(run_dir: RunDir) -> None:
    (run_dir.results / "test_preds.txt").write_bytes(b"1\n2\n")
    assert run_dir.read_predictions() == (b"1\n2\n", None)


def test_nothing_written_is_no_problem(run_dir: RunDir) -> None:
    assert run_dir.read_predictions() == (None, None)


def test_results_replaced_by_a_link_is_refused(run_dir: RunDir, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_preds.txt").write_text("1\n2\n")
    if run_dir.capped:
        with pytest.raises(OSError):  # a mount point cannot be moved
            run_dir.results.rename(run_dir.path / "moved")
        return
    run_dir.results.rename(run_dir.path / "moved")
    run_dir.results.symlink_to(outside)
    assert run_dir.read_predictions() == (
        None,
        "results/ is a symlink, not the directory the harness made; nothing in it was read",
    )


def test_results_replaced_by_another_directory_is_refused(run_dir: RunDir) -> None:
    if run_dir.capped:
        pytest.skip("a mount point cannot be replaced")
    run_dir.results.rename(run_dir.path / "moved")
    run_dir.results.mkdir()
    (run_dir.results / "test_preds.txt").write_text("1\n")
    assert run_dir.read_predictions()[1] == (
        "results/ was replaced; the harness reads only the results/ directory it made"
    )


def test_the_run_directory_replaced_by_a_link_is_refused(tmp_path: Path) -> None:
    work = RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=False)
    try:
        real = work.path.rename(tmp_path / "real")
        work.path.symlink_to(real)
        assert work.read_predictions()[1] == (
            "the script's working directory was replaced; the harness reads only what it made"
        )
    finally:
        work.path.unlink()
        (tmp_path / "real").rename(work.path)
        work.close()


def test_a_hard_link_is_refused(run_dir: RunDir, tmp_path: Path) -> None:
    if run_dir.capped:
        pytest.skip("a tmpfs holds no link to a file elsewhere")
    secret = tmp_path / "secret.txt"
    secret.write_text("1\n2\n")
    os.link(secret, run_dir.results / "test_preds.txt")
    assert run_dir.read_predictions() == (
        None,
        "results/test_preds.txt is a hard link to another file; write the predictions into a new file",
    )


def test_a_file_over_the_cap_is_not_read(run_dir: RunDir) -> None:
    if run_dir.capped:
        # The tmpfs holds no more than the cap: the write itself fails.
        with pytest.raises(OSError, match="No space left"):
            (run_dir.results / "test_preds.txt").write_bytes(b"1\n" * CAP)
        assert run_dir.full()
        return
    (run_dir.results / "test_preds.txt").write_bytes(b"1\n" * CAP)
    assert run_dir.read_predictions() == (None, "results/test_preds.txt is larger than the 1 MiB cap")
    assert run_dir.full() and run_dir.over_cap()


def test_a_device_is_never_opened(run_dir: RunDir) -> None:
    if os.getuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(run_dir.results / "test_preds.txt", 0o600 | 0o020000, os.makedev(1, 3))  # /dev/null
    assert run_dir.read_predictions()[1] == (
        "results/test_preds.txt is a device, not a regular file; write the predictions into a regular file"
    )


def test_the_directory_is_removed_with_its_mounts(run_dir: RunDir) -> None:
    path = run_dir.path
    (run_dir.results / "a.txt").write_text("x")
    run_dir.close()
    assert not path.exists()
    assert str(path) not in Path("/proc/self/mountinfo").read_text()


def test_a_killed_sessions_run_directory_is_removed_at_the_next_start(tmp_path: Path) -> None:
    # A session that is SIGKILLed mid-run leaves its run directory (and its tmpfs) behind.
    child = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from pytest_weirdml.sandbox._workdir import RunDir, tmpfs_usable
        work = RunDir({str(tmp_path)!r}, results_bytes=1 << 20, cap_with_tmpfs=tmpfs_usable()[0])
        (work.results / "test_preds.txt").write_text("1")
        print(work.path, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    left = Path(proc.stdout.readline().strip())
    assert left.is_dir()
    # While its owner lives, it is not ours to remove.
    assert remove_stale(tmp_path) == [] and left.is_dir()
    proc.kill()
    proc.wait()
    mine = RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=False)
    try:
        assert remove_stale(tmp_path) == [str(left)]
        assert not left.exists() and mine.path.is_dir()
        assert str(left) not in Path("/proc/self/mountinfo").read_text()
    finally:
        mine.close()


def test_only_run_directories_are_removed(tmp_path: Path) -> None:
    other = tmp_path / "weirdml-something-else"
    other.mkdir()
    dead = tmp_path / f"{_workdir.PREFIX}{2**22 + 1}-0-abc"
    dead.mkdir()
    assert remove_stale(tmp_path) == [str(dead)]
    assert other.is_dir()


def test_the_watched_fallback_measures_what_was_written(tmp_path: Path) -> None:
    with RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=False) as work:
        (work.results / "sub").mkdir()
        for i in range(3):
            (work.results / "sub" / f"{i}.bin").write_bytes(b"\0" * (CAP // 2))
        start = time.monotonic()
        assert work.results_size() >= 3 * (CAP // 2) and work.over_cap()
        assert time.monotonic() - start < 1


def _deep_tree(top: Path, depth: int) -> None:
    """A chain of ``depth`` directories under ``top`` (deeper than PATH_MAX allows to name)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
            if i % 500 == 0:
                os.symlink("/etc", "link", dir_fd=fd)
        with open(os.open("leaf.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as fh:
            fh.write(b"\0" * 8192)
    finally:
        os.close(fd)


def test_a_tree_deeper_than_the_recursion_limit_is_measured_and_removed(tmp_path: Path) -> None:
    assert sys.getrecursionlimit() < 2000
    work = RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=False)
    _deep_tree(work.results, 2000)
    start = time.monotonic()
    size, entries = work.results_usage()
    # 2000 directories, 4 links and the leaf: the leaf's bytes are counted however deep it lies.
    assert entries == 2000 + 4 + 1 and size >= 8192
    work.close()
    assert not work.path.exists() and work.left_aside is None
    assert Path("/etc/passwd").is_file(), "a link in the tree was followed"
    assert time.monotonic() - start < 10


def test_removal_never_follows_a_link_out_of_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    work = RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=False)
    (work.results / "escape").symlink_to(outside)
    (work.results / "file-link").symlink_to(outside / "keep.txt")
    work.close()
    assert not work.path.exists()
    assert (outside / "keep.txt").read_text() == "mine"


def test_many_files_in_the_watched_fallback_are_over_the_cap(tmp_path: Path) -> None:
    with RunDir(tmp_path, results_bytes=CAP, cap_with_tmpfs=False) as work:
        for i in range(_workdir.RESULTS_INODES + 1):
            (work.results / str(i)).touch()
        assert work.results_size() < CAP and work.over_cap() and work.too_many_files
        assert work.full_note() == "harness: results/ is full: a script may make at most 4096 files there"


def test_a_stale_directory_that_cannot_be_removed_is_renamed_aside(tmp_path: Path) -> None:
    if os.getuid() != 0 or subprocess.run(["which", "chattr"], capture_output=True).returncode != 0:
        pytest.skip("needs root and chattr to make a file nobody can remove")
    dead = tmp_path / f"{_workdir.PREFIX}{2**22 + 1}-0-abc"
    dead.mkdir()
    _deep_tree(dead, 1200)
    stuck = dead / "stuck"
    stuck.write_text("immutable")
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
        pytest.skip(f"this file system has no immutable flag: {tmp_path}")
    aside = tmp_path / f"{_workdir.ASIDE}{2**22 + 1}-0-abc"
    try:
        with pytest.warns(_workdir.LeftoverWarning, match=f"could not be removed .*renamed to {aside}"):
            assert remove_stale(tmp_path) == [str(dead)]
        assert aside.is_dir() and not dead.exists()
        # Never tried again: the next start has nothing to say about it.
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert remove_stale(tmp_path) == []
    finally:
        subprocess.run(["chattr", "-i", str(aside / "stuck"), str(stuck)], capture_output=True)
        for left in (dead, aside):
            if left.exists():
                walk(left, remove=True)


def _swap_for_a_link_once_seen(monkeypatch: pytest.MonkeyPatch, planted: Path, target: Path) -> None:
    """The race a local user can run against a root harness: a run directory of a dead session,
    planted in the shared temporary directory, is swapped for a link after the sweep has seen it
    (here: while the sweep asks whether its owner lives) and before it is taken apart."""
    real = _workdir.process_start

    def swap(pid: int) -> str | None:
        if planted.is_dir() and not planted.is_symlink():
            planted.rmdir()
            planted.symlink_to(target)
        return real(pid)

    monkeypatch.setattr(_workdir, "process_start", swap)


def test_the_sweep_never_leaves_its_directory_through_a_link_swapped_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = tmp_path / f"{_workdir.PREFIX}{2**22 + 1}-0-abc"
    planted.mkdir()
    _swap_for_a_link_once_seen(monkeypatch, planted, Path("/"))
    unmounted: list[object] = []
    monkeypatch.setattr(_workdir, "_unmount", unmounted.append)  # never a real unmount here
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        remove_stale(tmp_path)
    # Nothing under / (where the link points) was to be unmounted, and the link is left as it is.
    assert unmounted == []
    assert planted.is_symlink() and [str(w.message) for w in said] == []


def test_a_mount_behind_a_link_swapped_in_stays_mounted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not tmpfs_usable()[0]:
        pytest.skip(f"cannot mount here: {tmpfs_usable()[1]}")
    outside = tmp_path / "outside"
    (outside / "mounted").mkdir(parents=True)
    _workdir._mount_tmpfs(outside / "mounted", 1 << 20, inodes=16, owner=None, mode=0o700)
    try:
        (outside / "mounted" / "keep.txt").write_text("mine")
        root = tmp_path / "tmp"
        planted = root / f"{_workdir.PREFIX}{2**22 + 1}-0-abc"
        planted.mkdir(parents=True)
        _swap_for_a_link_once_seen(monkeypatch, planted, outside)
        remove_stale(root)
        assert str(outside / "mounted") in Path("/proc/self/mountinfo").read_text()
        assert (outside / "mounted" / "keep.txt").read_text() == "mine"
    finally:
        _workdir._unmount(outside / "mounted")
