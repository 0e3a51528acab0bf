"""The time-horizon figures, with matplotlib (Agg canvas, never pyplot).

- the fit: every model's points, grouped (the share of runs that reached a threshold at each
  estimate, sized by its runs), its fitted curve over log hours and its horizon;
- the timeline: each horizon with its 95% interval against the model's release date, the
  published models in grey beside ours; a model of ours without a known release date is drawn
  as a dashed level across the timeline.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_weirdml.horizons.fit import Points
from pytest_weirdml.report.figures import _new, _png

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
PUBLISHED = "#9a9a9a"
# Work hours: a day is 8 h, a week 40 h, a month 160 h.
TICKS = {1 / 60: "1 min", 10 / 60: "10 min", 1: "1 h", 8: "1 day", 40: "1 week", 160: "1 month", 1920: "1 year"}


@dataclass(frozen=True)
class Dated:
    """A horizon for the timeline: hours with interval, and the release date when known."""

    name: str
    hours: float
    low: float
    high: float
    release_date: str = ""
    published: bool = False


def _hour_ticks(axis: Any, low: float, high: float) -> None:
    shown = {h: label for h, label in TICKS.items() if low <= h <= high}
    axis.set_ticks(list(shown), labels=list(shown.values()))


def fit_figure(points: Mapping[str, Points], fits: Mapping[str, Mapping[str, Any]]) -> bytes:
    """Each model's grouped points and fitted curve over log10 hours (PNG)."""
    fig = _new(8.5, 4.8)
    ax = fig.add_subplot()
    xs = np.concatenate([p.x for p in points.values()]) if points else np.array([0.0])
    lo, hi = float(xs.min()) - 0.5, float(xs.max()) + 0.5
    grid = np.linspace(lo, hi, 200)
    for i, (name, p) in enumerate(points.items()):
        color = PALETTE[i % len(PALETTE)]
        n = p.successes + p.failures
        ax.scatter(10**p.x, p.successes / n, s=12 + 4 * n, color=color, alpha=0.35, edgecolors="none")
        fit = fits.get(name)
        if fit is None:
            continue
        x50, beta = np.log10(fit["x50_fit_hours"]), fit["beta"]
        ax.plot(10**grid, 1 / (1 + np.exp(-beta * (grid - x50))), color=color, label=f"{name}: {_hours(fit)}")
        if not fit.get("beyond"):
            ax.axvline(fit["x50_hours"], color=color, linestyle=":", linewidth=1)
    ax.axhline(0.5, color="#bbbbbb", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(10**lo, 10**hi)
    _hour_ticks(ax.xaxis, 10**lo, 10**hi)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("hours a person needs to reach the threshold (estimated)")
    ax.set_ylabel("share of runs that reached it")
    ax.set_title("Time-horizon fit: p(success) = sigmoid(beta (log10 h - x50))")
    if fits:
        ax.legend(loc="lower left", fontsize=8)
    return _png(fig)


def _hours(fit: Mapping[str, Any]) -> str:
    if fit.get("beyond"):
        return f"{fit['beyond']} every estimate"
    return f"{fmt_hours(fit['x50_hours'])} [{fmt_hours(fit['q025'])}, {fmt_hours(fit['q975'])}]"


def fmt_hours(hours: float) -> str:
    """``0.39`` -> ``24 min``; ``30.6`` -> ``30.6 h``."""
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h" if hours < 100 else f"{hours:.0f} h"


def timeline_figure(entries: Sequence[Dated]) -> bytes:
    """Horizons against release dates, log hours (PNG)."""
    fig = _new(8.5, 4.8)
    ax = fig.add_subplot()
    dated = [e for e in entries if e.release_date]
    for i, e in enumerate(entries):
        color = PUBLISHED if e.published else PALETTE[i % len(PALETTE)]
        if e.release_date:
            when = dt.date.fromisoformat(e.release_date[:10])
            err = [[e.hours - e.low], [e.high - e.hours]]
            ax.errorbar([when], [e.hours], yerr=err, fmt="o", color=color, capsize=3)
            ax.annotate(e.name, (when, e.hours), textcoords="offset points", xytext=(5, 4), fontsize=7, color=color)
        else:
            ax.axhline(e.hours, color=color, linestyle="--", linewidth=1.2)
            ax.axhspan(e.low, e.high, color=color, alpha=0.08)
            ax.annotate(
                f"{e.name} (release date unknown)",
                (0.01, e.hours),
                xycoords=("axes fraction", "data"),
                textcoords="offset points",
                xytext=(0, 3),
                fontsize=7,
                color=color,
            )
    values = [v for e in entries for v in (e.low, e.high) if v > 0] or [0.1, 10.0]
    low, high = min(values) / 2, max(values) * 2
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    _hour_ticks(ax.yaxis, low, high)
    if not dated:
        ax.set_xticks([])
    ax.set_xlabel("release date")
    ax.set_ylabel("time horizon (50%)")
    ax.set_title("Time horizons: median and 95% interval (grey: published)")
    return _png(fig)
