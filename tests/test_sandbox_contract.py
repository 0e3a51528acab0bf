"""One contract, every backend: each case runs against the docker and the local sandbox.

Every hostile script must come back as an ``ExecResult`` (never an exception), leave nothing
running, and leave the sandbox usable for the next run. Docker cases skip, saying why, where no
daemon or image is present (build it with ``weirdml image build``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import textwrap
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.loop import judge
from pytest_weirdml.sandbox import ExecResult, Limits, Sandbox, requirement_pins
from pytest_weirdml.sandbox._workdir import LeftoverWarning, tmpfs_usable
from pytest_weirdml.sandbox.docker import DockerSandbox
from pytest_weirdml.sandbox.local import LocalSandbox, NotIsolatedWarning
from pytest_weirdml.tasks import score_predictions

# local-plain: the local backend's fallback where bubblewrap is missing (no isolation, but limits).
BACKENDS = ["local", "local-plain", "docker"]
SECRET_ANSWERS = f"hidden-answers-{uuid.uuid4().hex}"
QUICK = Limits(
    time_s=5, memory_bytes=1 << 30, max_processes=64, output_bytes=64 << 10, tmp_bytes=32 << 20, results_bytes=4 << 20
)


# Fixtures ---------------------------------------------------------------------------------------


def _open(name: str) -> Sandbox:
    if name.startswith("local"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return LocalSandbox(isolate=False) if name == "local-plain" else LocalSandbox()
    try:
        return DockerSandbox()
    except SandboxError as exc:
        pytest.skip(f"docker sandbox unavailable: {exc}")


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = _open(request.param)
    yield box
    box.close()


@pytest.fixture(scope="module", params=[b for b in BACKENDS if b != "local-plain"])
def isolated(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """The cases that need isolation run on the backends that promise it (not the plain fallback)."""
    box = _open(request.param)
    if not box.isolated:
        why = getattr(box, "why_not_isolated", "") or "isolation turned off"
        pytest.skip(f"{box.name} sandbox is not isolated here: {why}")
    yield box
    box.close()


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Public files in ``public/`` with the answers in their sibling ``hidden/``, as the cache lays them out."""
    root = tmp_path_factory.mktemp("task")
    public, hidden = root / "public", root / "hidden"
    public.mkdir()
    hidden.mkdir(mode=0o700)
    (public / "x.txt").write_text("1\n2\n3\n")
    (hidden / "answers.txt").write_text(SECRET_ANSWERS)
    public.chmod(0o755)
    return root


@pytest.fixture
def data_dir(task_dir: Path) -> Path:
    return task_dir / "public"


def run(sandbox: Sandbox, data_dir: Path, code: str, limits: Limits = QUICK) -> ExecResult:
    result = sandbox.run(textwrap.dedent(code), data_dir, limits)
    assert isinstance(result, ExecResult)
    return result


GOOD = """\
import numpy as np
x = np.loadtxt("data/x.txt", dtype=int)
np.savetxt("results/test_preds.txt", x * 2, fmt="%d")
print("wrote", len(x))
"""


def assert_usable(sandbox: Sandbox, data_dir: Path) -> None:
    result = run(sandbox, data_dir, GOOD)
    assert result.exit_code == 0, result.output
    assert result.predictions == b"2\n4\n6\n"


