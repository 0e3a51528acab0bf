"""A task: its spec (``task.toml``), its data (built once, cached) and its scoring.

A task directory holds ``task.toml``, ``prompt.md``, a data builder (``data.py`` unless
``[data] builder`` names another file) and usually a reference solution (``reference.py`` unless
``reference`` names another file, as when two tasks share one). The builder is a
function ``build(out: Path, seed: int, **params) -> numpy.ndarray`` that writes exactly the
task's public files into ``out`` and returns the hidden answers. The answers are stored
beside, never inside, the public directory that a sandbox gets to see.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import shutil
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from filelock import FileLock

from pytest_weirdml.errors import DataUnavailable, TaskError
from pytest_weirdml.horizons.estimates import TimeEstimates, parse_estimates
from pytest_weirdml.schema import PLAIN_NAME

# Scoring has its own module; these names stay importable from here for the code that uses them.
from pytest_weirdml.scoring import PREDICTIONS_FILE, Score, score_predictions  # noqa: F401

# The bundled tasks live in the repository's tasks/; the wheel ships them as this sub-package
# (pyproject.toml maps it onto tasks/).
BUNDLED_PACKAGE = "pytest_weirdml.bundled_tasks"
TASK_FILE = "task.toml"
PROMPT_FILE = "prompt.md"
REFERENCE_FILE = "reference.py"
DEFAULT_TIME_LIMIT_S = 120.0
DEFAULT_ITERATIONS = 5

_KEYS = {
    "name",
    "description",
    "markers",
    "metric",
    "time_limit_s",
    "iterations",
    "seed",
    "data_version",
    "public_files",
    "data",
    "reference",
    "time_estimates",
    "calibration",
    "check",
}
TIERS = ("easy", "hard")
_CALIBRATION_KEYS = {"family", "tier", "published", "published_best", "chance"}


@dataclass(frozen=True)
class Calibration:
    """What ``[calibration]`` says of a task: its family and tier (an easy and a hard twin share a
    family), the published task it follows if any with the published table's best score on it,
    and a chance level where the majority share of the answers is not the right one."""

    family: str | None = None
    tier: str | None = None
    published: str | None = None
    published_best: float | None = None
    chance: float | None = None


@dataclass(frozen=True)
class TaskSpec:
    """Everything ``task.toml`` and ``prompt.md`` say about a task."""

    name: str
    directory: Path
    description: str
    prompt: str
    public_files: tuple[str, ...]
    markers: tuple[str, ...] = ()
    metric: str = "accuracy"
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    iterations: int = DEFAULT_ITERATIONS
    seed: int = 0
    data_version: int = 1
    builder: Path = Path("data.py")
    params: Mapping[str, Any] = field(default_factory=dict)
    # The reference solution's file, relative to the directory (``reference`` in task.toml).
    reference: str = REFERENCE_FILE
    # Hours a person needs to reach each accuracy (``[time_estimates]``), for the time horizons.
    time_estimates: TimeEstimates | None = None
    calibration: Calibration = field(default_factory=Calibration)
    # ``[check]``: what the task checker must know of the data (read by ``pytest_weirdml.check``).
    check: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reference_path(self) -> Path:
        return (self.directory / self.reference).resolve()

    def data_key(self, seed: int | None = None) -> str:
        """The data identity (and cache key): the data version, the seed (the task's own unless
        given), and a hash of the builder and its params."""
        digest = hashlib.sha256(self.builder.read_bytes())
        digest.update(json.dumps(dict(self.params), sort_keys=True).encode())
        return f"v{self.data_version}-seed{self.seed if seed is None else seed}-{digest.hexdigest()[:12]}"


def bundled_tasks_dir() -> Path:
    """The directory of the tasks that ship with the plugin: inside the installed package, or
    the checkout's ``tasks/`` when the package runs from a source tree. ``FileNotFoundError``
    when neither is there."""
    package_dir = Path(__file__).resolve().parent
    candidates = [
        package_dir / BUNDLED_PACKAGE.rpartition(".")[2],  # an installed wheel
        *(Path(p) for p in _mapped_paths()),  # an editable install maps the name onto tasks/
        package_dir.parent / "tasks",  # a source tree on sys.path
    ]
    for candidate in candidates:
        if any(candidate.glob(f"*/{TASK_FILE}")):
            return candidate
    raise FileNotFoundError(
        f"no bundled tasks found (looked in {', '.join(map(str, candidates))}); reinstall pytest-weirdml"
    )


def _mapped_paths() -> list[str]:
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec is not None else []


def _fail(path: Path, problem: str) -> TaskError:
    return TaskError(f"{path}: {problem}")


def _typed(path: Path, raw: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = raw.get(key, default)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _fail(path, f"'{key}' must be {names}, got {value!r}")
    return value


def _str_list(path: Path, raw: Mapping[str, Any], key: str, *, required: bool) -> tuple[str, ...]:
    if required and key not in raw:
        raise _fail(path, f"missing '{key}': list the files the data builder writes")
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(path, f"'{key}' must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def load_task(directory: Path) -> TaskSpec:
    """Read and check a task directory; raise ``TaskError`` naming the file and the problem."""
    directory = directory.resolve()
    toml_path = directory / TASK_FILE
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _fail(toml_path, "not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(toml_path, f"invalid TOML: {exc}") from None
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise _fail(toml_path, f"unknown keys {unknown}; known keys are {sorted(_KEYS)}")
    name = _typed(toml_path, raw, "name", str, directory.name)
    if name != directory.name:
        raise _fail(toml_path, f"name '{name}' differs from the directory name '{directory.name}'")
    if not PLAIN_NAME.fullmatch(name):
        raise _fail(toml_path, f"name {name!r}: a task name holds letters, digits, '_', '-' and '.' (not first)")
    metric = _typed(toml_path, raw, "metric", str, "accuracy")
    if metric != "accuracy":
        raise _fail(toml_path, f"metric '{metric}' is not supported; use 'accuracy'")
    time_limit = float(_typed(toml_path, raw, "time_limit_s", (int, float), DEFAULT_TIME_LIMIT_S))
    iterations = _typed(toml_path, raw, "iterations", int, DEFAULT_ITERATIONS)
    if not math.isfinite(time_limit) or time_limit <= 0 or iterations < 1:
        raise _fail(toml_path, "'time_limit_s' must be a finite number > 0 and 'iterations' >= 1")
    data = _typed(toml_path, raw, "data", dict, {})
    if set(data) - {"builder", "params"}:
        raise _fail(toml_path, f"unknown keys in [data]: {sorted(set(data) - {'builder', 'params'})}")
    builder = (directory / _typed(toml_path, data, "builder", str, "data.py")).resolve()
    params = _typed(toml_path, data, "params", dict, {})
    if not builder.is_file():
        raise _fail(builder, "data builder not found (set [data] builder in task.toml)")
    reference = _typed(toml_path, raw, "reference", str, REFERENCE_FILE)
    if "reference" in raw and not (directory / reference).is_file():
        raise _fail(toml_path, f"reference '{reference}' not found (a path relative to the task directory)")
    prompt_path = directory / PROMPT_FILE
    if not prompt_path.is_file():
        raise _fail(prompt_path, "not found: every task needs the prompt shown to the model")
    prompt = prompt_path.read_text(encoding="utf-8")
    if not prompt.strip():
        raise _fail(prompt_path, "is empty")
    try:
        estimates = parse_estimates(raw["time_estimates"], str(toml_path)) if "time_estimates" in raw else None
    except ValueError as exc:
        raise TaskError(str(exc)) from None
    return TaskSpec(
        calibration=_calibration(toml_path, _typed(toml_path, raw, "calibration", dict, {})),
        check=_typed(toml_path, raw, "check", dict, {}),
        name=name,
        directory=directory,
        description=_typed(toml_path, raw, "description", str, ""),
        prompt=prompt,
        public_files=_str_list(toml_path, raw, "public_files", required=True),
        markers=_str_list(toml_path, raw, "markers", required=False),
        metric=metric,
        time_limit_s=time_limit,
        iterations=iterations,
        seed=_typed(toml_path, raw, "seed", int, 0),
        data_version=_typed(toml_path, raw, "data_version", int, 1),
        builder=builder,
        params=params,
        reference=reference,
        time_estimates=estimates,
    )


def _calibration(path: Path, raw: Mapping[str, Any]) -> Calibration:
    unknown = sorted(set(raw) - _CALIBRATION_KEYS)
    if unknown:
        raise _fail(path, f"unknown keys in [calibration]: {unknown}; known keys are {sorted(_CALIBRATION_KEYS)}")
    tier = _typed(path, raw, "tier", (str, type(None)), None)
    if tier is not None and tier not in TIERS:
        raise _fail(path, f"[calibration] tier {tier!r}: use one of {', '.join(map(repr, TIERS))}")
    chance = _typed(path, raw, "chance", (int, float, type(None)), None)
    best = _typed(path, raw, "published_best", (int, float, type(None)), None)
    for key, value in (("chance", chance), ("published_best", best)):
        if value is not None and not 0 <= value <= 1:
            raise _fail(path, f"[calibration] {key} {value!r}: an accuracy between 0 and 1")
    return Calibration(
        family=_typed(path, raw, "family", (str, type(None)), None),
        tier=tier,
        published=_typed(path, raw, "published", (str, type(None)), None),
        published_best=None if best is None else float(best),
        chance=None if chance is None else float(chance),
    )


def load_builder(spec: TaskSpec) -> Callable[..., np.ndarray]:
    """Import the task's builder module and return its ``build`` function."""
    # Keyed by content, so an edited builder is imported afresh in a long-lived process.
    digest = hashlib.sha256(spec.builder.read_bytes()).hexdigest()[:16]
    module_name = f"_weirdml_builder_{spec.name}_{digest}"
    module = sys.modules.get(module_name)
    if module is None:
        module = import_file(module_name, spec.builder)
    build = getattr(module, "build", None)
    if not callable(build):
        raise _fail(spec.builder, "defines no function build(out, seed, **params)")
    return build


