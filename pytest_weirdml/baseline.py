"""The regression gate: a session's results kept as a baseline, and a later session compared with it.

A baseline holds, per model and task, every run's score and the conditions the runs were made
under. Two sessions are comparable for a (model, task) only when those conditions are equal: the
data identity (data version, seed, builder), the protocol, the number of submissions and the time
limit. The sandbox, the hardware and the plugin version are kept and shown, not enforced.

The baseline file (``--weirdml-save-baseline``) is JSON::

    {
      "format": "pytest-weirdml-baseline",
      "version": 1,
      "created": "2026-11-30T12:00:00+00:00",     # the last record's time
      "generator": "pytest-weirdml 0.2.0",
      "sessions": ["20261130-120000-4242"],
      "models": {
        "<model>": {
          "<task>": {
            "scores": [0.91, 0.88],                # run scores (best iteration), in run order
            "conditions": {"protocol": "published", "iterations": 5, "time_limit_s": 120.0,
                           "data": "v2-seed0-1a2b3c4d5e6f"},
            "sandbox": "docker", "hardware": "one NVIDIA H200 GPU with 139 GB of memory"
          }
        }
      }
    }

A finished session directory serves as a baseline too: the same data is read from its records.

A difference is a **regression** when its whole 95% bootstrap interval lies below ``-margin``,
an **improvement** when it lies above ``+margin``; identical scores on both sides give an
interval of zero width at zero, which is neither. A model with runs that were not scored (a
harness error, a session that ended first) is **incomplete**, never "same": its dropped runs
might have been its worst, so the gate does not pass it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_weirdml import __version__, baseline_schema, stats
from pytest_weirdml.records import RunPlan, RunRecord
from pytest_weirdml.session import SessionDir
from pytest_weirdml.untrusted import printable

FORMAT = "pytest-weirdml-baseline"
VERSION = 1
OVERALL = "(overall)"
# Below this a difference is rounding (means of equal scores over different run counts), not a change.
_EPS = 1e-9


class BaselineError(ValueError):
    """A baseline that cannot be read, or two sessions that must not be compared. Its message
    quotes names and values from the file, so it holds no control character."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


@dataclass(frozen=True)
class Conditions:
    """What must be equal for two sessions' scores on a task to be compared: a view of a run's plan."""

    protocol: str
    iterations: int
    time_limit_s: float
    data: str

    @classmethod
    def of(cls, plan: RunPlan) -> Conditions:
        return cls(
            protocol=plan.protocol,
            iterations=plan.iterations_planned,
            time_limit_s=float(plan.time_limit_s),
            data=plan.data_key,
        )

    def differences(self, other: Conditions) -> list[str]:
        """``other`` (the baseline) against ``self`` (this session), one phrase per difference."""
        found = []
        for name, label in (
            ("data", "data identity"),
            ("protocol", "protocol"),
            ("iterations", "submissions per run"),
            ("time_limit_s", "time limit (s)"),
        ):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                # Printed as a skip reason: a session directory's data key is not a checked name.
                found.append(printable(f"{label} {theirs} in the baseline, {mine} now"))
        return found


@dataclass
class Cell:
    """One (model, task): its run scores and where they came from."""

    scores: list[float]
    conditions: Conditions
    sandbox: str = ""
    hardware: str = ""
    isolation: str = ""


