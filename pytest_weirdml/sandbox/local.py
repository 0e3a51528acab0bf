"""The local sandbox: bubblewrap where it works, else a plain subprocess with limits.

Under bubblewrap the script sees only the system's ``/usr``, the interpreter's prefixes, its own
working directory (``data/`` bound read-only over it) and private ``/tmp``, ``/proc`` and
``/dev``: no network, no host home, no cache holding the hidden answers, no host processes. The
plain fallback is not isolated (it can read what the user can read) and says so once.

Either way each run gets its own cgroup where the host lets us make one: a hard cap on processes
and memory, and at the end every process the script started dies, including those that left its
session. Without writable cgroups the limits fall back to rlimits, with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
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
    read_predictions,
    requirement_names,
    thread_env,
)
from pytest_weirdml.sandbox._cgroup import CgroupUnavailable, RunCgroup, cgroups_usable, remove_stale
from pytest_weirdml.sandbox._output import CappedOutput

SANDBOX_ROOT = "/sandbox"
FILE_SIZE_LIMIT = 1 << 30


class MissingPackagesWarning(UserWarning):
    """The sandbox's interpreter lacks packages of the sandbox requirements list."""


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

    def __init__(self, python: str | None = None, *, isolate: bool | None = None, workroot: Path | None = None):
        self.python = python or sys.executable
        self.workroot = workroot
        ok, why = bwrap_works()
        if isolate and not ok:
            raise SandboxError(f"isolation was requested but {why}")
        self.isolated = ok if isolate is None else isolate
        self.why_not_isolated = why
        if not self.isolated:
            warnings.warn(
                f"the local sandbox is NOT isolated ({why or 'isolation turned off'}): scripts run as plain "
                "subprocesses that can read your files and reach the network; use --weirdml-sandbox=docker "
                "or install bubblewrap",
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
        self._binds = self._interpreter_paths() if self.isolated else []
        self._environment: Environment | None = None

    def _interpreter_paths(self) -> list[str]:
        """The directories the interpreter needs (venv and base installation), outside /usr."""
        probe = "import json,os,sys;print(json.dumps([sys.prefix,sys.base_prefix,os.path.realpath(sys.executable)]))"
        try:
            out = subprocess.run([self.python, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"the sandbox interpreter {self.python} does not run: {exc}") from exc
        prefix, base, real = json.loads(out.stdout)
        paths = {os.path.realpath(prefix), os.path.realpath(base), os.path.dirname(os.path.dirname(real))}
        return sorted(p for p in paths if not p.startswith("/usr/"))

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

    def _bwrap_command(self, work: Path, data_dir: Path, limits: Limits, gpu: str | None) -> list[str]:
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
        for prefix in self._binds:
            cmd += ["--ro-bind", prefix, prefix]
        if gpu is not None:
            cmd += ["--ro-bind", "/sys", "/sys"]
            for dev in sorted(Path("/dev").glob("nvidia*")):
                cmd += ["--dev-bind", str(dev), str(dev)]
        cmd += ["--bind", str(work), SANDBOX_ROOT, "--ro-bind", str(data_dir), f"{SANDBOX_ROOT}/data"]
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
        work = Path(tempfile.mkdtemp(prefix="weirdml-", dir=self.workroot))
        try:
            return self._run_in(work, code, data_dir, limits, gpu)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _run_in(self, work: Path, code: str, data_dir: Path, limits: Limits, gpu: str | None) -> ExecResult:
        (work / "solution.py").write_text(code, encoding="utf-8")
        (work / "results").mkdir()
        (work / "data").mkdir()
        if self.isolated:
            cmd = self._bwrap_command(work, data_dir, limits, gpu)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            _copy_tree(data_dir, work / "data")
            (work / "data").chmod(0o555)
            (work / ".home").mkdir()
            cmd, env = [self.python, "-s", "solution.py"], self._env(str(work / ".home"), gpu, limits.cpus)
        cgroup = None
        if self.cgroups:
            try:
                cgroup = RunCgroup.create(max_processes=limits.max_processes, memory_bytes=limits.memory_bytes)
            except CgroupUnavailable as exc:
                raise SandboxError(f"could not create the run's cgroup: {exc}") from exc
        try:
            return self._start(work, cmd, env, limits, gpu, cgroup)
        finally:
            if cgroup is not None:
                cgroup.kill_all()
                cgroup.remove()

    def _start(
        self, work: Path, cmd: list[str], env: dict[str, str], limits: Limits, gpu: str | None, cgroup: RunCgroup | None
    ) -> ExecResult:
        read_fd, write_fd = os.pipe()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
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
        timed_out = False
        try:
            proc.wait(timeout=limits.time_s)
        except subprocess.TimeoutExpired:
            timed_out = True
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
        notes = []
        if timed_out:
            notes.append(f"killed after the time limit of {limits.time_s:g} s")
        if cgroup is not None and cgroup.out_of_memory():
            notes.append(f"a process was killed for going over the memory limit of {limits.memory_bytes >> 20} MiB")
        if output.total > limits.output_bytes:
            notes.append(f"output was {output.total} bytes; kept the first and last {limits.output_bytes // 2}")
        return ExecResult(
            exit_code=None if timed_out else proc.returncode,
            timed_out=timed_out,
            duration_s=duration,
            output=text,
            output_bytes=output.total,
            predictions=read_predictions(work / "results" / "test_preds.txt"),
            notes=tuple(notes),
        )

    def environment(self) -> Environment:
        """Package versions as the sandbox's own interpreter reports them (cached)."""
        if self._environment is None:
            self._environment = probe_environment(self)
        return self._environment


def probe_environment(sandbox: Sandbox) -> Environment:
    """Run a probe script inside ``sandbox`` and read the versions of the announced packages."""
    names = requirement_names()
    script = (
        "import json, platform, importlib.metadata as md\n"
        f"names = {names!r}\n"
        "found = {}\n"
        "for n in names:\n"
        "    try:\n"
        "        found[n] = md.version(n)\n"
        "    except md.PackageNotFoundError:\n"
        "        pass\n"
        "print('WEIRDML-ENV ' + json.dumps({'python': platform.python_version(), 'packages': found}))\n"
    )
    with tempfile.TemporaryDirectory() as empty:
        result = sandbox.run(script, Path(empty), Limits(time_s=120))
    for line in result.output.splitlines():
        if line.startswith("WEIRDML-ENV "):
            raw = json.loads(line.removeprefix("WEIRDML-ENV "))
            missing = [name for name in names if name not in raw["packages"]]
            if missing:
                # The system prompt announces only what is there; say what the scripts will lack.
                warnings.warn(
                    f"the {sandbox.name} sandbox's Python lacks {', '.join(missing)} from "
                    f"{REQUIREMENTS_FILE.name}; install them into it (pip install -r {REQUIREMENTS_FILE}) "
                    "or point --weirdml-python at an interpreter that has them",
                    MissingPackagesWarning,
                    stacklevel=2,
                )
            return Environment(python=raw["python"], packages=raw["packages"], device=_device_text())
    raise SandboxError(f"the {sandbox.name} sandbox could not run a probe script: {result.output[-2000:]}")


def _device_text() -> str:
    return f"CPU only ({os.cpu_count()} cores), no GPU"


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
