"""The time horizons in the session's outputs: lines for the terminal summary, and a section of
report.html with the fit and timeline figures."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_weirdml.horizons.figures import Dated, fit_figure, fmt_hours, timeline_figure
from pytest_weirdml.horizons.fit import Points
from pytest_weirdml.horizons.published import published_models, release_dates
from pytest_weirdml.table import align


def release_date(model: str) -> str:
    """A model's release date when the published data knows it (by its id without the provider)."""
    dates = release_dates()
    return dates.get(model) or dates.get(model.partition(":")[2]) or ""


def timeline_entries(fits: Mapping[str, Mapping[str, Any]]) -> list[Dated]:
    """Our fits, then the published models' own published horizons."""
    # A horizon past every estimate has no place on the timeline (the tables say where it lies).
    ours = [
        Dated(name, fit["x50_hours"], fit["q025"], fit["q975"], release_date(name))
        for name, fit in fits.items()
        if not fit.get("beyond")
    ]
    theirs = [
        Dated(
            m.display_name,
            m.published["x50_hours_q50"],
            m.published["x50_hours_q025"],
            m.published["x50_hours_q975"],
            m.release_date,
            published=True,
        )
        for m in published_models()
    ]
    return ours + theirs


def _horizon_text(fit: Mapping[str, Any]) -> str:
    """The median, or where it lies when every point (or none) succeeded: past the estimates."""
    if fit.get("beyond") == "above":
        return f"> {fmt_hours(fit['estimate_hours'][1])}"
    if fit.get("beyond") == "below":
        return f"< {fmt_hours(fit['estimate_hours'][0])}"
    return fmt_hours(fit["x50_hours"])


def table_rows(fits: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            name,
            _horizon_text(fit),
            "-" if fit.get("beyond") else f"[{fmt_hours(fit['q025'])}, {fmt_hours(fit['q975'])}]",
            str(fit["n_data"]),
            str(fit["n_success"]),
        ]
        for name, fit in fits.items()
    ]


HEADER = ["model", "horizon", "95% CI", "points", "successes"]


def used_lines(horizons: Mapping[str, Any]) -> list[str]:
    lines = [f"tasks used: {', '.join(f'{t} ({how})' for t, how in horizons['estimates'].items())}"]
    if horizons["tasks_without_estimates"]:
        lines.append(f"left out (no [time_estimates]): {', '.join(horizons['tasks_without_estimates'])}")
    return lines


def terminal_lines(summary: Mapping[str, Any]) -> list[str]:
    """The horizon section of the terminal summary (none without estimates)."""
    horizons = summary.get("horizons")
    if not horizons:
        return []
    return [
        f"time horizon (hours a person needs, at which a model succeeds with 50%; "
        f"{horizons['resamples']} task resamples):",
        *used_lines(horizons),
        *align(HEADER, table_rows(horizons["models"])),
    ]


def _img(fid: str, title: str, png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f"<figure id='fig-{fid}'><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def html_section(summary: Mapping[str, Any], points: Mapping[str, Points], *, figures: bool) -> str:
    """The "Time horizon" section of report.html ("" without estimates)."""
    horizons = summary.get("horizons")
    if not horizons:
        return ""
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table_rows(horizons["models"])
    )
    parts = [
        "<h2 id='horizon'>Time horizon</h2>",
        f"<p class='meta'>{e(horizons['method'])}; 95% interval from {horizons['resamples']} resamples "
        "(README: how horizons are computed).</p>",
        *(f"<p class='meta'>{e(line)}</p>" for line in used_lines(horizons)),
        f"<table id='horizons'><tr>{head}</tr>{body}</table>",
    ]
    if figures:
        fits = horizons["models"]
        parts.append(
            _img(
                "horizon-fit",
                "Time-horizon fit",
                fit_figure(points, fits),
                "Dots: the share of a model's runs that reached a threshold, at each estimate of the hours a person "
                "needs for it (larger: more runs); lines: the fit; dotted: the horizon.",
            )
        )
        parts.append(
            _img(
                "horizon-timeline",
                "Time horizons over release dates",
                timeline_figure(timeline_entries(fits)),
                "Each model's horizon with its 95% interval; grey: the published fits (on all 17 tasks, "
                "published_horizons.json). Ours stand on the tasks listed above only.",
            )
        )
    return "\n".join(parts)


def figure_files(
    fits: Mapping[str, Mapping[str, Any]], points: Mapping[str, Points], entries: Sequence[Dated]
) -> dict[str, bytes]:
    """The two figures as PNG files for ``weirdml horizons``."""
    return {"horizon_fit.png": fit_figure(points, fits), "horizon_timeline.png": timeline_figure(entries)}
