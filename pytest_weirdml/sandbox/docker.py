"""The Docker sandbox: a fresh container per run, from the image of the sandbox recipe.

The container has no network, a read-only root with a small private ``/tmp``, no capabilities,
no way to gain privileges, bounded memory and processes, and an unprivileged user. It sees the
script, the public files (read-only) and ``results/`` (the one writable host directory, a
size-capped tmpfs where the harness may mount one; see ``_workdir``); never the hidden answers,
the host's environment or the Docker socket. The time limit is enforced
twice: ``timeout -s KILL`` is the container's first process, so when it fires everything in the
container dies; and the harness kills the container if it outlives the limit by a grace period.

Per run the daemon sees four requests on the way in (create, attach, start, wait) and one on
the way out (remove), the same as ``docker run --rm``. Output is read from the attach stream
and capped as it arrives; the daemon keeps no log of it (log driver ``none``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import BACKENDS, Environment, ExecResult, Limits, Sandbox, thread_env
from pytest_weirdml.sandbox._output import CappedBuffer
from pytest_weirdml.sandbox._result import run_result
from pytest_weirdml.sandbox._workdir import RunDir, tmpfs_usable, warn_if_uncapped
from pytest_weirdml.sandbox._workdir import process_start as _process_start
from pytest_weirdml.sandbox._workdir import remove_stale as remove_stale_run_dirs
from pytest_weirdml.sandbox.image import BUILD_COMMAND, image_present, image_tag, missing_image_message

SANDBOX_UID = 1000
WORKDIR = "/sandbox"
# The harness's own kill comes this long after the in-container one should have fired.
KILL_GRACE_S = 3.0
# How often the uncapped fallback measures results/ while a script runs.
WATCH_INTERVAL_S = 0.2
LABEL = "weirdml.sandbox"
SESSION_LABEL = "weirdml.session"
OWNER_LABEL = "weirdml.owner"


def connect(base_url: str | None = None, timeout: float = 60) -> Any:
    """A Docker client that has answered a ping; ``SandboxError`` naming the fix otherwise."""
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("the docker sandbox needs the Docker SDK: pip install docker") from exc
    where = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.DockerClient(base_url=base_url, timeout=int(timeout)) if base_url else docker.from_env()
        client.ping()
    except Exception as exc:
        raise SandboxError(
            f"no Docker daemon at {where}; start dockerd or pass --weirdml-sandbox=local ({exc})"
        ) from exc
    return client


def owner_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's: not ours to judge
    return pid.isdigit() and _process_start(int(pid)) == start


def remove_leftovers(client: Any) -> list[str]:
    """Remove sandbox containers whose owning process on this host is gone (a crashed session)."""
    removed = []
    for info in client.api.containers(all=True, filters={"label": LABEL}):
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        if not _owner_alive(owner):
            with contextlib.suppress(Exception):
                client.api.remove_container(info["Id"], force=True)
                removed.append(info["Id"][:12])
    return removed


class DockerSandbox(Sandbox):
    name = "docker"
    isolated = True

    def __init__(
        self,
        image: str | None = None,
        *,
        base_url: str | None = None,
        workroot: Path | None = None,
        client: Any = None,
        cap_with_tmpfs: bool | None = None,
    ) -> None:
        self.client = client or connect(base_url)
        self.image = image or image_tag()
        if not image_present(self.client, self.image):
            raise SandboxError(missing_image_message(self.image))
        self.workroot = workroot
        self.session = uuid.uuid4().hex[:12]
        self.owner = owner_id()
        try:
            self.leftovers_removed = remove_leftovers(self.client)
        except Exception as exc:
            raise SandboxError(f"the Docker daemon failed listing containers: {exc}") from exc
        self.cap_with_tmpfs = tmpfs_usable()[0] if cap_with_tmpfs is None else cap_with_tmpfs
        warn_if_uncapped(self.cap_with_tmpfs)
        remove_stale_run_dirs(workroot)
        self._environment: Environment | None = None

    # The container ------------------------------------------------------------------------------

    def _labels(self) -> dict[str, str]:
        return {LABEL: "1", SESSION_LABEL: self.session, OWNER_LABEL: self.owner}

    @staticmethod
    def _env(gpu: str | None, cpus: tuple[int, ...]) -> dict[str, str]:
        return {
            **thread_env(cpus),
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "USER": "sandbox",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            # The one device requested is the container's device 0, whatever its host index.
            "CUDA_VISIBLE_DEVICES": "0" if gpu is not None else "",
        }

    def _host_config(self, work: Path, data_dir: Path, limits: Limits, gpu: str | None) -> Any:
        import docker.types

        devices = None
        if gpu is not None:
            devices = [docker.types.DeviceRequest(device_ids=[str(gpu)], capabilities=[["gpu"]])]
        return self.client.api.create_host_config(
            binds={
                str(work): {"bind": WORKDIR, "mode": "ro"},
                str(data_dir): {"bind": f"{WORKDIR}/data", "mode": "ro"},
                str(work / "results"): {"bind": f"{WORKDIR}/results", "mode": "rw"},
            },
            network_mode="none",
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            pids_limit=limits.max_processes,
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_bytes},mode=1777"},
            shm_size=min(limits.tmp_bytes, limits.memory_bytes),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            log_config=docker.types.LogConfig(type="none"),
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
            device_requests=devices,
            cpuset_cpus=",".join(map(str, limits.cpus)) or None,
        )

    # Running ------------------------------------------------------------------------------------

    def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult:
        with RunDir(
            self.workroot,
            results_bytes=limits.results_bytes,
            cap_with_tmpfs=self.cap_with_tmpfs,
            results_owner=SANDBOX_UID,
        ) as work:
            return self._run_in(work, code, Path(data_dir).resolve(), limits, gpu)

    def _run_in(self, work: RunDir, code: str, data_dir: Path, limits: Limits, gpu: str | None) -> ExecResult:
        import docker.errors
        import requests.exceptions

        work.path.chmod(0o755)
        (work.path / "solution.py").write_text(code, encoding="utf-8")
        (work.path / "solution.py").chmod(0o644)
        # The mount points exist up front: the work directory is mounted read-only.
        (work.path / "data").mkdir()
        api = self.client.api
        # One pipe for both streams keeps their true order (the daemon reads two pipes separately);
        # exec leaves timeout(1) as the container's first process.
        command = ["sh", "-c", f"exec timeout -s KILL {limits.time_s:g} python3 -s solution.py 2>&1"]
        container: str | None = None
        over_cap = out_of_memory = False
        try:
            try:
                container = api.create_container(
                    self.image,
                    command=command,
                    user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                    working_dir=WORKDIR,
                    environment=self._env(gpu, limits.cpus),
                    labels=self._labels(),
                    network_disabled=True,
                    host_config=self._host_config(work.path, data_dir, limits, gpu),
                )["Id"]
                stream = api.attach_socket(container, params={"stdout": 1, "stderr": 1, "stream": 1})
                output = _StreamReader(stream, limits.output_bytes)
                start = time.monotonic()
                api.start(container)
            except docker.errors.ImageNotFound as exc:
                raise SandboxError(missing_image_message(self.image)) from exc
            # The stream ends when the container's first process does, so it measures the run.
            ended, over_cap = _wait(output, limits.time_s + KILL_GRACE_S, None if work.capped else work)
            killed = not ended
            if killed:
                with contextlib.suppress(docker.errors.APIError):
                    api.kill(container)
                output.wait(10.0)
            state = api.wait(container, timeout=30)
            duration = time.monotonic() - start
            status = state.get("StatusCode")
            if status != 0 and not killed:
                # Only a failed run can have been cut short by the kernel's OOM killer.
                out_of_memory = bool(api.inspect_container(container)["State"].get("OOMKilled"))
        except BaseException as exc:
            if container is not None:
                # The daemon may be gone; then the next session's start removes the container.
                with contextlib.suppress(Exception):
                    self._remove(container)
            if isinstance(exc, (docker.errors.DockerException, requests.exceptions.RequestException, OSError)):
                raise SandboxError(f"the Docker daemon failed during the run: {exc}") from exc
            raise
        self._remove(container)
        if (state.get("Error") or {}).get("Message"):
            raise SandboxError(f"the container failed: {state['Error']['Message']}")
        # timeout(1) as the container's first process exits 124 or dies with SIGKILL (137).
        timed_out = (killed and not over_cap) or (status in (124, 137) and duration >= limits.time_s)
        if output.error:
            raise SandboxError(f"lost the container's output stream: {output.error}")
        return run_result(
            work,
            limits,
            exit_code=status,
            timed_out=timed_out,
            duration_s=duration,
            output=output.text(),
            output_bytes=output.total,
            out_of_memory=out_of_memory,
            over_cap=over_cap,
            isolation="docker",
        )

    def _remove(self, container: str) -> None:
        try:
            self.client.api.remove_container(container, force=True)
        except Exception as exc:
            import docker.errors

            if isinstance(exc, docker.errors.NotFound):
                return
            # A daemon that cannot remove it now meets it again at the next session's start.
            raise SandboxError(f"could not remove container {container[:12]}: {exc}") from exc

    def containers(self) -> list[str]:
        """Ids of this session's containers that still exist (none, between runs)."""
        found = self.client.api.containers(all=True, filters={"label": f"{SESSION_LABEL}={self.session}"})
        return [info["Id"] for info in found]

    def environment(self) -> Environment:
        if self._environment is None:
            from pytest_weirdml.sandbox.probe import probe_environment

            self._environment = probe_environment(self, fix=f"rebuild the image with `{BUILD_COMMAND} --force`")
        return self._environment

    def close(self) -> None:
        with contextlib.suppress(Exception):
            for container in self.containers():
                self.client.api.remove_container(container, force=True)
        with contextlib.suppress(Exception):
            self.client.close()


