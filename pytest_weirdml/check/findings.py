"""What a task check finds: one ``Finding`` per check (passed, failed or not applicable, with its
figures and, when it failed, the fix), the task's measured ``Figures``, and the ``TaskReport``
that holds both and is what ``--json`` prints and ``--save`` keeps beside the calibration records."""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, NA = "pass", "fail", "n/a"
REPORT_SCHEMA = 1
SAVED_FILE = "check.json"


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``check`` is ``group.name`` (``leaks.row_index``)."""

    check: str
    status: str
    message: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL


def passed(check: str, message: str) -> Finding:
    return Finding(check, PASS, message)


def failed(check: str, message: str, fix: str) -> Finding:
    return Finding(check, FAIL, message, fix)


def not_applicable(check: str, message: str) -> Finding:
    return Finding(check, NA, message)


def guarded(check: str, measure: Callable[[], Finding]) -> Finding:
    """One check's finding; a check that cannot run is a failed finding naming why, so that the
    other checks (and the other tasks) still run."""
    from pytest_weirdml.errors import DataUnavailable, TaskError

    try:
        return measure()
    except DataUnavailable as exc:
        return failed(check, f"the data cannot be built here: {exc}", "install what the message names")
    except (TaskError, ValueError, OSError) as exc:
        return failed(check, f"{type(exc).__name__}: {exc}", "fix the task directory as the message says")
    except Exception as exc:  # a broken builder or learner must not stop the other checks
        where = traceback.extract_tb(exc.__traceback__)[-1]
        place = f"{Path(where.filename).name}:{where.lineno}"
        return failed(check, f"{type(exc).__name__}: {exc} (at {place})", "fix the code the message points at")


@dataclass(frozen=True)
class BlindRun:
    """One shipped blind run of a strong model: where its records are, its first try and best of
    five, on which data seed, and their shares s of the way from chance to the reference."""

    directory: str
    model: str
    seed: int
    first: float
    best: float
    s_first: float | None = None
    s_best: float | None = None
    data_key: str = ""


@dataclass
class Figures:
    """What the checks measured; every score is accuracy on the hidden test answers."""

    chance: dict[int, float] = field(default_factory=dict)
    example: float | None = None
    # The reference at the task's limit on one core, per data seed.
    reference: dict[int, float] = field(default_factory=dict)
    # The reference on the task's own seed under other compute: "0.25x", "4x" (one core), "2 cores".
    reference_compute: dict[str, float] = field(default_factory=dict)
    # Reference on the samples with their elements shuffled (set tasks only).
    reference_shuffled: float | None = None
    # Generic learners on the task's own seed, per work factor ("0.25x", "1x", "4x") and name.
    generic: dict[str, dict[str, float]] = field(default_factory=dict)
    generic_source: str = ""
    blind_runs: list[BlindRun] = field(default_factory=list)

    def best_generic(self, factor: str = "1x") -> float | None:
        scores = self.generic.get(factor, {})
        return max(scores.values()) if scores else None


@dataclass
class TaskReport:
    """Every finding and figure of one task's check."""

    task: str
    directory: str
    family: str | None
    tier: str | None
    mode: str
    findings: list[Finding] = field(default_factory=list)
    figures: Figures = field(default_factory=Figures)
    schema: int = REPORT_SCHEMA

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]

    def as_dict(self) -> dict[str, Any]:
        return _finite(asdict(self))


def _finite(value: Any) -> Any:
    """JSON has no NaN: a figure that could not be measured is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def load_figures(path: Path) -> Figures | None:
    """The figures of a saved full check (``calibration/check.json``), or None when there is none;
    ``ValueError`` naming the file when it is not one."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a saved task check ({exc}); run the full check again with --save") from None
    try:
        figures = raw["figures"]
        return Figures(
            chance={int(k): float(v) for k, v in figures["chance"].items()},
            example=None if figures.get("example") is None else float(figures["example"]),
            reference={int(k): float(v) for k, v in figures["reference"].items()},
            reference_compute={str(k): float(v) for k, v in figures["reference_compute"].items()},
            reference_shuffled=_optional(figures.get("reference_shuffled")),
            generic={str(f): {str(k): float(v) for k, v in s.items()} for f, s in figures["generic"].items()},
            generic_source=str(figures.get("generic_source", "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a saved task check (bad figures: {exc!r}); run the full check again") from None


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)
