"""Ordinary runs, and escapes that must be contained: every one comes back as an ``ExecResult``,
leaves nothing running and leaves the sandbox usable."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from pathlib import Path

import pytest

from pytest_weirdml.sandbox import Limits, Sandbox
from pytest_weirdml.sandbox.contract._fixtures import (
    GOOD,
    QUICK,
    assert_nothing_left,
    assert_usable,
    run,
    verdict,
)

__all__ = [
    "test_a_script_that_resets_its_affinity_stays_on_its_share",
    "test_background_processes_do_not_outlive_the_script",
    "test_crash_is_the_scripts_outcome",
    "test_data_is_read_only",
    "test_endless_loop_is_killed_at_the_limit",
    "test_filling_tmp_is_bounded",
    "test_flood_of_output_is_capped",
    "test_fork_bomb_is_contained",
    "test_good_script_returns_predictions",
    "test_memory_is_bounded",
    "test_out_of_memory_is_named_as_such",
    "test_script_runs_on_its_leased_cores",
]


def test_good_script_returns_predictions(sandbox: Sandbox, data_dir: Path) -> None:
    result = run(sandbox, data_dir, GOOD)
    assert (result.exit_code, result.timed_out) == (0, False), result.output
    assert result.predictions == b"2\n4\n6\n"
    assert "wrote 3" in result.output
    assert result.notes == ()


def test_script_runs_on_its_leased_cores(sandbox: Sandbox, data_dir: Path) -> None:
    core = max(os.sched_getaffinity(0))
    script = "import os\nprint('CPUS', sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'])\n"
    result = run(sandbox, data_dir, script, dataclasses.replace(QUICK, cpus=(core,)))
    assert f"CPUS [{core}] 1" in result.output, result.output


RESET_AFFINITY = """\
import os, resource, time
os.sched_setaffinity(0, range(os.cpu_count()))  # every core, as far as affinity goes
print("CPUS", sorted(os.sched_getaffinity(0)), flush=True)
start = time.monotonic()
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, range(os.cpu_count()))
        while time.monotonic() - start < 1.5:
            pass
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print("BUSY", used.ru_utime + used.ru_stime, "WALL", time.monotonic() - start)
"""


def test_a_script_that_resets_its_affinity_stays_on_its_share(sandbox: Sandbox, data_dir: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores to have a share smaller than all")
    if not getattr(sandbox, "cgroups", True):
        pytest.skip("without cgroups the local sandbox pins by affinity only (UnboundedWarning)")
    core = max(os.sched_getaffinity(0))
    result = run(sandbox, data_dir, RESET_AFFINITY, dataclasses.replace(QUICK, cpus=(core,), time_s=20))
    assert result.exit_code == 0, result.output
    assert f"CPUS [{core}]" in result.output, result.output
    busy, wall = (float(x) for x in result.output.split("BUSY")[1].split()[::2])
    # Two busy processes on one core use at most that core's time (with a little slack for accounting).
    assert busy <= wall * 1.2 + 0.1, result.output


def test_crash_is_the_scripts_outcome(sandbox: Sandbox, data_dir: Path) -> None:
    result = run(sandbox, data_dir, "print('before')\n1 / 0\n")
    assert result.exit_code not in (0, None)
    assert not result.timed_out
    assert "before" in result.output and "ZeroDivisionError" in result.output
    assert result.predictions is None
    assert_usable(sandbox, data_dir)


def test_endless_loop_is_killed_at_the_limit(sandbox: Sandbox, data_dir: Path) -> None:
    marker = f"weirdml-loop-{uuid.uuid4().hex}"
    code = f"""\
    import os, sys
    print("looping", flush=True)
    os.execv(sys.executable, [sys.executable, "-c", "while True: pass", "{marker}"])
    """
    start = time.monotonic()
    result = run(sandbox, data_dir, code, Limits(time_s=2, memory_bytes=1 << 30))
    assert result.timed_out and result.exit_code is None
    assert "looping" in result.output
    assert result.duration_s >= 2 and time.monotonic() - start < 2 + 6
    assert any("time limit" in note for note in result.notes)
    assert_nothing_left(sandbox, marker)
    assert_usable(sandbox, data_dir)


def test_flood_of_output_is_capped(sandbox: Sandbox, data_dir: Path) -> None:
    code = """\
    import sys
    sys.stdout.write("HEAD-OF-OUTPUT\\n")
    line = "x" * 1023 + "\\n"
    for _ in range(10 * 1024):
        sys.stdout.write(line)
    sys.stderr.write("TAIL-OF-OUTPUT\\n")
    """
    result = run(sandbox, data_dir, code)
    assert result.exit_code == 0
    assert result.output_bytes >= 10 << 20
    assert len(result.output.encode()) < QUICK.output_bytes + 200
    assert result.output.startswith("HEAD-OF-OUTPUT") and result.output.rstrip().endswith("TAIL-OF-OUTPUT")
    # The model reads that the capture itself was capped, and how much the script printed.
    assert f"the script printed {result.output_bytes} bytes of output; the harness keeps at most 64 KiB" in "".join(
        result.notes
    )
    assert_usable(sandbox, data_dir)


# Escapes that must be contained -----------------------------------------------------------------


def test_fork_bomb_is_contained(sandbox: Sandbox, data_dir: Path) -> None:
    marker = f"weirdml-bomb-{uuid.uuid4().hex}"
    code = f"""\
    import os, sys
    if len(sys.argv) == 1:
        os.execv(sys.executable, [sys.executable, "solution.py", "{marker}"])
    failed = 0
    while True:
        try:
            os.fork()
        except OSError:
            failed += 1
            if failed == 1:
                print("fork refused", flush=True)
    """
    start = time.monotonic()
    result = run(sandbox, data_dir, code, Limits(time_s=3, memory_bytes=1 << 30, max_processes=64))
    assert time.monotonic() - start < 3 + 8
    assert "fork refused" in result.output  # the process cap was hit, not just the clock
    assert_nothing_left(sandbox, marker)
    assert_usable(sandbox, data_dir)


def test_background_processes_do_not_outlive_the_script(sandbox: Sandbox, data_dir: Path) -> None:
    marker = f"weirdml-daemon-{uuid.uuid4().hex}"
    code = f"""\
    import os, subprocess, sys
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"]
    # One leaves the session and holds the output open; one double-forks away from everything.
    subprocess.Popen(sleeper, start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(sys.executable, sleeper)
        os._exit(0)
    os.wait()
    print("left them running", flush=True)
    """
    start = time.monotonic()
    result = run(sandbox, data_dir, code)
    assert result.exit_code == 0 and not result.timed_out, result.output
    assert "left them running" in result.output
    assert time.monotonic() - start < QUICK.time_s
    assert_nothing_left(sandbox, marker)
    assert_usable(sandbox, data_dir)


def test_filling_tmp_is_bounded(isolated: Sandbox, data_dir: Path) -> None:
    name = f"weirdml-fill-{uuid.uuid4().hex}"
    code = f"""\
    import os
    written = 0
    try:
        with open("/tmp/{name}", "wb") as fh:
            while written < (1 << 30):
                fh.write(b"\\0" * (1 << 20))
                fh.flush()
                written += 1 << 20
    except OSError as exc:
        print("stopped:", exc.strerror)
    print("written MiB", written >> 20)
    """
    result = run(isolated, data_dir, code)
    assert "stopped:" in result.output, result.output
    mib = int(result.output.split("written MiB")[1].split()[0])
    assert mib <= QUICK.tmp_bytes >> 20
    assert not Path("/tmp", name).exists()
    assert_usable(isolated, data_dir)


def test_data_is_read_only(sandbox: Sandbox, data_dir: Path) -> None:
    before = {p.name: p.read_bytes() for p in data_dir.iterdir()}
    code = """\
    import os
    for attempt, action in [
        ("create", lambda: open("data/new.txt", "w").write("x")),
        ("modify", lambda: open("data/x.txt", "a").write("9\\n")),
        ("delete", lambda: os.remove("data/x.txt")),
        ("rename", lambda: os.rename("data/x.txt", "data/y.txt")),
        ("chmod", lambda: os.chmod("data/x.txt", 0o777)),
        ("replace dir", lambda: os.rename("data", "data2")),
    ]:
        try:
            action()
            print(attempt, "SUCCEEDED")
        except OSError as exc:
            print(attempt, "refused:", exc.strerror)
    """
    result = run(sandbox, data_dir, code)
    # Without isolation nothing stops a root script from changing its copy; never the original.
    if sandbox.isolated:
        assert "SUCCEEDED" not in result.output, result.output
    assert {p.name: p.read_bytes() for p in data_dir.iterdir()} == before
    assert_usable(sandbox, data_dir)


def test_memory_is_bounded(sandbox: Sandbox, data_dir: Path) -> None:
    code = """\
    blocks = []
    try:
        for _ in range(64):
            blocks.append(bytearray(64 << 20))
        print("ALLOCATED 4 GiB")
    except MemoryError:
        print("memory refused")
    """
    result = run(sandbox, data_dir, code, Limits(time_s=10, memory_bytes=512 << 20, max_processes=64))
    assert "ALLOCATED" not in result.output, result.output
    assert_usable(sandbox, data_dir)


def test_out_of_memory_is_named_as_such(sandbox: Sandbox, data_dir: Path) -> None:
    if getattr(sandbox, "cgroups", True) is False:
        pytest.skip("without cgroups RLIMIT_AS makes the allocation fail instead (MemoryError in the output)")
    code = """\
    blocks = []
    while True:
        blocks.append(bytearray(32 << 20))
    """
    limits = dataclasses.replace(QUICK, time_s=20, memory_bytes=256 << 20)
    result = run(sandbox, data_dir, code, limits)
    assert result.out_of_memory and not result.timed_out, result
    assert verdict(result, limits) == "killed: out of memory (limit 256 MiB)"
    assert "harness: a process was killed: out of memory (limit 256 MiB)" in result.notes
    assert_usable(sandbox, data_dir)
