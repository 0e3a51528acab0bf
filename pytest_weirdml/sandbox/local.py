"""The local sandbox: bubblewrap where it works, else a plain subprocess with limits.

Scripts run on the sandbox's own interpreter environment (``sandbox.venv``), which holds exactly
the announced packages, unless ``--weirdml-python`` names another interpreter.

Under bubblewrap the script sees only the system's ``/usr``, the interpreter's prefixes (every
site-packages directory that is not on the interpreter's own path hidden under an empty tmpfs, so
editing ``sys.path`` finds nothing more), its working directory read-only with ``data/`` bound
read-only and ``results/`` writable, and private ``/tmp``, ``/proc`` and ``/dev``: no network,
no host home, no cache holding the hidden answers, no host processes. The plain fallback is not
isolated (it can read and write what the user can) and says so once.

Either way each run gets its own cgroup where the host lets us make one: a hard cap on processes
and memory, its leased cores as a cpuset (or a CPU quota), and at the end every process the
script started dies, including those that left its session. Without writable cgroups the limits
fall back to rlimits and the cores to CPU affinity (which a script can widen), with a warning.
Under bubblewrap ``/dev/shm`` is a tmpfs as small as ``/tmp``, and a GPU run sees only its own
GPU's device node (``gpu_device_nodes``) beside the driver's control nodes.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.sandbox import (
    BACKENDS,
    REQUIREMENTS_FILE,
    Environment,
    ExecResult,
    Limits,
    Sandbox,
    thread_env,
)
from pytest_weirdml.sandbox import venv as sandbox_venv
from pytest_weirdml.sandbox._cgroup import CgroupUnavailable, RunCgroup, cgroups_usable, remove_stale
from pytest_weirdml.sandbox._output import CappedOutput
from pytest_weirdml.sandbox._result import run_result
from pytest_weirdml.sandbox._workdir import RunDir, tmpfs_usable, warn_if_uncapped
from pytest_weirdml.sandbox._workdir import remove_stale as remove_stale_run_dirs
from pytest_weirdml.sandbox.leases import gpu_device_nodes
from pytest_weirdml.sandbox.probe import MissingPackagesWarning, probe_environment

SANDBOX_ROOT = "/sandbox"
FILE_SIZE_LIMIT = 1 << 30
# How often the uncapped fallback measures results/ while a script runs.
WATCH_INTERVAL_S = 0.2

__all__ = ["LocalSandbox", "MissingPackagesWarning", "NotIsolatedWarning", "UnboundedWarning", "bwrap_works"]


class NotIsolatedWarning(UserWarning):
    """The local sandbox runs scripts as plain subprocesses, without isolation."""


class UnboundedWarning(UserWarning):
    """No cgroups here: processes and memory are bounded by rlimits only."""


def bwrap_works(bwrap: str | None = None) -> tuple[bool, str]:
    """Whether bubblewrap can make a sandbox here, and if not, why."""
    bwrap = bwrap or shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed; apt-get install bubblewrap"
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap failed to start: {exc}"
    if proc.returncode != 0:
        return False, f"bwrap cannot create namespaces here: {proc.stderr.decode(errors='replace').strip()}"
    return True, ""


@BACKENDS.register("local")
class LocalSandbox(Sandbox):
    name = "local"

    def __init__(
        self,
        python: str | None = None,
        *,
        isolate: bool | None = None,
        workroot: Path | None = None,
        cap_with_tmpfs: bool | None = None,
    ):
        # None: the sandbox's own environment (built on first use), holding only announced packages.
        self.dedicated = python is None
        self.python = str(sandbox_venv.ensure(hold=True)) if python is None else python
        self.workroot = workroot
        ok, why = bwrap_works()
        if isolate and not ok:
            raise SandboxError(f"isolation was requested but {why}")
        self.isolated = ok if isolate is None else isolate
        self.why_not_isolated = why
        if not self.isolated:
            warnings.warn(
                f"the local sandbox is NOT isolated ({why or 'isolation turned off'}): scripts run as plain "
                "subprocesses that can read and write your files, import what is installed beside their "
                "interpreter and reach the network; use --weirdml-sandbox=docker or install bubblewrap",
                NotIsolatedWarning,
                stacklevel=2,
            )
        self.cgroups, why_no_cgroups = cgroups_usable()
        if self.cgroups:
            remove_stale()
        if not self.cgroups:
            bound = "not bounded at all (RLIMIT_NPROC does not apply to root)" if os.getuid() == 0 else "RLIMIT_NPROC"
            warnings.warn(
                f"the local sandbox cannot make cgroups ({why_no_cgroups}): memory is bounded by RLIMIT_AS, "
                f"processes by {bound}, and a process that leaves the script's session may outlive it; "
                "run as root with a writable /sys/fs/cgroup, or use --weirdml-sandbox=docker",
                UnboundedWarning,
                stacklevel=2,
            )
        self.cap_with_tmpfs = tmpfs_usable()[0] if cap_with_tmpfs is None else cap_with_tmpfs
        warn_if_uncapped(self.cap_with_tmpfs)
        remove_stale_run_dirs(workroot)
        self._binds: list[str] = []
        self._hidden: list[str] = []
        if self.isolated:
            self._binds, self._hidden = self._interpreter_paths()
        self._environment: Environment | None = None

    @property
    def isolation(self) -> str:
        if not self.isolated:
            return "none"
        return "bwrap+cgroups" if self.cgroups else "bwrap"

    def _interpreter_paths(self) -> tuple[list[str], list[str]]:
        """The directories the interpreter needs (venv and base installation) outside /usr, and
        the package directories below them or in /usr that are not on its path (to hide)."""
        probe = (
            "import json,os,sys;"
            "print(json.dumps([sys.prefix,sys.base_prefix,os.path.realpath(sys.executable),sys.path]))"
        )
        try:
            out = subprocess.run([self.python, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"the sandbox interpreter {self.python} does not run: {exc}") from exc
        prefix, base, real, path = json.loads(out.stdout)
        paths = {os.path.realpath(prefix), os.path.realpath(base), os.path.dirname(os.path.dirname(real))}
        binds = sorted(p for p in paths if not p.startswith("/usr/"))
        on_path = {os.path.realpath(entry) for entry in path if entry}
        candidates = {
            os.path.realpath(found)
            for root in [*binds, "/usr", "/usr/local"]
            for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages")
            for found in glob.glob(os.path.join(root, pattern))
        }
        hidden = sorted(
            c for c in candidates if os.path.isdir(c) and not any(p == c or p.startswith(c + "/") for p in on_path)
        )
        return binds, hidden

    # The command and its surroundings -----------------------------------------------------------

    def _env(self, home: str, gpu: str | None, cpus: tuple[int, ...]) -> dict[str, str]:
        return {
            **thread_env(cpus),
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            "CUDA_VISIBLE_DEVICES": gpu or "",
        }

    def _bwrap_command(self, work: RunDir, data_dir: Path, limits: Limits, gpu: str | None) -> list[str]:
        cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
        for name in ("bin", "lib", "lib64", "sbin"):
            path = Path("/") / name
            if path.is_symlink():
                cmd += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                cmd += ["--ro-bind", str(path), str(path)]
        for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives"):
            if os.path.exists(etc):
                cmd += ["--ro-bind", etc, etc]
        cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
        # Shared memory is memory too: as small as the private /tmp.
        cmd += ["--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm"]
        for prefix in self._binds:
            cmd += ["--ro-bind", prefix, prefix]
        # Packages installed beside the interpreter but not on its path stay out of reach.
        for hidden in self._hidden:
            cmd += ["--tmpfs", hidden, "--remount-ro", hidden]
        if gpu is not None:
            cmd += ["--ro-bind", "/sys", "/sys"]
            # The leased GPU's node and the driver's control nodes: never another GPU's.
            for dev in gpu_device_nodes(gpu):
                cmd += ["--dev-bind", str(dev), str(dev)]
        # The working directory is read-only: results/ (size-capped) is the one host directory written.
        cmd += ["--ro-bind", str(work.path), SANDBOX_ROOT, "--bind", str(work.results), f"{SANDBOX_ROOT}/results"]
        cmd += ["--ro-bind", str(data_dir), f"{SANDBOX_ROOT}/data"]
        # The root bwrap builds is a tmpfs: read-only, so scripts write only to /tmp and results/.
        cmd += ["--remount-ro", "/"]
        cmd += ["--chdir", SANDBOX_ROOT, "--unshare-user", "--uid", "65534", "--gid", "65534"]
        cmd += ["--clearenv"]
        for key, value in self._env("/tmp", gpu, limits.cpus).items():
            cmd += ["--setenv", key, value]
        return [*cmd, self.python, "-s", "solution.py"]

    @staticmethod
    def _limiter(
        limits: Limits, *, cgroup: RunCgroup | None, count_user_processes: bool, cap_address_space: bool
    ) -> Callable[[], None]:
        def apply() -> None:
            # Joining before exec means every process the script ever starts is born inside.
            if cgroup is not None:
                cgroup.enter()
            if limits.cpus:
                os.sched_setaffinity(0, limits.cpus)
            if cap_address_space:
                resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if count_user_processes:
                # RLIMIT_NPROC counts every process of the real user, so leave room for theirs.
                mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owned(p))
                cap = mine + limits.max_processes
                resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))

        return apply

    # Running ------------------------------------------------------------------------------------

    def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult:
        with RunDir(
            self.workroot,
            results_bytes=limits.results_bytes,
            cap_with_tmpfs=self.cap_with_tmpfs,
            home_bytes=None if self.isolated else limits.tmp_bytes,
        ) as work:
            return self._run_in(work, code, data_dir, limits, gpu)

    def _run_in(self, work: RunDir, code: str, data_dir: Path, limits: Limits, gpu: str | None) -> ExecResult:
        (work.path / "solution.py").write_text(code, encoding="utf-8")
        (work.path / "data").mkdir()
        if self.isolated:
            cmd = self._bwrap_command(work, data_dir, limits, gpu)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            _copy_tree(data_dir, work.path / "data")
            (work.path / "data").chmod(0o555)
            cmd, env = [self.python, "-s", "solution.py"], self._env(str(work.home), gpu, limits.cpus)
        cgroup = None
        if self.cgroups:
            try:
                cgroup = RunCgroup.create(max_processes=limits.max_processes, memory_bytes=limits.memory_bytes)
                # Affinity alone is the script's to widen; the cgroup is not.
                cgroup.bind_cpus(limits.cpus)
            except CgroupUnavailable as exc:
                raise SandboxError(f"could not create the run's cgroup: {exc}") from exc
        try:
            return self._start(work, cmd, env, limits, gpu, cgroup)
        finally:
            if cgroup is not None:
                cgroup.kill_all()
                cgroup.remove()

    def _start(
        self,
        work: RunDir,
        cmd: list[str],
        env: dict[str, str],
        limits: Limits,
        gpu: str | None,
        cgroup: RunCgroup | None,
    ) -> ExecResult:
        read_fd, write_fd = os.pipe()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=work.path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                # CUDA reserves far more address space than it uses, so RLIMIT_AS would break it;
                # a cgroup bounds real memory instead, and counts processes whoever the user is.
                preexec_fn=self._limiter(
                    limits,
                    cgroup=cgroup,
                    count_user_processes=cgroup is None and os.getuid() != 0,
                    cap_address_space=cgroup is None and gpu is None,
                ),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            os.close(read_fd)
            raise SandboxError(f"could not start the sandbox ({cmd[0]}): {exc}") from exc
        finally:
            os.close(write_fd)
        output = CappedOutput(read_fd, limits.output_bytes)
        timed_out = over_cap = False
        try:
            timed_out, over_cap = _wait(proc, limits.time_s, None if work.capped else work)
        finally:
            # Whatever the script left behind dies with it: the whole session, at once.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            # And those that left the session: the pipe stays open while any of them holds it.
            if cgroup is not None:
                cgroup.kill_all()
        duration = time.monotonic() - start
        text = output.finish()
        return run_result(
            work,
            limits,
            exit_code=proc.returncode,
            timed_out=timed_out,
            duration_s=duration,
            output=text,
            output_bytes=output.total,
            out_of_memory=cgroup is not None and cgroup.out_of_memory(),
            over_cap=over_cap,
            isolation=self.isolation,
        )

    def environment(self) -> Environment:
        """Python and package versions as the sandbox's own interpreter reports them (cached)."""
        if self._environment is None:
            if self.dedicated:
                fix = f"rebuild the local sandbox's environment with `{sandbox_venv.BUILD_COMMAND} --force`"
            else:
                fix = (
                    f"install them into it (pip install -r {REQUIREMENTS_FILE}) or leave out --weirdml-python "
                    "to use the sandbox's own environment"
                )
            self._environment = probe_environment(self, fix=fix)
        return self._environment


def _wait(proc: subprocess.Popen[bytes], time_s: float, watch: RunDir | None) -> tuple[bool, bool]:
    """Wait for the script; (timed out, stopped for filling results/). ``watch`` is the uncapped
    fallback's results/ directory, measured every ``WATCH_INTERVAL_S``."""
    deadline = time.monotonic() + time_s
    while True:
        left = deadline - time.monotonic()
        try:
            proc.wait(timeout=max(left, 0) if watch is None else max(min(left, WATCH_INTERVAL_S), 0))
            return False, False
        except subprocess.TimeoutExpired:
            if watch is not None and watch.over_cap():
                return False, True
            if time.monotonic() >= deadline:
                return True, False


def _owned(proc_dir: Path) -> bool:
    try:
        return proc_dir.stat().st_uid == os.getuid()
    except OSError:
        return False


def _copy_tree(src: Path, dst: Path) -> None:
    """Give the script its own copy of the public files.

    Not hard links: the script's user owns them (or is root), so it could chmod a link and write
    through it into the shared data cache.
    """
    for path in src.iterdir():
        target = dst / path.name
        if path.is_dir():
            shutil.copytree(path, target)
        else:
            shutil.copy2(path, target)