@dataclass
class Baseline:
    """Scores per model and task, with the conditions of each."""

    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    created: str = ""
    generator: str = ""
    sessions: list[str] = field(default_factory=list)
    source: str = ""
    # model -> runs of the sessions that were not scored (only for sessions read from records).
    unscored: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_runs(
        cls, runs: Iterable[Mapping[str, Any]], *, created: str = "", generator: str = "", source: str = ""
    ) -> Baseline:
        """From scored run summaries (the ``runs`` of ``summary.json``), in the order given."""
        baseline = cls(created=created, generator=generator, source=source)
        sessions: dict[str, None] = {}
        for run in runs:
            conditions = Conditions(
                protocol=str(run["protocol"]),
                iterations=int(run["iterations_planned"]),
                time_limit_s=float(run["time_limit_s"]),
                data=str(run["data"]),
            )
            tasks = baseline.cells.setdefault(run["model"], {})
            cell = tasks.get(run["task"])
            if cell is None:
                cell = tasks[run["task"]] = Cell(
                    [], conditions, run.get("sandbox", ""), run.get("hardware", ""), run.get("isolation", "")
                )
            elif cell.conditions != conditions:
                where = f"{run['model']} on {run['task']}"
                raise BaselineError(
                    f"{source or 'the runs'}: {where} mixes runs made under different conditions "
                    f"({'; '.join(conditions.differences(cell.conditions))})"
                )
            cell.scores.append(float(run["score"]))
            if run.get("session"):
                sessions[run["session"]] = None
        baseline.sessions = list(sessions)
        return baseline

    def isolations(self) -> list[str]:
        """How the scripts behind these scores were isolated (``unknown`` where no one said)."""
        return sorted({cell.isolation or "unknown" for tasks in self.cells.values() for cell in tasks.values()})

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created,
            "generator": self.generator,
            "sessions": self.sessions,
            "models": {
                model: {
                    task: {
                        "scores": cell.scores,
                        "conditions": asdict(cell.conditions),
                        "sandbox": cell.sandbox,
                        "hardware": cell.hardware,
                        "isolation": cell.isolation,
                    }
                    for task, cell in sorted(tasks.items())
                }
                for model, tasks in sorted(self.cells.items())
            },
        }

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def from_json(cls, raw: Any, source: str = "") -> Baseline:
        where = source or "baseline"
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise BaselineError(f'{where}: not a pytest-weirdml baseline file (no "format": "{FORMAT}")')
        if raw.get("version") != VERSION:
            raise BaselineError(
                f"{where}: baseline format version {baseline_schema.shown(raw.get('version'))}; this plugin "
                f"reads version {VERSION}"
            )
        try:
            baseline_schema.check(raw)
        except ValueError as exc:
            raise BaselineError(
                f"{where}: {exc}. Save the baseline again (--weirdml-save-baseline) or pass a session directory"
            ) from None
        try:
            cells = {
                model: {
                    task: Cell(
                        scores=[float(s) for s in cell["scores"]],
                        conditions=Conditions(**cell["conditions"]),
                        sandbox=cell.get("sandbox", ""),
                        hardware=cell.get("hardware", ""),
                        isolation=cell.get("isolation", ""),
                    )
                    for task, cell in tasks.items()
                }
                for model, tasks in raw["models"].items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BaselineError(f"{where}: malformed baseline file ({type(exc).__name__}: {exc})") from None
        return cls(
            cells=cells,
            created=str(raw.get("created", "")),
            generator=str(raw.get("generator", "")),
            sessions=list(raw.get("sessions", [])),
            source=source,
        )


@dataclass(frozen=True)
class Row:
    """One line of the comparison: a (model, task), or a model's overall score (task ``OVERALL``)."""

    model: str
    task: str
    before: stats.Estimate
    after: stats.Estimate
    delta: stats.Estimate
    verdict: str  # "regression", "improvement" or "same"

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": self.task,
            "baseline": self.before.as_dict(),
            "now": self.after.as_dict(),
            "delta": self.delta.as_dict(),
            "verdict": self.verdict,
        }


@dataclass
class Comparison:
    """Every compared row, what could not be compared, and what differs without blocking."""

    rows: list[Row]
    margin: float
    only_in_baseline: list[str] = field(default_factory=list)
    only_now: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    # model -> its runs that were not scored in the sessions judged.
    incomplete: dict[str, int] = field(default_factory=dict)
    # "baseline" and "now" -> how each side's scripts were isolated.
    isolation: dict[str, list[str]] = field(default_factory=dict)

    @property
    def regressions(self) -> list[Row]:
        return [row for row in self.rows if row.verdict == "regression"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.source,
            "margin": self.margin,
            "rows": [row.as_dict() for row in self.rows],
            "regressions": [{"model": r.model, "task": r.task, "delta": r.delta.mean} for r in self.regressions],
            "only_in_baseline": self.only_in_baseline,
            "only_now": self.only_now,
            "notes": self.notes,
            "incomplete": self.incomplete,
            "isolation": self.isolation,
        }


def verdict(delta: stats.Estimate, margin: float) -> str:
    if delta.high < -margin - _EPS:
        return "regression"
    if delta.low > margin + _EPS:
        return "improvement"
    return "same"


def judged(delta: stats.Estimate, margin: float, unscored: bool) -> str:
    """The verdict; short of a regression, a model with unscored runs is ``incomplete``."""
    found = verdict(delta, margin)
    return "incomplete" if unscored and found != "regression" else found


