"""What every check of one task shares: the task, its built data per seed (from the harness's data
cache), its samples, chance, a sandbox to run scripts in, and the figures measured so far."""

from __future__ import annotations

import ast
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_weirdml.check.findings import Figures
from pytest_weirdml.check.samples import Samples, find_layout, read_samples
from pytest_weirdml.loop import run_and_score
from pytest_weirdml.sandbox import ExecResult, Limits, Sandbox
from pytest_weirdml.scoring import Score
from pytest_weirdml.tasks import TaskData, TaskSpec, build_data

# The variable a time-budgeted script reads its limit from; the checker sets it in the code it
# submits when it runs a script under another limit than the task's.
LIMIT_VARIABLE = "WEIRDML_TIME_LIMIT_S"


def chance_of(answers: np.ndarray) -> float:
    """The accuracy of the best constant answer per position: the majority share of each answer
    column, averaged over the columns (accuracy is over the flattened arrays)."""
    rows = answers.reshape(len(answers), -1)
    if rows.size == 0:
        return 0.0
    shares = [np.unique(col, return_counts=True)[1].max() / len(col) for col in rows.T]
    return float(np.mean(shares))


def margin(chance: float, entries: int) -> float:
    """How far above chance a score must be to count: three standard errors of a binomial
    accuracy over the answers' entries, at least 0.02."""
    return max(0.02, 3 * math.sqrt(max(chance * (1 - chance), 1e-6) / max(entries, 1)))


def share(score: float, chance: float, reference: float) -> float:
    """s = (score - chance) / (reference - chance): 0 at chance, 1 at the reference."""
    return (score - chance) / (reference - chance) if reference > chance else float("nan")


def one_core() -> tuple[int, ...]:
    """The last core this process may use (the others stay free for the rest of the machine)."""
    return (max(os.sched_getaffinity(0)),)


def two_cores() -> tuple[int, ...]:
    cores = sorted(os.sched_getaffinity(0))
    return tuple(cores[-2:])


def with_limit(code: str, limit_s: float) -> str:
    """The script with its time limit announced in ``WEIRDML_TIME_LIMIT_S`` before anything else
    runs: after its docstring and ``from __future__`` imports, which must come first."""
    preamble = f'import os as _weirdml_os\n_weirdml_os.environ["{LIMIT_VARIABLE}"] = "{limit_s:g}"\n'
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return preamble + code
    after = 0
    for index, node in enumerate(body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno or after
        else:
            break
    lines = code.splitlines(keepends=True)
    if after and lines and not lines[min(after, len(lines)) - 1].endswith("\n"):
        lines[after - 1] += "\n"
    return "".join(lines[:after]) + preamble + "".join(lines[after:])


@dataclass
class Context:
    spec: TaskSpec
    cache: Path
    open_sandbox: Callable[[], Sandbox]  # opened on first use
    quick: bool = False
    cores: tuple[int, ...] = field(default_factory=one_core)
    figures: Figures = field(default_factory=Figures)
    saved: Figures | None = None
    _data: dict[int, TaskData] = field(default_factory=dict)
    _samples: dict[int, Samples] = field(default_factory=dict)
    _sandbox: Sandbox | None = None

    @property
    def seed(self) -> int:
        return self.spec.seed

    def data(self, seed: int | None = None) -> TaskData:
        seed = self.seed if seed is None else seed
        if seed not in self._data:
            self._data[seed] = build_data(self.spec, self.cache, seed)
        return self._data[seed]

    def samples(self, seed: int | None = None) -> Samples:
        seed = self.seed if seed is None else seed
        if seed not in self._samples:
            data = self.data(seed)
            layout = find_layout(self.spec.public_files, self.spec.check)
            self._samples[seed] = read_samples(data.public_dir, data.answers(), layout)
        return self._samples[seed]

    def chance(self, seed: int | None = None) -> float:
        seed = self.seed if seed is None else seed
        if seed not in self.figures.chance:
            declared = self.spec.calibration.chance
            if declared is None and self.saved is not None and seed in self.saved.chance:
                declared = self.saved.chance[seed]  # measured by the saved check: no build needed
            self.figures.chance[seed] = declared if declared is not None else chance_of(self.data(seed).answers())
        return self.figures.chance[seed]

    def margin(self, seed: int | None = None) -> float:
        return margin(self.chance(seed), self.data(seed).answers().size)

    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = self.open_sandbox()
        return self._sandbox

    def run(
        self, code: str, data: TaskData, *, factor: float = 1.0, cores: tuple[int, ...] | None = None
    ) -> tuple[ExecResult, Score]:
        """Run a script in the sandbox on ``data`` at ``factor`` times the task's limit (announced in
        ``WEIRDML_TIME_LIMIT_S``) and score it as the harness scores a submission."""
        limit = self.spec.time_limit_s * factor
        code = with_limit(code, limit)
        limits = Limits(time_s=limit, cpus=self.cores if cores is None else cores)
        return run_and_score(code, self.sandbox(), data, limits, data.answers())

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