def marked_processes(marker: str) -> list[int]:
    """Host pids whose command line carries ``marker`` (processes in containers show up too)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def assert_nothing_left(sandbox: Sandbox, marker: str) -> None:
    deadline = time.monotonic() + 5
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked_processes(marker) == []
    if isinstance(sandbox, DockerSandbox):
        assert sandbox.containers() == []


# Ordinary runs ----------------------------------------------------------------------------------


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
    if isinstance(sandbox, LocalSandbox) and not sandbox.cgroups:
        pytest.skip("without cgroups the local sandbox pins by affinity only (UnboundedWarning)")
    core = max(os.sched_getaffinity(0))
    result = run(sandbox, data_dir, RESET_AFFINITY, dataclasses.replace(QUICK, cpus=(core,), time_s=20))
    assert result.exit_code == 0, result.output
    assert f"CPUS [{core}]" in result.output, result.output
    busy, wall = (float(x) for x in result.output.split("BUSY")[1].split()[::2])
    # Two busy processes on one core use at most that core's time (with a little slack for accounting).
    assert busy <= wall * 1.2 + 0.1, result.output


def test_shared_memory_is_size_capped(isolated: Sandbox, data_dir: Path) -> None:
    code = "import os\nfs = os.statvfs('/dev/shm')\nprint('SHM', fs.f_blocks * fs.f_frsize)\n"
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert 0 < int(result.output.split("SHM")[1].split()[0]) <= QUICK.tmp_bytes


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


@pytest.fixture
def host_listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the host's 127.0.0.1 that records whoever connects."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = server.accept()
            except OSError:
                continue
            seen.append(f"{addr[0]}:{addr[1]}")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join(2)
    server.close()


def test_network_is_unreachable(isolated: Sandbox, data_dir: Path, host_listener: tuple[int, list[str]]) -> None:
    port, seen = host_listener
    code = f"""\
    import socket
    targets = [("127.0.0.1", {port}), ("172.17.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]
    for host, port in targets:
        try:
            socket.create_connection((host, port), timeout=2).close()
            print("REACHED", host, port)
        except OSError as exc:
            print("blocked", host, port, exc)
    try:
        print("RESOLVED", socket.getaddrinfo("pypi.org", 443))
    except OSError as exc:
        print("no dns", exc)
    """
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert "REACHED" not in result.output and "RESOLVED" not in result.output
    assert result.output.count("blocked") == 4
    assert seen == []
    assert_usable(isolated, data_dir)


def test_host_environment_is_not_passed(isolated: Sandbox, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-planted-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    code = """\
    import glob, os
    print(dict(os.environ))
    for path in glob.glob("/proc/*/environ"):
        try:
            print(path, open(path, "rb").read().decode(errors="replace"))
        except OSError as exc:
            print(path, "unreadable", exc.strerror)
    """
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    assert "API_KEY" not in result.output


def test_hidden_answers_are_unreachable(isolated: Sandbox, task_dir: Path, data_dir: Path) -> None:
    hidden = task_dir / "hidden" / "answers.txt"
    code = f"""\
    import os
    candidates = [
        "{hidden}",
        "data/../hidden/answers.txt",
        "../hidden/answers.txt",
        os.path.join(os.path.dirname(os.path.realpath("data")), "hidden", "answers.txt"),
        os.path.join(os.path.dirname(os.path.realpath("data/x.txt")), "..", "hidden", "answers.txt"),
    ]
    # A shallow search of the whole visible tree: the installed packages are deep and irrelevant.
    for dirpath, dirnames, filenames in os.walk("/"):
        depth = dirpath.count("/")
        dirnames[:] = [d for d in dirnames if depth < 6 and d not in ("proc", "sys", "usr", "dev", "lib")]
        if "answers.txt" in filenames:
            candidates.append(os.path.join(dirpath, "answers.txt"))
    for path in candidates:
        try:
            print("READ", path, open(path).read())
        except OSError as exc:
            print("denied", path, exc.strerror)
    """
    result = run(isolated, data_dir, code, Limits(time_s=30, memory_bytes=1 << 30))
    assert result.exit_code == 0, result.output
    assert SECRET_ANSWERS not in result.output
    assert "READ" not in result.output


def test_docker_socket_is_unreachable(isolated: Sandbox, data_dir: Path) -> None:
    code = """\
    import socket
    for path in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n")
            print("REACHED", path, s.recv(200))
        except OSError as exc:
            print("blocked", path, exc.strerror)
    for port in (2375, 2376):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1)
            print("REACHED tcp", port)
        except OSError as exc:
            print("blocked tcp", port, exc.strerror)
    """
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert "REACHED" not in result.output


def test_runs_as_unprivileged_user(isolated: Sandbox, data_dir: Path) -> None:
    code = """\
    import os
    print("uid", os.getuid())
    try:
        open("/etc/weirdml-root-write", "w")
        print("WROTE /etc")
    except OSError as exc:
        print("no write", exc.strerror)
    """
    result = run(isolated, data_dir, code)
    assert "uid 0" not in result.output and "WROTE" not in result.output, result.output


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
    if isinstance(sandbox, LocalSandbox) and not sandbox.cgroups:
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


# What a script leaves in results/ ---------------------------------------------------------------

PLANTED_KEY = f"sk-planted-{uuid.uuid4().hex}"
NOT_REGULAR = "results/test_preds.txt is {}, not a regular file; write the predictions into a regular file"


def verdict(result: ExecResult, limits: Limits = QUICK) -> str | None:
    """The zero reason the model reads for ``result`` (scored against three answers)."""
    answers = np.array([2, 4, 6])
    score = judge(result, lambda content: score_predictions(content, answers, cap=limits.results_bytes), limits)
    return score.zero_reason


LEFTOVERS = {
    "link to a host file": ("import os\nos.symlink('/etc/passwd', 'results/test_preds.txt')", "a symlink"),
    "link to the hidden answers": ("import os\nos.symlink({hidden!r}, 'results/test_preds.txt')", "a symlink"),
    "link to the harness's environment": (
        "import os\nos.symlink('/proc/self/environ', 'results/test_preds.txt')",
        "a symlink",
    ),
    "link to stdin": ("import os\nos.symlink('/dev/stdin', 'results/test_preds.txt')", "a symlink"),
    "FIFO": ("import os\nos.mkfifo('results/test_preds.txt')", "a FIFO (named pipe)"),
    "directory": ("import os\nos.makedirs('results/test_preds.txt/x')", "a directory"),
}


@pytest.mark.parametrize("case", list(LEFTOVERS))
def test_predictions_that_are_not_a_regular_file_are_never_read(
    sandbox: Sandbox, task_dir: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    code, kind = LEFTOVERS[case]
    start = time.monotonic()
    result = run(sandbox, data_dir, code.format(hidden=str(task_dir / "hidden" / "answers.txt")))
    # A FIFO would block a reader for ever; a link to stdin would read the terminal.
    assert time.monotonic() - start < QUICK.time_s + 5
    assert (result.exit_code, result.predictions) == (0, None), result
    assert verdict(result) == NOT_REGULAR.format(kind)
    text = repr(result)
    assert PLANTED_KEY not in text and "root:x:0:0" not in text and SECRET_ANSWERS not in text
    assert_usable(sandbox, data_dir)


def test_results_replaced_by_a_link_is_never_followed(sandbox: Sandbox, data_dir: Path) -> None:
    code = """\
    import os
    for attempt in (lambda: os.rename("results", "elsewhere"), lambda: os.rmdir("results")):
        try:
            attempt()
        except OSError as exc:
            print("refused:", exc.strerror)
    try:
        os.symlink("/etc", "results")
        os.symlink("/etc/passwd", "/etc/test_preds.txt")
    except OSError as exc:
        print("no link:", exc.strerror)
    """
    result = run(sandbox, data_dir, code)
    assert result.predictions is None, result
    # Where results/ is a mount point (tmpfs, bind) it cannot be moved; else the reader refuses the link.
    assert verdict(result) in (
        "no predictions: results/test_preds.txt was not written",
        "results/ is a symlink, not the directory the harness made; nothing in it was read",
        "results/ was removed; write the predictions into the results/ the harness made",
    ), result
    assert "root:x:0:0" not in repr(result)
    assert_usable(sandbox, data_dir)


def test_writes_to_results_stop_at_the_cap(sandbox: Sandbox, data_dir: Path) -> None:
    code = """\
    written = 0
    try:
        for i in range(3):
            with open(f"results/big-{i}.bin", "wb") as fh:
                for _ in range(64):
                    fh.write(b"\\0" * (1 << 20))
                    fh.flush()
                    written += 1 << 20
    except OSError as exc:
        print("stopped after", written >> 20, "MiB:", exc.strerror, flush=True)
        raise
    """
    result = run(sandbox, data_dir, code)
    assert result.results_full, result
    stopped = int(result.output.split("stopped after")[1].split()[0])
    assert stopped <= QUICK.results_bytes >> 20
    assert "No space left on device" in result.output
    assert verdict(result) == (
        f"results/ is full: a script may write at most 4 MiB there (the script ended with exit code {result.exit_code})"
    )
    assert "harness: results/ is full: a script may write at most 4 MiB there" in result.notes
    assert_usable(sandbox, data_dir)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_without_a_tmpfs_the_cap_is_watched(backend: str, data_dir: Path) -> None:
    """The fallback for a harness that may not mount: it measures results/ and stops the run."""
    from pytest_weirdml.sandbox._workdir import CappedWritesWarning

    with pytest.warns(CappedWritesWarning, match="cannot be a size-capped tmpfs"):
        if backend == "local":
            box: Sandbox = LocalSandbox(cap_with_tmpfs=False)
        else:
            try:
                box = DockerSandbox(cap_with_tmpfs=False)
            except SandboxError as exc:
                pytest.skip(f"docker sandbox unavailable: {exc}")
    code = """\
    import time
    for i in range(64):
        with open(f"results/part-{i}.bin", "wb") as fh:
            fh.write(b"\\0" * (1 << 20))
        time.sleep(0.02)
    print("WROTE 64 MiB")
    """
    try:
        result = run(box, data_dir, code, dataclasses.replace(QUICK, time_s=20))
        assert result.results_full and "WROTE" not in result.output, result
        assert result.exit_code != 0 and not result.timed_out
        assert "(the run was stopped for it)" in "".join(result.notes)
        assert verdict(result).startswith("results/ is full: a script may write at most 4 MiB there")
        assert_usable(box, data_dir)
    finally:
        box.close()


DEEP_TREE = """\
import os
os.chdir("results")
for _ in range(2000):
    os.mkdir("d")
    os.chdir("d")
open("leaf.txt", "w").write("deep")
print("DEPTH 2000")
"""
MANY_FILES = """\
made = 0
try:
    for i in range(6000):
        open(f"results/f{i}", "w").close()
        made += 1
        if made % 100 == 0:
            print("MADE", made, flush=True)
finally:
    print("MADE", made, flush=True)
"""


def _run_dirs() -> set[str]:
    import tempfile

    from pytest_weirdml.sandbox._workdir import ASIDE, PREFIX

    mine = tuple(f"{start}{os.getpid()}-" for start in (PREFIX, ASIDE))
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(mine)}


@contextlib.contextmanager
def opened(backend: str, *, capped: bool) -> Iterator[Sandbox]:
    """A backend with results/ a tmpfs (``capped``) or a watched directory (a harness that may not mount)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if backend == "docker":
            try:
                box: Sandbox = DockerSandbox(cap_with_tmpfs=capped)
            except SandboxError as exc:
                pytest.skip(f"docker sandbox unavailable: {exc}")
        else:
            box = LocalSandbox(isolate=None if backend == "local" else False, cap_with_tmpfs=capped)
    try:
        yield box
    finally:
        box.close()


@pytest.mark.parametrize("capped", [True, False], ids=["tmpfs", "watched"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tree_deeper_than_the_recursion_limit_is_removed(backend: str, capped: bool, data_dir: Path) -> None:
    if capped and not tmpfs_usable()[0]:
        pytest.skip(tmpfs_usable()[1])
    with opened(backend, capped=capped) as box:
        before = _run_dirs()
        with warnings.catch_warnings():
            warnings.simplefilter("error", LeftoverWarning)  # a run directory left aside would warn
            # Each directory takes a block on a disk: room for 2000 of them.
            result = run(box, data_dir, DEEP_TREE, dataclasses.replace(QUICK, time_s=30, results_bytes=64 << 20))
        assert result.exit_code == 0 and "DEPTH 2000" in result.output, result
        assert verdict(result) == "no predictions: results/test_preds.txt was not written"
        assert _run_dirs() - before == set()
        assert_usable(box, data_dir)


@pytest.mark.parametrize("capped", [True, False], ids=["tmpfs", "watched"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_results_holds_a_bounded_number_of_files(backend: str, capped: bool, data_dir: Path) -> None:
    if capped and not tmpfs_usable()[0]:
        pytest.skip(tmpfs_usable()[1])
    # The watched fallback looks every 0.2 s: a writer slower than that is stopped near the count.
    slow = "" if capped else "        __import__('time').sleep(0.0005)\n"
    code = MANY_FILES.replace("        made += 1\n", "        made += 1\n" + slow)
    with opened(backend, capped=capped) as box:
        result = run(box, data_dir, code, dataclasses.replace(QUICK, time_s=30))
        made = int(result.output.rsplit("MADE", 1)[1].split()[0])
        assert made <= 4096 + (0 if capped else 2000), result
        assert capped or "(the run was stopped for it)" in "".join(result.notes)
        assert result.results_full and result.results_files_full, result
        assert verdict(result) == (
            "results/ is full: a script may make at most 4096 files there "
            f"(the script ended with exit code {result.exit_code})"
        )
        assert_usable(box, data_dir)


def test_a_key_across_the_capture_cut_is_redacted_whole(
    sandbox: Sandbox, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-planted-" + uuid.uuid4().hex
    monkeypatch.setenv("PLANTED_API_KEY", key)
    half = QUICK.output_bytes // 2
    code = f"""\
    import sys
    key = {key!r}
    sys.stdout.write("a" * {half - 10} + key + "b" * 100000 + key + "c" * {half - 10})
    """
    result = run(sandbox, data_dir, code)
    assert result.output_bytes == 2 * (half - 10) + 100000 + 2 * len(key)
    pieces = [key[i : i + 8] for i in range(len(key) - 7)]
    assert not [p for p in pieces if p in result.output + "".join(result.notes)]
    assert result.output.startswith("a" * (half - 10) + "[redacted]")
    assert result.output.endswith("[redacted]" + "c" * (half - 10))


# The packages on offer --------------------------------------------------------------------------

IMPORTS = """\
import importlib, importlib.metadata as md, json, sys
for extra in {hidden!r}:
    sys.path.append(extra)
report = {{}}
for name in ["chess", "pytest", "anthropic", "openai"]:
    try:
        importlib.import_module(name)
        report[name] = "IMPORTED"
    except ImportError:
        report[name] = None
for name, module in {announced!r}.items():
    importlib.import_module(module)
    report[name] = md.version(name)
print("REPORT " + json.dumps(report))
"""
ANNOUNCED = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "scikit-learn": "sklearn",
             "torch": "torch", "pillow": "PIL"}  # fmt: skip


def _host_site_packages() -> list[str]:
    """Where the session's own interpreter keeps what it has beyond the announced set."""
    import site

    return [*site.getsitepackages(), "/usr/lib/python3/dist-packages"]


def test_only_the_announced_packages_import(sandbox: Sandbox, data_dir: Path) -> None:
    # A script that adds the host's package directories to sys.path finds nothing more there
    # (the plain fallback is not isolated: it is tested without that trick).
    hidden = _host_site_packages() if sandbox.isolated else []
    assert set(ANNOUNCED) == set(requirement_pins()), "the list changed: update ANNOUNCED"
    code = IMPORTS.format(hidden=hidden, announced=ANNOUNCED)
    result = run(sandbox, data_dir, code, dataclasses.replace(QUICK, time_s=120, memory_bytes=4 << 30))
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.split("REPORT ", 1)[1])
    assert {name: report[name] for name in ("chess", "pytest", "anthropic", "openai")} == dict.fromkeys(
        ("chess", "pytest", "anthropic", "openai")
    )
    for name, pin in requirement_pins().items():
        assert report[name].split("+")[0] == pin, (name, report[name])


def test_the_system_prompt_lists_what_imports(sandbox: Sandbox) -> None:
    env = sandbox.environment()
    assert set(env.packages) == set(requirement_pins())
    assert {name: version.split("+")[0] for name, version in env.packages.items()} == requirement_pins()


def test_both_backends_announce_the_same_packages() -> None:
    try:
        docker = DockerSandbox()
    except SandboxError as exc:
        pytest.skip(f"docker sandbox unavailable: {exc}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = LocalSandbox()
    try:
        assert local.environment().packages == docker.environment().packages
        # Both run a CPython 3.11 (the image's is Debian's, the local one the session's base).
        assert local.environment().python.split(".")[:2] == docker.environment().python.split(".")[:2]
    finally:
        docker.close()


# Docker only ------------------------------------------------------------------------------------


def test_docker_absent_daemon_is_a_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"no Docker daemon at .*start dockerd or pass --weirdml-sandbox=local"):
        DockerSandbox(base_url=f"unix://{tmp_path}/absent.sock")


@pytest.fixture(scope="module")
def docker_box() -> Iterator[DockerSandbox]:
    try:
        box = DockerSandbox()
    except SandboxError as exc:
        pytest.skip(f"docker sandbox unavailable: {exc}")
    yield box
    box.close()


def test_docker_missing_image_names_the_build_command(docker_box: DockerSandbox) -> None:
    with pytest.raises(SandboxError, match=r"`weirdml image build`"):
        DockerSandbox(image="weirdml-sandbox:not-built", client=docker_box.client)


class _DaemonProxy:
    """A unix-socket proxy in front of the real daemon, which the test can make vanish."""

    def __init__(self, path: Path, target: str = "/var/run/docker.sock") -> None:
        self.path, self.target = path, target
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(16)
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(1 << 16):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def die(self) -> None:
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def test_docker_daemon_dying_mid_run_is_a_sandbox_error(
    docker_box: DockerSandbox, data_dir: Path, tmp_path: Path
) -> None:
    proxy = _DaemonProxy(tmp_path / "docker.sock")
    box = DockerSandbox(base_url=f"unix://{proxy.path}")
    threading.Timer(1.5, proxy.die).start()
    with pytest.raises(SandboxError, match="Docker daemon"):
        box.run("import time\nprint('working', flush=True)\ntime.sleep(4)\n", data_dir, QUICK)
    # The real daemon still holds the container: the next session's start clears such leftovers.
    api = docker_box.client.api
    for info in api.containers(all=True, filters={"label": f"weirdml.session={box.session}"}):
        api.remove_container(info["Id"], force=True)


def test_docker_leftovers_of_a_crashed_session_are_removed(docker_box: DockerSandbox) -> None:
    from pytest_weirdml.sandbox.docker import LABEL, OWNER_LABEL

    api = docker_box.client.api
    # A pid that cannot be alive: the owner of these containers has crashed.
    dead = f"{socket.gethostname()}:{2**22 + 1}:0"
    container = api.create_container(
        docker_box.image,
        command=["sleep", "600"],
        labels={LABEL: "1", OWNER_LABEL: dead},
        host_config=api.create_host_config(network_mode="none"),
    )["Id"]
    api.start(container)
    fresh = DockerSandbox(client=docker_box.client)
    # Any sandbox starting on this daemon meanwhile (another xdist worker's) may have removed it first.
    assert container[:12] in fresh.leftovers_removed or not api.containers(all=True, filters={"id": container})
    assert api.containers(all=True, filters={"id": container}) == []
    # A live session's containers are left alone.
    assert docker_box.containers() == []


def test_docker_gpu_is_a_device_request(docker_box: DockerSandbox, tmp_path: Path) -> None:
    config = docker_box._host_config(tmp_path, tmp_path, QUICK, "3")
    assert config["DeviceRequests"][0]["DeviceIDs"] == ["3"]
    assert config["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert docker_box._env("3", ())["CUDA_VISIBLE_DEVICES"] == "0"
    assert (config["NetworkMode"], config["ReadonlyRootfs"], config["CapDrop"]) == ("none", True, ["ALL"])


# Choosing a backend -----------------------------------------------------------------------------


def test_auto_falls_back_to_local_with_a_warning(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pytest_weirdml.sandbox.choose import SandboxFallbackWarning, open_sandbox

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.warns(SandboxFallbackWarning, match="local sandbox, because no Docker daemon"):
        box = open_sandbox("auto")
    assert box.name == "local"


def test_local_without_cgroups_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_weirdml.sandbox import local

    monkeypatch.setattr(local, "cgroups_usable", lambda: (False, "cgroups are read-only here"))
    with pytest.warns(local.UnboundedWarning, match="cgroups are read-only here"):
        box = local.LocalSandbox()
    assert not box.cgroups


def test_local_removes_cgroups_of_a_crashed_session() -> None:
    from pytest_weirdml.sandbox import _cgroup

    ok, why = _cgroup.cgroups_usable()
    if not ok:
        pytest.skip(f"no writable cgroups here: {why}")
    group = _cgroup.RunCgroup.create(max_processes=8, memory_bytes=64 << 20)
    # Named for a pid that cannot be alive, holding a process: a session killed with SIGKILL.
    stale = [path.with_name(f"weirdml-{2**22 + 1}-0-stale") for path in group.dirs]
    for path, new in zip(group.dirs, stale, strict=True):
        path.rename(new)
    sleeper = subprocess.Popen(["sleep", "600"], preexec_fn=_cgroup.RunCgroup(stale, group.version).enter)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            LocalSandbox()
        assert sleeper.wait(5) == -9
        assert not any(path.exists() for path in stale)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_plugin_runs_a_task_in_the_docker_sandbox(
    pytester: pytest.Pytester, docker_box: DockerSandbox, tiny: Path, base_args: list[str]
) -> None:
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "--weirdml-sandbox=docker", *base_args)
    result.assert_outcomes(passed=1)


def test_plugin_names_the_fix_when_docker_is_absent(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tiny: Path, base_args: list[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/absent.sock")
    result = pytester.runpytest("--weirdml-model=reference", "--weirdml-runs=1", "--weirdml-sandbox=docker", *base_args)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no Docker daemon at*start dockerd or pass --weirdml-sandbox=local*"])


def test_build_image_command_reuses_a_present_image(docker_box: DockerSandbox) -> None:
    proc = subprocess.run(
        ["python", "-m", "pytest_weirdml.sandbox.image", "build"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == docker_box.image


def test_build_image_option_then_auto_picks_docker(pytester: pytest.Pytester, docker_box: DockerSandbox) -> None:
    from helpers import write_tiny_task

    write_tiny_task(pytester.path)
    result = pytester.runpytest_subprocess(
        "--weirdml-build-image",
        "--weirdml-sandbox=auto",
        "--weirdml-model=reference",
        "--weirdml-runs=1",
        f"--weirdml-data-cache={pytester.path / 'cache'}",
        f"--weirdml-reports={pytester.path / 'reports'}",
        "-p",
        "no:cacheprovider",
        "-W",
        "error::pytest_weirdml.sandbox.choose.SandboxFallbackWarning",
    )
    result.assert_outcomes(passed=1)
    result.stderr.fnmatch_lines([f"*sandbox image {docker_box.image} is ready*"])
    records = (next((pytester.path / "reports").iterdir()) / "records.jsonl").read_text()
    assert '"sandbox": "docker"' in records


def test_an_interpreter_without_the_packages_is_named_with_the_fix() -> None:
    """The system prompt announces what the sandbox really has, and the user hears what is missing."""
    from pytest_weirdml.sandbox.local import MissingPackagesWarning

    bare = "/usr/bin/python3"
    probe = subprocess.run([bare, "-c", "import numpy"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip(f"{bare} has numpy here, so it is not a bare interpreter")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotIsolatedWarning)
        box = LocalSandbox(bare)
    with pytest.warns(MissingPackagesWarning, match=r"lacks numpy.*pip install -r .*requirements.txt"):
        env = box.environment()
    assert "numpy" not in env.packages and env.python.startswith("3.")


def test_only_the_leased_gpus_device_nodes_are_bound(tmp_path: Path) -> None:
    from pytest_weirdml.sandbox.leases import gpu_device_nodes

    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (tmp_path / name).touch()
    (tmp_path / "nvidia-caps").mkdir()
    names = [p.name for p in gpu_device_nodes("2", tmp_path)]
    assert names == ["nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps"]
    # A GPU the harness knows only by UUID: the node's number is unknown, every node is bound.
    assert len(gpu_device_nodes("GPU-1234", tmp_path)) == 8


@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="no NVIDIA GPU here")
def test_a_script_sees_only_its_gpus_device_node() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = LocalSandbox()
    if not box.isolated:
        pytest.skip("needs bubblewrap")
    import tempfile

    data = Path(tempfile.mkdtemp())
    code = "import os\nprint('DEV', sorted(n for n in os.listdir('/dev') if n.startswith('nvidia')))\n"
    result = box.run(code, data, QUICK, gpu="0")
    nodes = result.output.split("DEV", 1)[1]
    assert "'nvidia0'" in nodes and "'nvidia1'" not in nodes, result.output
