"""A task's ``[time_estimates]``: how many hours a person needs to reach each accuracy.

In ``task.toml``::

    [time_estimates]
    source = "published"        # published | human | estimated
    task = "shapes_easy"        # published: the task's name in the published estimates
    who = "..."                 # human and estimated: who measured or estimated the hours
    how = "..."                 # estimated: how they were estimated
    [time_estimates.hours]      # estimator -> {"<accuracy>%" = hours}; work hours (a day is 8 h)
    "claude-opus-4.5" = { "25%" = 0.5, "50%" = 1.5, "70%" = 4, "90%" = 12, "95%" = 30 }

Every estimator's hours are points of the fit (``horizons.fit``). A record keeps the table as
``as_dict`` gives it, so a session's horizons come from its directory alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SOURCES = ("published", "human", "estimated")
KEYS = {"source", "task", "who", "how", "hours"}
# What each source must say besides its hours.
REQUIRED = {"published": ("task",), "human": ("who",), "estimated": ("who", "how")}
# The most estimators a table holds, and thresholds per estimator (the published ones have four
# and five): a record's estimates are untrusted input, and every point is fitted many times.
MAX_ESTIMATORS = 32
MAX_THRESHOLDS = 32


@dataclass(frozen=True)
class TimeEstimates:
    """Hours per estimator and threshold (an accuracy in (0, 1)), and where they come from."""

    source: str
    hours: Mapping[str, Mapping[float, float]]
    task: str = ""
    who: str = ""
    how: str = ""

    def pairs(self) -> list[tuple[float, float]]:
        """Every (threshold, hours) point, all estimators together."""
        return [(t, h) for by_threshold in self.hours.values() for t, h in sorted(by_threshold.items())]

    def as_dict(self) -> dict[str, Any]:
        """The table as task.toml writes it (thresholds as ``"25%"``), for records and summaries."""
        out: dict[str, Any] = {"source": self.source}
        out.update({k: v for k, v in (("task", self.task), ("who", self.who), ("how", self.how)) if v})
        out["hours"] = {name: {threshold_key(t): h for t, h in sorted(by.items())} for name, by in self.hours.items()}
        return out

    def describe(self) -> str:
        """Where the hours come from, in a few words."""
        if self.source == "published":
            return f"published estimates of {self.task}"
        return f"{self.source} by {self.who}" + (f": {self.how}" if self.how else "")


def threshold_key(threshold: float) -> str:
    return f"{threshold * 100:g}%"


def parse_threshold(key: str) -> float | None:
    """``"25%"`` -> 0.25 (as the published ``25/100``); ``None`` for anything else."""
    if not key.endswith("%"):
        return None
    try:
        percent = float(key[:-1])
    except ValueError:
        return None
    return percent / 100 if 0 < percent < 100 else None


def parse_estimates(raw: Any, where: str) -> TimeEstimates:
    """Check a ``[time_estimates]`` table; ``ValueError`` names ``where`` (the file) and the key."""

    def fail(key: str, problem: str) -> ValueError:
        return ValueError(f"{where}: [time_estimates] {key} {problem}")

    if not isinstance(raw, dict):
        raise fail("", f"must be a table, got {raw!r}")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise fail(str(unknown), f"unknown; known keys are {sorted(KEYS)}")
    source = raw.get("source")
    if source not in SOURCES:
        raise fail("source", f"must be one of {', '.join(SOURCES)}, got {source!r}")
    texts = {}
    for key in ("task", "who", "how"):
        value = raw.get(key, "")
        if not isinstance(value, str):
            raise fail(key, f"must be a string, got {value!r}")
        texts[key] = value.strip()
    for key in REQUIRED[source]:
        if not texts[key]:
            raise fail(key, f"is required when source = {source!r}: say {_MEANING[key]}")
    hours = raw.get("hours")
    if not isinstance(hours, dict) or not hours:
        raise fail("hours", 'must be a table of estimators, each {"25%" = hours, ...}')
    if len(hours) > MAX_ESTIMATORS:
        raise fail("hours", f"holds {len(hours)} estimators; at most {MAX_ESTIMATORS} are read")
    parsed: dict[str, dict[float, float]] = {}
    for name, by_threshold in hours.items():
        if not isinstance(by_threshold, dict) or not by_threshold:
            raise fail(f"hours.{name}", f'must be a table {{"25%" = hours, ...}}, got {by_threshold!r}')
        if len(by_threshold) > MAX_THRESHOLDS:
            raise fail(f"hours.{name}", f"holds {len(by_threshold)} thresholds; at most {MAX_THRESHOLDS} are read")
        parsed[name] = {}
        for key, value in by_threshold.items():
            threshold = parse_threshold(key)
            if threshold is None:
                raise fail(f"hours.{name}.{key!r}", 'is not an accuracy: write it as a percentage, "25%"')
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise fail(f"hours.{name}.{key!r}", f"must be a positive number of hours, got {value!r}")
            parsed[name][threshold] = float(value)
    return TimeEstimates(source=source, hours=parsed, **texts)


_MEANING = {
    "task": "the task's name in the published estimates",
    "who": "who measured or estimated the hours",
    "how": "how the hours were estimated",
}


def from_record(raw: Any) -> TimeEstimates | None:
    """The estimates a record kept (``as_dict``); ``None`` when it kept none or they do not parse."""
    if raw is None:
        return None
    try:
        return parse_estimates(raw, "record")
    except ValueError:
        return None
