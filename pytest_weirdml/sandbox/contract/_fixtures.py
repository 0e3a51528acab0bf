"""The contract's fixtures and helpers: the backend under test, a task directory, one run.

``weirdml_backend`` is parametrised over the registered backends (``sandbox.BACKENDS``, every
name but ``auto``), or over ``WEIRDML_CONTRACT_BACKENDS`` where the test module sets it; the
cases that need isolation leave out the names in the module's ``WEIRDML_CONTRACT_UNISOLATED``
(backends that promise no isolation, so those cases do not apply to them).
``weirdml_open_backend`` opens one by name (a backend that cannot work here skips its cases,
saying why); override it to open a backend with settings of its own.
"""

from __future__ import annotations

import os
import textwrap
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_weirdml.errors import SandboxError
from pytest_weirdml.loop import judge
from pytest_weirdml.sandbox import BACKENDS, ExecResult, Limits, Sandbox
from pytest_weirdml.sandbox.choose import AUTO
from pytest_weirdml.tasks import score_predictions

__all__ = [
    "GOOD",
    "QUICK",
    "SECRET_ANSWERS",
    "assert_nothing_left",
    "assert_usable",
    "data_dir",
    "isolated",
    "marked_processes",
    "pytest_generate_tests",
    "run",
    "sandbox",
    "task_dir",
    "verdict",
    "weirdml_open_backend",
]

SECRET_ANSWERS = f"hidden-answers-{uuid.uuid4().hex}"
QUICK = Limits(
    time_s=5, memory_bytes=1 << 30, max_processes=64, output_bytes=64 << 10, tmp_bytes=32 << 20, results_bytes=4 << 20
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "weirdml_backend" in metafunc.fixturenames:
        names = getattr(metafunc.module, "WEIRDML_CONTRACT_BACKENDS", None)
        if names is None:
            names = [name for name in BACKENDS.names() if name != AUTO]
        if "isolated" in metafunc.fixturenames:
            unisolated = set(getattr(metafunc.module, "WEIRDML_CONTRACT_UNISOLATED", ()))
            names = [name for name in names if name not in unisolated]
        metafunc.parametrize("weirdml_backend", list(names), scope="module")


def _open_registered(name: str) -> Sandbox:
    factory = BACKENDS.lookup(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return factory(python=None)
    except SandboxError as exc:
        pytest.skip(f"{name} sandbox unavailable: {exc}")


@pytest.fixture(scope="module")
def weirdml_open_backend() -> Callable[[str], Sandbox]:
    """Opens the backend of a name (override to give a backend settings of its own)."""
    return _open_registered


@pytest.fixture(scope="module")
def sandbox(weirdml_backend: str, weirdml_open_backend: Callable[[str], Sandbox]) -> Iterator[Sandbox]:
    box = weirdml_open_backend(weirdml_backend)
    yield box
    box.close()


@pytest.fixture(scope="module")
def isolated(sandbox: Sandbox) -> Sandbox:
    """The cases that need isolation run on the backends that promise it (not a plain fallback)."""
    if not sandbox.isolated:
        why = getattr(sandbox, "why_not_isolated", "") or "isolation turned off"
        pytest.skip(f"{sandbox.name} sandbox is not isolated here: {why}")
    return sandbox


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
    """No process of the run is left, and no container where the backend keeps them (``containers()``)."""
    deadline = time.monotonic() + 5
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked_processes(marker) == []
    containers = getattr(sandbox, "containers", None)
    if callable(containers):
        assert containers() == []


def verdict(result: ExecResult, limits: Limits = QUICK) -> str | None:
    """The zero reason the model reads for ``result`` (scored against three answers)."""
    answers = np.array([2, 4, 6])
    score = judge(result, lambda content: score_predictions(content, answers, cap=limits.results_bytes), limits)
    return score.zero_reason
