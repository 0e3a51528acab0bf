"""One control group per local run: a hard cap on processes and memory, and a sure way to kill.

Rlimits cannot do this job: RLIMIT_NPROC counts every process of the real user (and root is
exempt from it), and a process that calls ``setsid`` leaves the process group we kill. A cgroup
holds every descendant whatever it does, so the end of a run kills them all.

cgroup v1 (a ``pids`` and a ``memory`` hierarchy) and v2 (one unified hierarchy, where the
controllers are already delegated to our group's children) are both supported. The child
process joins the group between fork and exec, so nothing it starts is ever outside.

A run leased a share of the cores: ``bind_cpus`` confines the group to them with a cpuset (v1
``cpuset`` hierarchy, v2 ``cpuset.cpus``), else with a CPU quota of that many cores (``cpu.max``,
``cpu.cfs_quota_us``). A script that resets its own affinity to every core still runs on its
share: the kernel intersects any affinity with the cpuset.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()


class CgroupUnavailable(Exception):
    """Cgroups cannot be made here; the message says why."""


def _own_paths() -> dict[str, str]:
    """Controller (``""`` for v2) -> our process's path in that hierarchy."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(","):
            paths[name] = path
    return paths


@dataclass
class RunCgroup:
    """The cgroup directories of one run (one per v1 hierarchy, or one v2 group)."""

    dirs: list[Path]
    version: int
    name: str = ""
    # How the group is held to its cores: "cpuset", "cpu quota" or "" (affinity only).
    cpu_bound: str = ""

    @classmethod
    def create(cls, *, max_processes: int, memory_bytes: int, root: Path = CGROUP_ROOT) -> RunCgroup:
        """Make the group with its limits set; raises ``CgroupUnavailable`` if this host forbids it."""
        name = f"weirdml-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        try:
            own = _own_paths()
        except OSError as exc:
            raise CgroupUnavailable(f"cannot read /proc/self/cgroup: {exc}") from exc
        if (root / "cgroup.controllers").exists():
            return cls._create_v2(root, own.get("", "/"), name, max_processes, memory_bytes)
        return cls._create_v1(root, own, name, max_processes, memory_bytes)

    @classmethod
    def _create_v1(cls, root: Path, own: dict[str, str], name: str, max_processes: int, memory_bytes: int) -> RunCgroup:
        made: list[Path] = []
        group = cls(made, 1, name)
        try:
            for controller in ("pids", "memory"):
                base = root / controller / own.get(controller, "/").lstrip("/")
                if not (base / "cgroup.procs").exists():
                    raise CgroupUnavailable(f"no cgroup v1 {controller} hierarchy at {root / controller}")
                path = base / name
                path.mkdir()
                made.append(path)
            _write(made[0] / "pids.max", str(max_processes))
            _write(made[1] / "memory.limit_in_bytes", str(memory_bytes))
            # Without this a script could go over the limit into swap.
            with contextlib.suppress(OSError):
                _write(made[1] / "memory.memsw.limit_in_bytes", str(memory_bytes))
        except (OSError, CgroupUnavailable) as exc:
            group.remove()
            if isinstance(exc, CgroupUnavailable):
                raise
            raise CgroupUnavailable(f"cannot create a cgroup under {root}: {exc}") from exc
        return group

    @classmethod
    def _create_v2(cls, root: Path, own: str, name: str, max_processes: int, memory_bytes: int) -> RunCgroup:
        base = root / own.lstrip("/")
        try:
            delegated = (base / "cgroup.subtree_control").read_text().split()
        except OSError as exc:
            raise CgroupUnavailable(f"cannot read {base / 'cgroup.subtree_control'}: {exc}") from exc
        missing = {"pids", "memory"} - set(delegated)
        if missing:
            # Enabling them ourselves would need our own process moved out of its group first.
            raise CgroupUnavailable(f"the {', '.join(sorted(missing))} controller(s) are not delegated to {base}")
        path = base / name
        group = cls([], 2, name)
        try:
            path.mkdir()
            group.dirs.append(path)
            _write(path / "pids.max", str(max_processes))
            _write(path / "memory.max", str(memory_bytes))
            with contextlib.suppress(OSError):
                _write(path / "memory.swap.max", "0")
        except OSError as exc:
            group.remove()
            raise CgroupUnavailable(f"cannot create a cgroup under {base}: {exc}") from exc
        return group

    def bind_cpus(self, cpus: tuple[int, ...], root: Path = CGROUP_ROOT) -> str:
        """Hold the group to ``cpus`` (before any process enters); returns how (``cpu_bound``)."""
        if not cpus or not self.dirs:
            return ""
        listed = ",".join(map(str, cpus))
        quota = f"{len(cpus) * 100_000}"
        if self.version == 2:
            path = self.dirs[0]
            try:
                delegated = (path.parent / "cgroup.subtree_control").read_text().split()
            except OSError:
                return ""
            attempts = [("cpuset", path, "cpuset.cpus", listed), ("cpu quota", path, "cpu.max", f"{quota} 100000")]
            attempts = [a for a in attempts if ("cpuset" if a[0] == "cpuset" else "cpu") in delegated]
        else:
            own = _own_paths()
            attempts = []
            for controller, kind, file, value in (
                ("cpuset", "cpuset", "cpuset.cpus", listed),
                ("cpu", "cpu quota", "cpu.cfs_quota_us", quota),
            ):
                base = root / controller / own.get(controller, "/").lstrip("/")
                if (base / "cgroup.procs").exists():
                    attempts.append((kind, base / self.name, file, value))
        for kind, path, file, value in attempts:
            made = path not in self.dirs
            try:
                if made:
                    path.mkdir()
                if file == "cpuset.cpus" and self.version == 1:
                    # A v1 cpuset takes no task before it has memory nodes: its parent's.
                    _write(path / "cpuset.mems", (path.parent / "cpuset.mems").read_text().strip())
                if file == "cpu.cfs_quota_us":
                    _write(path / "cpu.cfs_period_us", "100000")
                _write(path / file, value)
            except OSError:
                if made:
                    with contextlib.suppress(OSError):
                        path.rmdir()
                continue
            if made:
                self.dirs.append(path)
            self.cpu_bound = kind
            return kind
        return ""

    def enter(self) -> None:
        """Move the calling process into the group. Meant for a child between fork and exec."""
        pid = str(os.getpid())
        for path in self.dirs:
            with open(path / "cgroup.procs", "w") as fh:
                fh.write(pid)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.dirs[0] / "cgroup.procs").read_text().split()]
        except (OSError, IndexError):
            return []

    def kill_all(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process in the group until none is left; False if some survived."""
        if not self.dirs:
            return True
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs[0] / "cgroup.kill", "1")
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            # A process forked after the listing is caught on the next pass; pids.max bounds it.
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def out_of_memory(self) -> bool:
        """Whether the kernel's OOM killer acted in this group."""
        for path in self.dirs:
            for name in ("memory.oom_control", "memory.events"):
                with contextlib.suppress(OSError):
                    for line in (path / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value or 0) > 0:
                            return True
        return False

    def remove(self) -> None:
        """Remove the directories (the group must be empty); retries while the kernel lets go."""
        for path in reversed(self.dirs):
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self.dirs = []


@contextlib.contextmanager
def run_cgroup(*, max_processes: int, memory_bytes: int) -> Iterator[RunCgroup]:
    group = RunCgroup.create(max_processes=max_processes, memory_bytes=memory_bytes)
    try:
        yield group
    finally:
        group.kill_all()
        group.remove()


def remove_stale(root: Path = CGROUP_ROOT) -> list[str]:
    """Empty and remove the run groups of processes that died without cleaning up (SIGKILL)."""
    try:
        own = _own_paths()
    except OSError:
        return []
    if (root / "cgroup.controllers").exists():
        bases = [(root / own.get("", "/").lstrip("/"), 2)]
    else:
        bases = [(root / c / own.get(c, "/").lstrip("/"), 1) for c in ("pids", "memory", "cpuset", "cpu")]
    removed = []
    for base, version in bases:
        try:
            entries = [p for p in base.iterdir() if p.name.startswith("weirdml-") and p.is_dir()]
        except OSError:
            continue
        for path in entries:
            pid = path.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                group = RunCgroup([path], version)
                group.kill_all(timeout=2.0)
                group.remove()
                removed.append(str(path))
    return removed


def cgroups_usable() -> tuple[bool, str]:
    """Whether a run cgroup can be created here, and if not, why."""
    try:
        with run_cgroup(max_processes=16, memory_bytes=64 << 20):
            return True, ""
    except CgroupUnavailable as exc:
        return False, str(exc)


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)
