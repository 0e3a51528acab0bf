"""One contract, every backend: the shipped cases (``pytest_weirdml.sandbox.contract``) run
against the docker and the local sandbox, and the local one without bubblewrap; then what is
particular to each backend.

Every hostile script must come back as an ``ExecResult`` (never an exception), leave nothing
running, and leave the sandbox usable for the next run. Docker cases skip, saying why, where no
daemon or image is present (build it with ``weirdml image build``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import Sandbox
from pytest_weirdml.sandbox._workdir import LeftoverWarning, tmpfs_usable
from pytest_weirdml.sandbox.contract import *  # noqa: F403
from pytest_weirdml.sandbox.contract import QUICK, assert_usable, run, verdict
from pytest_weirdml.sandbox.docker import DockerSandbox
from pytest_weirdml.sandbox.local import LocalSandbox, NotIsolatedWarning

# local-plain: the local backend's fallback where bubblewrap is missing (no isolation, but limits).
WEIRDML_CONTRACT_BACKENDS = ["local", "local-plain", "docker"]
WEIRDML_CONTRACT_UNISOLATED = ["local-plain"]


@pytest.fixture(scope="module")
def weirdml_open_backend() -> Callable[[str], Sandbox]:
    def open_backend(name: str) -> Sandbox:
        if name.startswith("local"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return LocalSandbox(isolate=False) if name == "local-plain" else LocalSandbox()
        try:
            return DockerSandbox()
        except SandboxError as exc:
            pytest.skip(f"docker sandbox unavailable: {exc}")

    return open_backend


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


# The packages on offer -------------------------------------------------------------------------


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
@pytest.mark.parametrize("backend", WEIRDML_CONTRACT_BACKENDS)
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
@pytest.mark.parametrize("backend", WEIRDML_CONTRACT_BACKENDS)
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
        ["python", "-m", "pytest_weirdml.cli", "image", "build"], capture_output=True, text=True, timeout=120
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