def import_file(module_name: str, path: Path) -> ModuleType:
    """A Python file of a task directory as a module (``TaskError`` naming the file if it fails)."""
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    # Registered before it runs, as a normal import would be: dataclasses and pickling look it up.
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise _fail(path, f"import failed: {type(exc).__name__}: {exc}") from exc
    return module


@dataclass(frozen=True)
class TaskData:
    """A built data set: a public directory for the sandbox and the hidden answers."""

    root: Path
    seed: int = 0

    @property
    def key(self) -> str:
        """The data identity: ``v<data version>-seed<seed>-<builder hash>``."""
        return self.root.name

    @property
    def public_dir(self) -> Path:
        return self.root / "public"

    @property
    def answers_path(self) -> Path:
        return self.root / "hidden" / "answers.npy"

    def answers(self) -> np.ndarray:
        return np.load(self.answers_path, allow_pickle=False)


def build_data(
    spec: TaskSpec, cache_root: Path, seed: int | None = None, *, on_build: Callable[[str], None] | None = None
) -> TaskData:
    """Return the task's data for ``seed`` (the task's own when ``None``), building it once per
    data identity; safe across processes. ``on_build`` hears, before a build starts, what is
    built and how long the task's last build took (``building chess_winners data (seed 0),
    about a minute``)."""
    seed = spec.seed if seed is None else seed
    task_cache = cache_root / spec.name
    task_cache.mkdir(parents=True, exist_ok=True)
    final = task_cache / spec.data_key(seed)
    if final.is_dir():
        return TaskData(final, seed)
    with FileLock(str(final) + ".lock"):
        if final.is_dir():
            return TaskData(final, seed)
        if on_build is not None:
            on_build(build_note(spec, seed, task_cache))
        staging = task_cache / f".{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        clock = time.monotonic()
        try:
            _build_into(spec, staging, seed)
            os.rename(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            (task_cache / BUILD_TIME_FILE).write_text(f"{time.monotonic() - clock:.1f}\n")
    return TaskData(final, seed)


# How long the task's last build took, beside its builds in the cache: the next build's estimate.
BUILD_TIME_FILE = "last_build_s.txt"


def build_note(spec: TaskSpec, seed: int, task_cache: Path) -> str:
    """``building NAME data (seed N)``, with the last build's time when the cache knows it."""
    note = f"building {spec.name} data (seed {seed})"
    try:
        seconds = float((task_cache / BUILD_TIME_FILE).read_text())
    except (OSError, ValueError):
        return note
    if not math.isfinite(seconds) or seconds < 0:
        return note
    if seconds < 45:
        return f"{note}, about {max(1, round(seconds))} s"
    return f"{note}, about a minute" if seconds < 90 else f"{note}, about {round(seconds / 60)} minutes"


def _build_into(spec: TaskSpec, root: Path, seed: int) -> None:
    public, hidden = root / "public", root / "hidden"
    public.mkdir(parents=True)
    hidden.mkdir(mode=0o700)
    build = load_builder(spec)
    try:
        answers = build(public, seed, **spec.params)
    except DataUnavailable:
        raise
    except Exception as exc:
        raise _fail(spec.builder, f"build() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(answers, np.ndarray) or not np.issubdtype(answers.dtype, np.integer):
        raise _fail(spec.builder, f"build() must return an integer numpy array, got {type(answers).__name__}")
    written = sorted(p.name for p in public.iterdir())
    if written != sorted(spec.public_files):
        raise _fail(
            spec.builder, f"build() wrote {written}, but task.toml public_files lists {sorted(spec.public_files)}"
        )
    np.save(hidden / "answers.npy", answers, allow_pickle=False)
    # Public files are read-only for everyone; the hidden directory is for the owner alone.
    for path in public.iterdir():
        path.chmod(0o444)
    public.chmod(0o555)
    root.chmod(0o755)
