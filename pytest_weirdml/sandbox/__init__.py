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
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from pytest_weirdml.registry import Registry

OUTPUT_CAP_BYTES = 1 << 20
PREDICTIONS_CAP_BYTES = 64 << 20


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
    notes: tuple[str, ...] = ()


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


def requirement_names(text: str | None = None) -> list[str]:
    """Package names from the sandbox requirements list (``requirements_text()`` by default)."""
    names = []
    for line in (requirements_text() if text is None else text).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            for sep in ("==", ">=", "<=", "~=", "<", ">", "["):
                line = line.split(sep, 1)[0]
            names.append(line.strip())
    return names


def read_predictions(path: Path) -> bytes | None:
    """The predictions file a script left, read up to one byte past the cap (so scoring sees it is over)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(PREDICTIONS_CAP_BYTES + 1)
    except OSError:
        return None


def thread_env(cpus: tuple[int, ...]) -> dict[str, str]:
    """Thread-pool sizes for a script pinned to ``cpus``: numerical libraries size their pools
    from the machine's core count, not from the process's affinity."""
    if not cpus:
        return {}
    n = str(len(cpus))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n}
