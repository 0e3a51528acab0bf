"""The sandbox interface: run one script against a task's public data, under limits.

Per run a fresh working directory holds ``solution.py``, a read-only ``data/`` with the public
files only and an empty writable ``results/``. The script runs as ``python solution.py`` with a
wall-clock limit, no network, bounded memory, and an environment of our own making. Backends
live one module each in this package, register themselves in ``BACKENDS`` and share one
contract test suite.

The sandbox's recipe (the pinned requirements, the Dockerfile and the offline image builder)
is package data in ``recipe/``, read through the accessors below, so an installed wheel works
exactly like a checkout.
"""

from __future__ import annotations

import abc
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from pytest_weirdml.registry import Registry

OUTPUT_CAP_BYTES = 1 << 20
# Far above any honest predictions file (a million labels take a few MiB), far below a disk.
RESULTS_CAP_BYTES = 64 << 20


def recipe() -> Traversable:
    """The directory of the sandbox's recipe files, inside the package."""
    return resources.files(__name__).joinpath("recipe")


# What the system prompt announces; each name is looked up in the sandbox's own interpreter.
# A plain path for messages and `pip install -r`: packages install as files, never zipped.
REQUIREMENTS_FILE = Path(str(recipe().joinpath("requirements.txt")))


@dataclass(frozen=True)
class Limits:
    time_s: float = 120.0
    memory_bytes: int = 8 << 30
    max_processes: int = 256
    output_bytes: int = OUTPUT_CAP_BYTES
    # The private /tmp; it is memory too (tmpfs), so it also counts against ``memory_bytes``.
    tmp_bytes: int = 1 << 30
    # Everything a script can write to the host: its results/ directory.
    results_bytes: int = RESULTS_CAP_BYTES
    # The cores the script may use (its process's CPU affinity); empty for every core.
    cpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class ExecResult:
    """What came back from one script run."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    output: str
    output_bytes: int
    predictions: bytes | None
    # The harness's notes the model reads after the output (what was cut, what was killed).
    notes: tuple[str, ...] = ()
    # Notes for the records only, never for the model: what happened to the infrastructure
    # around the script (an execution that ran again after a Ray node failed).
    harness_notes: tuple[str, ...] = ()
    # Why ``results/test_preds.txt`` was not read (a symlink, a FIFO, too large...), in the
    # words the model reads; None when it was read or simply not written.
    predictions_problem: str | None = None
    # The kernel killed a process of the script for going over the memory limit.
    out_of_memory: bool = False
    # results/ reached its size cap (writes failed, or the run was stopped for it).
    results_full: bool = False
    # ... on its count of files (``_workdir.RESULTS_INODES``) rather than its bytes.
    results_files_full: bool = False
    # The machine that ran it, where that is not this one (a Ray node).
    node: str = ""
    # How the script was isolated (``Sandbox.isolation``), as the backend that ran it says.
    isolation: str = ""


@dataclass(frozen=True)
class Environment:
    """What the sandbox offers a script: stated in the system prompt."""

    python: str
    packages: dict[str, str] = field(default_factory=dict)
    device: str = "CPU"


class Sandbox(abc.ABC):
    """A place to run untrusted scripts.

    ``run`` returns an ``ExecResult`` for anything the script does (crash, hang, flood, escape
    attempts are the script's outcome) and raises ``pytest_weirdml.errors.SandboxError`` only
    when the sandbox itself cannot run it.
    """

    name: str
    isolated: bool

    @property
    def isolation(self) -> str:
        """How scripts are isolated, as every record says: ``bwrap+cgroups`` (bubblewrap and a
        cgroup per run), ``bwrap``, ``docker`` or ``none`` (a plain subprocess)."""
        return self.name if self.isolated else "none"

    @abc.abstractmethod
    def run(self, code: str, data_dir: Path, limits: Limits, gpu: str | None = None) -> ExecResult: ...

    @abc.abstractmethod
    def environment(self) -> Environment: ...

    def close(self) -> None:  # noqa: B027 - optional
        """Release what the backend holds."""


# A backend's factory takes the local interpreter choice (``--weirdml-python``) by keyword.
BackendFactory = Callable[..., Sandbox]
BACKENDS: Registry[BackendFactory] = Registry("sandbox", __name__)


def requirements_text() -> str:
    """The sandbox's pinned requirements (pip's format, one pin per line, # comments)."""
    return recipe().joinpath("requirements.txt").read_text(encoding="utf-8")


def requirements_hash() -> str:
    """A digest of the requirements list: what keys the environments built from it."""
    return hashlib.sha256(requirements_text().encode()).hexdigest()


def requirement_pins(text: str | None = None) -> dict[str, str | None]:
    """Package name -> its pinned version (``None`` for a name without ``==``), in list order."""
    pins: dict[str, str | None] = {}
    for line in (requirements_text() if text is None else text).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, version = line, None
        if "==" in line:
            name, version = (part.strip() for part in line.split("==", 1))
        for sep in (">=", "<=", "~=", "<", ">", "[", ";"):
            name = name.split(sep, 1)[0]
        pins[name.strip()] = version
    return pins


def requirement_names(text: str | None = None) -> list[str]:
    """Package names from the sandbox requirements list (``requirements_text()`` by default)."""
    return list(requirement_pins(text))


def cache_home() -> Path:
    """The plugin's cache directory: ``$XDG_CACHE_HOME/pytest-weirdml`` (``~/.cache/...``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-weirdml"


def size_text(n: int) -> str:
    """``8589934592`` -> ``8 GiB``; what reasons and notes say of a limit."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def thread_env(cpus: tuple[int, ...]) -> dict[str, str]:
    """Thread-pool sizes for a script pinned to ``cpus``: numerical libraries size their pools
    from the machine's core count, not from the process's affinity."""
    if not cpus:
        return {}
    n = str(len(cpus))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n}
