"""The sandbox interface: run one script against a task's public data, under limits.

Per run a fresh working directory holds ``solution.py``, a read-only ``data/`` with the public
files only and an empty writable ``results/``. The script runs as ``python solution.py`` with a
wall-clock limit, no network, bounded memory, and an environment of our own making. Backends
live one module each in this package and share one contract test suite.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

OUTPUT_CAP_BYTES = 1 << 20
PREDICTIONS_CAP_BYTES = 64 << 20
# What the system prompt announces; each name is looked up in the sandbox's own interpreter.
REQUIREMENTS_FILE = Path(__file__).resolve().parents[2] / "sandbox_image" / "requirements.txt"


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
    # The machine that ran it, where that is not this one (a Ray node).
    node: str = ""


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


def requirement_names(path: Path = REQUIREMENTS_FILE) -> list[str]:
    """Package names from the sandbox requirements list (one pin per line, # comments)."""
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
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
