"""The published benchmark's figures, drawn with matplotlib from a session summary.

matplotlib is imported here only, when a report is rendered (the ``report`` extra). Figures are
drawn on ``matplotlib.figure.Figure`` with the Agg canvas, never through pyplot, so rendering
neither changes the user's backend nor leaks global figures.

``published`` rows, when given, are those of the published table that have every task of
``summary["published_tasks"]``; beside them our models are drawn by their mean over exactly
those tasks (``models[...]["published"]``), so both sides stand on the same tasks.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_weirdml.report.published import PublishedRow, pick_published

OURS = "#1f77b4"
PUBLISHED = "#9a9a9a"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    png: bytes
    caption: str


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _new(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


@dataclass(frozen=True)
class _Row:
    """One line of the model summary: one of our models or a published one."""

    name: str
    acc: float | None
    low: float | None
    high: float | None
    task_accs: list[float]
    cost: float | None
    code: dict[str, float] | None
    exec_s: list[float]
    ours: bool


def _ours(m: dict[str, Any], published: Sequence[PublishedRow]) -> dict[str, Any] | None:
    """Our model's estimate as the figures show it: over the published tasks when published rows
    are drawn beside it (both sides on the same tasks), else over all of its tasks."""
    return m.get("published") if published else m["overall"]


def _rows(summary: dict[str, Any], published: Sequence[PublishedRow]) -> list[_Row]:
    shared = summary["published_tasks"]
    rows = []
    for name, m in summary["models"].items():
        est = _ours(m, published)
        rows.append(
            _Row(
                name,
                est["mean"] if est else None,
                est["ci_low"] if est else None,
                est["ci_high"] if est else None,
                [t["mean"] for task, t in m["tasks"].items() if not published or task in shared],
                m.get("cost_per_run_usd"),
                m.get("code_lines"),
                m.get("exec_s", []),
                True,
            )
        )
    for row in pick_published(published, shared):
        # The published SE is over all its tasks; scaled to ours it would mislead, so no interval.
        rows.append(
            _Row(
                f"{row.name} (published)",
                row.mean_over(shared),
                None,
                None,
                [row.task_acc[t] for t in shared],
                row.cost_per_run_usd,
                None,
                [],
                False,
            )
        )
    return sorted(rows, key=lambda r: r.acc or 0.0)


def _on_shared(summary: dict[str, Any], published: Sequence[PublishedRow]) -> str:
    if not published:
        return ""
    return (
        " Accuracies here, ours and the published rows alike, are means over the tasks both ran: "
        f"{', '.join(summary['published_tasks'])}."
    )


def model_summary(summary: dict[str, Any], published: Sequence[PublishedRow]) -> Figure:
    rows = _rows(summary, published)
    fig = _new(13, 1.2 + 0.45 * len(rows))
    ax_acc, ax_cost, ax_code, ax_exec = fig.subplots(1, 4, sharey=False, width_ratios=[3, 1.4, 1.4, 1.6])
    ys = list(range(len(rows)))
    for y, row in zip(ys, rows, strict=True):
        color = OURS if row.ours else PUBLISHED
        if row.acc is not None:
            ax_acc.barh(y, row.acc, color=color, alpha=0.35 if row.ours else 0.25, height=0.7)
            if row.low is not None and row.high is not None:
                ax_acc.errorbar(
                    row.acc,
                    y,
                    xerr=[[row.acc - row.low], [row.high - row.acc]],
                    fmt="o",
                    color=color,
                    capsize=3,
                    markersize=4,
                )
        ax_acc.scatter(row.task_accs, [y] * len(row.task_accs), marker="|", s=80, color="black", zorder=3)
        if row.cost is not None:
            ax_cost.barh(y, row.cost, color=color, height=0.6)
        if row.code:
            ax_code.plot([row.code["p10"], row.code["p90"]], [y, y], color=color, linewidth=3, alpha=0.6)
            ax_code.plot(row.code["p50"], y, "o", color="black", markersize=4)
    for ax in (ax_acc, ax_cost, ax_code):
        ax.set_yticks(ys, [r.name for r in rows] if ax is ax_acc else [""] * len(rows))
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.grid(axis="x", alpha=0.3)
    ax_acc.set_xlim(0, 1)
    ax_acc.set_xlabel("accuracy (mean over tasks, 95% CI; | = each task)")
    ax_cost.set_xlabel("cost/run (USD)")
    ax_code.set_xlabel("code lines p10-p90, • p50")
    if not any(r.cost is not None for r in rows):
        ax_cost.text(
            0.5,
            0.5,
            "no prices\n(offline models)",
            ha="center",
            va="center",
            transform=ax_cost.transAxes,
            color="#666666",
        )
    ours = [r for r in rows if r.ours and r.exec_s]
    if ours:
        top = max(max(r.exec_s) for r in ours)
        for i, row in enumerate(reversed(ours)):
            ax_exec.hist(
                row.exec_s,
                bins=20,
                range=(0, max(top, 1e-3)),
                histtype="step",
                linewidth=1.5,
                color=PALETTE[i % len(PALETTE)],
                label=row.name,
            )
        ax_exec.set_xlabel("script execution time (s)")
        ax_exec.set_ylabel("scripts")
        ax_exec.legend(fontsize=7)
    else:
        _empty(ax_exec, "no scripts ran")
    fig.suptitle("Model summary")
    return Figure(
        "model-summary",
        "Model summary",
        _png(fig),
        "Overall accuracy with 95% bootstrap interval and each task's mean; cost per run; "
        "code length range; execution-time histogram." + _on_shared(summary, published),
    )


def _scatter(
    summary: dict[str, Any],
    published: Sequence[PublishedRow],
    key: str,
    pub_key: Callable[[PublishedRow], float | None],
    xlabel: str,
    fid: str,
    title: str,
) -> Figure:
    shared = summary["published_tasks"]
    ours_known = any(m.get(key) for m in summary["models"].values())
    # An empty chart still says why it is empty, at a size that does not waste the page.
    fig = _new(7.5, 5 if ours_known or published else 1.6)
    ax = fig.subplots()
    pub = [(x, y) for r in published if (x := pub_key(r)) and (y := r.mean_over(shared)) is not None and x > 0]
    ours = [(name, m[key], est) for name, m in summary["models"].items() if m.get(key) and (est := _ours(m, published))]
    if pub:
        ax.scatter(
            [p[0] for p in pub],
            [p[1] for p in pub],
            color=PUBLISHED,
            s=14,
            alpha=0.7,
            label="published (mean over the shared tasks)",
        )
    for i, (name, x, overall) in enumerate(ours):
        color = PALETTE[i % len(PALETTE)]
        ax.errorbar(
            x,
            overall["mean"],
            yerr=[[overall["mean"] - overall["ci_low"]], [overall["ci_high"] - overall["mean"]]],
            fmt="o",
            color=color,
            capsize=3,
            label=name,
        )
    if not pub and not ours:
        _empty(ax, f"no {xlabel.split(' (')[0]} data (offline models have none)")
    else:
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    ax.set_title(title)
    return Figure(fid, title, _png(fig), f"{title}; bars: 95% bootstrap interval." + _on_shared(summary, published))


def cost_vs_accuracy(summary: dict[str, Any], published: Sequence[PublishedRow]) -> Figure:
    return _scatter(
        summary,
        published,
        "cost_per_run_usd",
        lambda r: r.cost_per_run_usd,
        "cost per run (USD, log scale)",
        "cost-accuracy",
        "Cost vs accuracy",
    )


def tokens_vs_accuracy(summary: dict[str, Any], published: Sequence[PublishedRow]) -> Figure:
    return _scatter(
        summary,
        published,
        "mean_output_tokens",
        lambda r: r.mean_output_tokens,
        "mean output tokens (log scale)",
        "tokens-accuracy",
        "Output tokens vs accuracy",
    )


def progression(summary: dict[str, Any]) -> Figure:
    fig = _new(7.5, 5)
    ax = fig.subplots()
    for i, (name, m) in enumerate(summary["models"].items()):
        color = PALETTE[i % len(PALETTE)]
        steps = m["progression"]
        xs = [s["iteration"] for s in steps]
        ax.plot(xs, [s["mean"] for s in steps], "o-", color=color, label=name)
        ax.fill_between(xs, [s["ci_low"] for s in steps], [s["ci_high"] for s in steps], color=color, alpha=0.2)
    ax.set_xlabel("iteration")
    ax.set_ylabel("best accuracy so far")
    ax.set_ylim(0, 1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Accuracy progression over iterations")
    return Figure(
        "progression",
        "Accuracy progression",
        _png(fig),
        "Mean over tasks of the best accuracy after each iteration, with 95% bootstrap bands.",
    )


def per_task(summary: dict[str, Any], published: Sequence[PublishedRow]) -> Figure:
    tasks = summary["tasks"]
    picks = pick_published(published, summary["published_tasks"], count=4)
    cols = min(3, max(1, len(tasks)))
    rows = (len(tasks) + cols - 1) // cols
    names = list(summary["models"])
    fig = _new(4.5 * cols, 0.8 + (1.2 + 0.3 * (len(names) + len(picks))) * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, task in zip(axes, tasks, strict=False):
        labels = []
        for y, name in enumerate(names):
            cell = summary["models"][name]["tasks"].get(task)
            labels.append(name)
            if cell is None:
                continue
            color = PALETTE[y % len(PALETTE)]
            ax.barh(y, cell["mean"], color=color, alpha=0.35, height=0.7)
            ax.errorbar(
                cell["mean"],
                y,
                xerr=[[cell["mean"] - cell["ci_low"]], [cell["ci_high"] - cell["mean"]]],
                fmt="none",
                ecolor=color,
                capsize=3,
            )
            scores = cell["scores"]
            jitter = [y + 0.25 * ((i % 5) - 2) / 2 for i in range(len(scores))]
            ax.scatter(scores, jitter, color="#555555", s=12, zorder=3)
        for j, row in enumerate(picks):
            y = len(names) + j
            labels.append(f"{row.name} (pub.)")
            if task in row.task_acc:
                ax.barh(y, row.task_acc[task], color=PUBLISHED, alpha=0.4, height=0.7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_title(task, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[len(tasks) :]:
        ax.set_visible(False)
    fig.suptitle("Per task: mean with 95% CI; grey dots are runs")
    return Figure("per-task", "Per task", _png(fig), "Each task's mean run score per model; every run as a grey dot.")


def all_figures(summary: dict[str, Any], published: Sequence[PublishedRow] = ()) -> list[Figure]:
    return [
        model_summary(summary, published),
        cost_vs_accuracy(summary, published),
        tokens_vs_accuracy(summary, published),
        progression(summary),
        per_task(summary, published),
    ]
