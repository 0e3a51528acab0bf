"""Records read back are untrusted input: each line is checked against the record's schema.

A records file is what people send each other (``weirdml report their-session/``), and what
``--weirdml-resume`` and a session-directory baseline read. Before a line becomes a record:

- it is at most ``MAX_LINE_CHARS`` long (a longer one is never read whole into memory: the
  reader, ``pytest_weirdml.recordfile``, skips it with a warning, as it skips a torn line);
- every field has its dataclass's type (``run`` an int, ``score`` a number, ``code`` a string or
  null, ``usage`` an object of numbers...); numbers are finite;
- scores lie in [0, 1], counts and durations are not negative, iterations start at 1;
- a run start holds its ``plan``, an object of the same kind: typed fields, limits that are not
  negative, a plain protocol name, ``time_estimates`` of at most ``MAX_ESTIMATORS`` estimators
  with at most ``MAX_THRESHOLDS`` thresholds each (``horizons.estimates``);
- ``cut`` (the texts the writer cut to fit a line, ``pytest_weirdml.linecap``) maps names to
  counts;
- ``task`` and ``session`` are names of letters, digits, ``_``, ``-`` and ``.`` (no leading dot),
  ``model`` of those and ``:/@+=,``: they become file names and terminal text.

A line that is JSON but fails raises ``ValueError`` naming the field and what it must be; the
reader adds the file and the line number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pytest_weirdml.horizons.estimates import MAX_ESTIMATORS, MAX_THRESHOLDS
from pytest_weirdml.untrusted import is_safe_name

# The longest record line read; the writer cuts a record's texts to fit it (``linecap``).
MAX_LINE_CHARS = 16 << 20
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")

_NUMBER = (int, float)


def _kind(value: Any, expected: str) -> bool:
    if expected == "str":
        return isinstance(value, str)
    if expected == "bool":
        return isinstance(value, bool)
    if expected == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "float":
        return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value)
    if expected == "None":
        return value is None
    if expected in ("Usage", "RunPlan") or expected.startswith("dict"):
        return isinstance(value, dict)
    if expected.startswith("tuple"):
        return isinstance(value, list | tuple)
    raise AssertionError(f"no schema for {expected}")


def _check(name: str, value: Any, annotation: str) -> None:
    options = [part.strip() for part in annotation.split("|")]
    if not any(_kind(value, option) for option in options):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ValueError(f"field {name!r} is {shown}; it must be {' or '.join(options)}")


def check_fields(raw: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
    """Each known field of ``raw`` has the type its dataclass annotation names."""
    for name, annotation in annotations.items():
        if name in raw:
            _check(name, raw[name], annotation)


def check_record(raw: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
    """The schema of a run start, an iteration or a run end (``ValueError`` naming the field)."""
    check_fields(raw, annotations)
    for name in ("task", "session"):
        value = raw.get(name, "")
        if value and not PLAIN_NAME.fullmatch(value):
            raise ValueError(f"field {name!r} is {value[:60]!r}; a name holds letters, digits, '_', '-' and '.'")
    model = raw.get("model", "")
    if not is_safe_name(model):
        raise ValueError(f"field 'model' is {str(model)[:60]!r}; a model name holds letters, digits and _.:/@+=,-")
    if not raw.get("task"):
        raise ValueError("field 'task' is empty")
    if "score" in raw and not 0.0 <= raw["score"] <= 1.0:
        raise ValueError(f"field 'score' is {raw['score']!r}; a score lies in [0, 1]")
    if raw.get("iteration", 1) < 1:
        raise ValueError(f"field 'iteration' is {raw['iteration']!r}; iterations count from 1")
    for name in ("run", "output_bytes", "duration_s", "wall_s", "iterations_planned", "time_limit_s"):
        if isinstance(raw.get(name), _NUMBER) and raw[name] < 0:
            raise ValueError(f"field {name!r} is {raw[name]!r}; it cannot be negative")
    cut = raw.get("cut", {})
    if isinstance(cut, dict) and not all(_kind(length, "int") and length >= 0 for length in cut.values()):
        raise ValueError("field 'cut' must give each cut text's length before the cut, a count")


def check_plan(raw: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
    """The schema of a run's plan (a run start's ``plan``, or the conditions an iteration of
    schemas 1 and 2 carried): typed fields, limits that are not negative, a plain protocol name."""
    check_fields(raw, annotations)
    protocol = raw.get("protocol", "")
    if protocol and not PLAIN_NAME.fullmatch(protocol):
        raise ValueError(f"field 'protocol' is {protocol[:60]!r}; a protocol is a name such as 'published'")
    for name in ("iterations_planned", "time_limit_s", "memory_bytes", "output_bytes", "results_bytes"):
        if isinstance(raw.get(name), _NUMBER) and raw[name] < 0:
            raise ValueError(f"field {name!r} is {raw[name]!r}; it cannot be negative")
    if isinstance(raw.get("max_output_tokens"), int) and raw["max_output_tokens"] < 1:
        raise ValueError(f"field 'max_output_tokens' is {raw['max_output_tokens']!r}; a token cap is at least 1")
    hours = raw.get("time_estimates", None)
    hours = hours.get("hours") if isinstance(hours, dict) else None
    if isinstance(hours, dict):
        if len(hours) > MAX_ESTIMATORS:
            raise ValueError(
                f"field 'time_estimates.hours' holds {len(hours)} estimators; a task has at most {MAX_ESTIMATORS}"
            )
        for name, by_threshold in hours.items():
            if isinstance(by_threshold, dict) and len(by_threshold) > MAX_THRESHOLDS:
                raise ValueError(
                    f"field 'time_estimates.hours' estimator {name[:60]!r} holds {len(by_threshold)} thresholds;"
                    f" an estimator has at most {MAX_THRESHOLDS}"
                )


def check_usage(raw: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
    check_fields(raw, annotations)
    for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens", "latency_s", "cost_usd"):
        value = raw.get(name)
        if isinstance(value, _NUMBER) and value < 0:
            raise ValueError(f"field 'usage.{name}' is {value!r}; it cannot be negative")
    if not all(isinstance(retry, dict) for retry in raw.get("retries", ())):
        raise ValueError("field 'usage.retries' must be a list of objects")


def check_baseline_models(models: Any) -> None:
    """The ``models`` of a baseline file: safe names, finite scores in [0, 1], typed conditions.
    ``ValueError`` names the field by its path (``models.<model>.<task>.scores[2]``)."""
    if not isinstance(models, dict):
        raise ValueError("field 'models' must be an object of models")
    for model, tasks in models.items():
        if not is_safe_name(model):
            raise ValueError(f"model name {model[:60]!r} holds characters a model name cannot")
        if not isinstance(tasks, dict):
            raise ValueError(f"field 'models.{model}' must be an object of tasks")
        for task, cell in tasks.items():
            where = f"models.{model}.{task}"
            if not PLAIN_NAME.fullmatch(task):
                raise ValueError(f"task name {task[:60]!r} in models.{model} holds characters a task name cannot")
            if not isinstance(cell, dict) or not isinstance(cell.get("scores"), list):
                raise ValueError(f"field '{where}.scores' must be a list of scores")
            for i, score in enumerate(cell["scores"]):
                if not _kind(score, "float") or not 0.0 <= score <= 1.0:
                    raise ValueError(f"field '{where}.scores[{i}]' is {score!r}; a score is a finite number in [0, 1]")
            conditions = cell.get("conditions")
            if not isinstance(conditions, dict):
                raise ValueError(f"field '{where}.conditions' must be an object")
            types = {"protocol": "str", "iterations": "int", "time_limit_s": "float", "data": "str"}
            for name, expected in types.items():
                if name not in conditions:
                    raise ValueError(f"field '{where}.conditions.{name}' is missing")
                _check(f"{where}.conditions.{name}", conditions[name], expected)
            for name in ("sandbox", "hardware", "isolation"):
                if name in cell:
                    _check(f"{where}.{name}", cell[name], "str")