def compare(
    baseline: Baseline,
    now: Baseline,
    *,
    margin: float = 0.0,
    resamples: int = 10_000,
    seed: int = 0,
    force: bool = False,
) -> Comparison:
    """Compare ``now`` with ``baseline`` for every (model, task) both hold.

    Raises ``BaselineError`` naming each difference of conditions, unless ``force``, which turns
    the differences into notes of the comparison.
    """
    rows: list[Row] = []
    comparison = Comparison(
        rows=rows,
        margin=margin,
        source=baseline.source,
        incomplete=dict(now.unscored),
        isolation={"baseline": baseline.isolations(), "now": now.isolations()},
    )
    refused: list[str] = []
    for model in sorted(set(baseline.cells) | set(now.cells)):
        old, new = baseline.cells.get(model, {}), now.cells.get(model, {})
        comparison.only_in_baseline += [f"{model} / {task}" for task in sorted(set(old) - set(new))]
        comparison.only_now += [f"{model} / {task}" for task in sorted(set(new) - set(old))]
        common = sorted(task for task in set(old) & set(new) if old[task].scores and new[task].scores)
        for task in common:
            differences = new[task].conditions.differences(old[task].conditions)
            (comparison.notes if force else refused).extend(f"{model} / {task}: {d}" for d in differences)
            for kind in ("sandbox", "isolation", "hardware"):
                was, is_ = getattr(old[task], kind), getattr(new[task], kind)
                if was and is_ and was != is_:
                    comparison.notes.append(f"{model} / {task}: {kind} {was!r} in the baseline, {is_!r} now")
        if refused or not common:
            continue
        before = {task: old[task].scores for task in common}
        after = {task: new[task].scores for task in common}
        deltas, overall = stats.difference(before, after, resamples=resamples, seed=seed)
        old_boot = stats.bootstrap(before, resamples=resamples, seed=seed)
        new_boot = stats.bootstrap(after, resamples=resamples, seed=seed + 1)
        old_tasks, new_tasks = old_boot.task_estimates(), new_boot.task_estimates()
        unscored = bool(now.unscored.get(model))
        for task in common:
            found = judged(deltas[task], margin, unscored)
            rows.append(Row(model, task, old_tasks[task], new_tasks[task], deltas[task], found))
        if len(common) > 1:
            found = judged(overall, margin, unscored)
            rows.append(Row(model, OVERALL, old_boot.overall(), new_boot.overall(), overall, found))
    if refused:
        listed = "\n  ".join(refused)
        raise BaselineError(
            f"the baseline {baseline.source or ''} was made under other conditions, so its scores are not "
            f"comparable:\n  {listed}\nRun under the baseline's conditions, save a new baseline "
            "(--weirdml-save-baseline), or compare anyway with --weirdml-baseline-force."
        )
    return comparison


def from_session(runs: Sequence[RunRecord], *, source: str = "") -> Baseline:
    """The scored (finished) runs of one or several sessions as a baseline, with a count per
    model of those that were not scored."""
    scored = [run for run in runs if run.scored]
    baseline = Baseline.from_runs(
        [run.summary() for run in scored],
        created=max((run.ended_at for run in scored), default=""),
        generator=f"pytest-weirdml {__version__}",
        source=source,
    )
    for run in runs:
        if not run.scored:
            baseline.unscored[run.model] = baseline.unscored.get(run.model, 0) + 1
    return baseline


def load(path: Path) -> Baseline:
    """A baseline file written by ``--weirdml-save-baseline``, or a finished session directory."""
    if path.is_dir():
        session = SessionDir(path)
        if not session.exists():
            raise BaselineError(
                f"{path}: a directory without {session.records_path.name}; pass a session directory under "
                "reports/ or a file written by --weirdml-save-baseline"
            )
        try:
            runs = session.runs()
        except (OSError, ValueError) as exc:
            raise BaselineError(f"{path}: its records cannot be read ({exc})") from None
        baseline = from_session(runs, source=str(path))
        if not baseline.cells:
            raise BaselineError(f"{path}: no finished run to compare with")
        return baseline
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(
            f"{path}: no such baseline; pass a file written by --weirdml-save-baseline or a session "
            "directory under reports/"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable baseline file ({exc})") from None
    return Baseline.from_json(raw, source=str(path))
