"""The published time horizons and the data they were fitted on, shipped in ``horizons/data/``
(MIT licence, ``data/LICENSE``): ``published_runs.json`` (every published run's score),
``all_estimates.json`` (four estimators x 17 tasks x 5 thresholds, in hours) and
``published_horizons.json`` (the published fits of 10 models)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pytest_weirdml.horizons.estimates import parse_threshold

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class PublishedModel:
    """A model of the published horizons: its name there, its runs and its published fit."""

    name: str
    display_name: str
    release_date: str
    scores: dict[str, list[float]]
    published: dict[str, Any]


@cache
def _load(name: str) -> Any:
    return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))


def estimate_pairs() -> dict[str, list[tuple[float, float]]]:
    """Published task -> every (threshold, hours) of its estimators."""
    out: dict[str, list[tuple[float, float]]] = {}
    for task, entry in _load("all_estimates.json").items():
        out[task] = [
            (threshold, float(cell["hours"]))
            for by_threshold in entry["estimates"].values()
            for key, cell in by_threshold.items()
            if (threshold := parse_threshold(key)) is not None and isinstance(cell.get("hours"), int | float)
        ]
    return out


def estimator_hours(task: str) -> dict[str, dict[str, float]]:
    """A published task's hours as ``[time_estimates.hours]`` holds them (no point for 0 h)."""
    entry = _load("all_estimates.json")[task]["estimates"]
    return {
        name: {key: float(cell["hours"]) for key, cell in by.items() if cell.get("hours", 0) > 0}
        for name, by in entry.items()
    }


def published_models() -> list[PublishedModel]:
    """The models of ``published_horizons.json``, in its order, with their published runs."""
    runs = _load("published_runs.json")["models"]
    models = []
    for name, fit in _load("published_horizons.json").items():
        tasks = runs[name]["tasks"]
        models.append(
            PublishedModel(
                name=name,
                display_name=fit["display_name"],
                release_date=fit.get("release_date") or "",
                # In the published order: the bootstrap draws tasks by their position.
                scores={task: [float(r["score"]) for r in entry["runs"]] for task, entry in tasks.items()},
                published=fit,
            )
        )
    return models


def release_dates() -> dict[str, str]:
    """Model slug (``claude-opus-4-6``) and display name -> release date, for every published model."""
    out: dict[str, str] = {}
    for entry in _load("published_runs.json")["models"].values():
        if entry.get("release_date"):
            for key in (entry.get("model_slug"), entry.get("display_name"), entry.get("internal_name")):
                if key:
                    out[str(key)] = str(entry["release_date"])
    return out