def _wait(output: _StreamReader, time_s: float, watch: RunDir | None) -> tuple[bool, bool]:
    """Wait for the end of the run; (ended, stopped for filling results/). ``watch`` is the
    uncapped fallback's results/ directory, measured every ``WATCH_INTERVAL_S``."""
    if watch is None:
        return output.wait(time_s), False
    deadline = time.monotonic() + time_s
    while time.monotonic() < deadline:
        if output.wait(min(WATCH_INTERVAL_S, max(deadline - time.monotonic(), 0))):
            return True, False
        if watch.over_cap():
            return False, True
    return output.wait(0), False


class _StreamReader(CappedBuffer):
    """Demultiplexes an attach stream (stdout and stderr frames) into one capped buffer."""

    def __init__(self, stream: Any, cap: int) -> None:
        super().__init__(cap)
        self._stream = stream
        self.error: BaseException | None = None
        self._done = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        from docker.utils.socket import frames_iter

        try:
            for _, data in frames_iter(self._stream, tty=False):
                self.feed(data)
        except Exception as exc:
            self.error = exc
        finally:
            with contextlib.suppress(Exception):
                self._stream.close()
            self._done.set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)


@BACKENDS.register("docker")
def open_docker(*, python: str | None = None) -> DockerSandbox:
    """``--weirdml-python`` does not apply here: scripts run on the image's own Python."""
    return DockerSandbox()
