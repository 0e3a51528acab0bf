"""A baseline file is untrusted input: every field the gate reads from it is checked first.

A baseline is what a CI cache or a colleague hands over (``--weirdml-baseline``, ``weirdml
compare``). Before it becomes a ``Baseline``:

- ``created`` and ``generator`` are strings, ``sessions`` a list of session names;
- ``models`` holds safe model and task names, finite scores in [0, 1] and typed cell fields
  (``schema.check_baseline_models``);
- each cell's ``conditions`` holds exactly ``protocol`` and ``data`` (plain names), ``iterations``
  (at least 1) and ``time_limit_s`` (above 0): they are printed when two sessions differ.

A field that fails raises ``ValueError`` naming it by its path (``models.<model>.<task>.conditions``)
and what it must be; a value or key it quotes is cut short and stripped of control characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_weirdml import schema
from pytest_weirdml.untrusted import printable

CONDITIONS = ("protocol", "iterations", "time_limit_s", "data")


def shown(value: Any) -> str:
    """A value as an error message may quote it: its repr, at most 60 characters, printable."""
    text = repr(value)
    return printable(text if len(text) <= 60 else text[:57] + "...")


def check(raw: Mapping[str, Any]) -> None:
    """The fields of a baseline file (its ``format`` and ``version`` already known good)."""
    for name in ("created", "generator"):
        if name in raw and not isinstance(raw[name], str):
            raise ValueError(f"field {name!r} is {shown(raw[name])}; it must be a string")
    sessions = raw.get("sessions", [])
    if not isinstance(sessions, list) or not all(
        isinstance(s, str) and schema.PLAIN_NAME.fullmatch(s) for s in sessions
    ):
        raise ValueError(f"field 'sessions' is {shown(sessions)}; it must be a list of session names")
    models = raw.get("models")
    schema.check_baseline_models(models)
    assert isinstance(models, dict)  # what check_baseline_models just made sure of
    for model, tasks in models.items():
        for task, cell in tasks.items():
            check_conditions(f"models.{model}.{task}.conditions", cell["conditions"])


def check_conditions(where: str, conditions: Mapping[str, Any]) -> None:
    """Exactly the four conditions, each of its type (``schema`` checked their presence)."""
    unknown = sorted(set(conditions) - set(CONDITIONS))
    if unknown:
        listed = ", ".join(shown(key) for key in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise ValueError(f"field {where!r} holds unknown conditions ({listed}); it holds {', '.join(CONDITIONS)}")
    for name in ("protocol", "data"):
        if not schema.PLAIN_NAME.fullmatch(conditions[name]):
            raise ValueError(
                f"field '{where}.{name}' is {shown(conditions[name])}; it must be a name of letters, digits, "
                "'_', '-' and '.'"
            )
    if conditions["iterations"] < 1:
        raise ValueError(f"field '{where}.iterations' is {shown(conditions['iterations'])}; it must be at least 1")
    limit = conditions["time_limit_s"]
    if not math.isfinite(limit) or limit <= 0:
        raise ValueError(f"field '{where}.time_limit_s' is {shown(limit)}; it must be seconds above 0")
